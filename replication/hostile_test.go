package replication

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
)

// fakePrimary accepts one link from r (made a replica of it) and returns
// the connection and a reader of the commands it sends.
func fakePrimary(t *testing.T, r *Replication) (net.Conn, *bufio.Reader) {
	t.Helper()
	ln := testkit.Listen(t)
	if _, err := r.ReplicaOf("127.0.0.1", testkit.Port(ln)); err != nil {
		t.Fatal(err)
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc, bufio.NewReader(nc)
}

// readCommand reads one RESP command, its words; io.EOF (or another
// error) when the replica closed the link.
func readCommand(nc net.Conn, br *bufio.Reader) ([]string, error) {
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	var out []string
	for range n {
		if _, err := br.ReadString('\n'); err != nil {
			return nil, err
		}
		w, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		out = append(out, strings.TrimRight(w, "\r\n"))
	}
	return out, nil
}

// linkClosed reports whether the replica closed the link: it reads until
// EOF, within 10 s (acks are an hour apart in these tests, but one is
// sent as the link comes up).
func linkClosed(nc net.Conn) bool {
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, nc)
	return err == nil || errors.Is(err, io.EOF) || !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A primary whose reply line never ends is dropped once the line passes
// the read buffer: the replica held the whole line (bufio's ReadString),
// however long, until its repl-timeout.
func TestReplicaRefusesEndlessReplyLine(t *testing.T) {
	r, _, _ := newTest(t, Config{AckInterval: time.Hour})
	nc, br := fakePrimary(t, r)
	if cmd, err := readCommand(nc, br); err != nil || cmd[0] != "REPLCONF" {
		t.Fatalf("first command %q, %v", cmd, err)
	}
	go func() { // a 200 KB line, then a newline
		_, _ = nc.Write([]byte("+" + strings.Repeat("x", 200<<10) + "\r\n"))
	}()
	cmd, err := readCommand(nc, br)
	if err == nil {
		t.Fatalf("after a 200 KB reply line the replica sent %q, want the link closed", cmd[0])
	}
}

// A primary that streams an entry longer than any frame (a record
// announcing millions of hits) is dropped once the entry passes a frame's
// length: the replica kept every byte of it, up to 160 MB, decoding it
// again from its start at every frame.
func TestReplicaRefusesEndlessEntry(t *testing.T) {
	r, _, _ := newTest(t, Config{AckInterval: time.Hour, Logf: func(_, f string, a ...any) { t.Logf(f, a...) }})
	nc, br := fakePrimary(t, r)
	for {
		cmd, err := readCommand(nc, br)
		if err != nil {
			t.Fatal(err)
		}
		if cmd[0] == "REPLSYNC" {
			if _, err := nc.Write([]byte("+CONTINUE " + cmd[2] + " " + cmd[3] + "\r\n")); err != nil {
				t.Fatal(err)
			}
			break
		}
		if _, err := nc.Write([]byte("+OK\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	// 'W', a GCRA record of key "k", four words, then 8 M hits announced.
	head := []byte{entryWrite, 1, 1, 1, 'k', 0, 0, 0, 0}
	head = binary.AppendUvarint(head, maxFrame)
	done := make(chan bool, 1)
	go func() { done <- linkClosed(nc) }()
	body := make([]byte, 64<<10) // zero bytes: each a whole varint
	var w []byte
	w = appendFrame(w, frameStream, head)
	for sent := 0; sent < maxFrame+(1<<20); sent += len(body) {
		w = appendFrame(w, frameStream, body)
		_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(w); err != nil {
			break // the replica closed the link
		}
		w = w[:0]
	}
	if !<-done {
		t.Fatal("the replica kept reading an entry longer than a frame")
	}
}

// recordNeed's bound is never more than a whole record's length, for
// every prefix of one, so a replica waiting for it never stalls.
func TestRecordNeedIsALowerBound(t *testing.T) {
	rec := engine.Record{Key: []byte("a sliding log"), Kind: limiter.KindSlidingLog, ExpireMs: 1 << 40}
	for i := range 300 {
		rec.Hits = append(rec.Hits, limiter.Hit{At: int64(i) << 30, N: int64(i)})
	}
	b := appendEntry(nil, rec, engine.Written, 0, 1)
	for cut := 1; cut < len(b); cut++ {
		if need := entryNeed(b[:cut]); need == 0 || need > len(b) {
			t.Fatalf("prefix of %d of %d bytes: need %d", cut, len(b), need)
		}
	}
}

// A promotion (REPLICAOF NO ONE) between the primary's +FULLCOPY and the
// copy's start leaves the server serving its keys: the link went on to
// set LOADING and discard the keys after the promotion had ended
// LOADING, so the promoted server answered LOADING until the next
// REPLICAOF, with no keys.
func TestPromotionBeforeCopyStarts(t *testing.T) {
	var loading atomic.Bool
	r, eng, _ := newTest(t, Config{AckInterval: time.Hour, SetLoading: func(on bool) { loading.Store(on) }})
	v := eng.NewView()
	if _, err := v.Import(engine.Record{Key: []byte("kept"), Kind: limiter.KindGCRA, ExpireMs: time.Now().Add(time.Hour).UnixMilli(), Words: [3]int64{time.Now().Add(time.Hour).UnixNano()}}); err != nil {
		t.Fatal(err)
	}
	atCopy, promoted := make(chan struct{}), make(chan struct{})
	r.hookBeforeCopy = func() { close(atCopy); <-promoted }
	nc, br := fakePrimary(t, r)
	for {
		cmd, err := readCommand(nc, br)
		if err != nil {
			t.Fatal(err)
		}
		if cmd[0] == "REPLSYNC" {
			if _, err := nc.Write([]byte("+FULLCOPY " + strings.Repeat("b", 40) + " 0\r\n")); err != nil {
				t.Fatal(err)
			}
			break
		}
		if _, err := nc.Write([]byte("+OK\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	<-atCopy
	r.mu.Lock()
	l := r.link
	r.mu.Unlock()
	if _, err := r.ReplicaOf("", 0); err != nil {
		t.Fatal(err)
	}
	close(promoted)
	select {
	case <-l.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the link still runs after the promotion")
	}
	if loading.Load() {
		t.Error("the promoted server is LOADING")
	}
	if !v.Exists([]byte("kept"), nil) {
		t.Error("the promoted server lost its keys")
	}
}

// A replica that announces a frame of megabytes is dropped at once: the
// primary allocated the announced length (up to 8 MiB a connection) and
// waited repl-timeout for it, where an ack is a few bytes.
func TestPrimaryDropsReplicaAnnouncingHugeFrame(t *testing.T) {
	r, _, _ := newTest(t, Config{AckInterval: time.Hour})
	_, serve, err := r.Sync(StreamVersion, "?", -1, "10.0.0.9", 7777)
	if err != nil {
		t.Fatal(err)
	}
	primary, replica := testkit.TCPPair(t)
	go serve(primary, nil)
	frame := binary.AppendUvarint([]byte{frameAck}, maxFrame)
	if _, err := replica.Write(frame); err != nil {
		t.Fatal(err)
	}
	if !linkClosed(replica) {
		t.Fatal("the primary kept the link of a replica announcing an 8 MiB frame")
	}
}

// A primary turned replica whose full copy from its new primary breaks
// off, then promoted, does not let its own former replicas continue from
// its old history: its keys are now part of the new primary's, not what
// that history says. It kept its old replication id as replid2, and a
// former replica asking to continue got +CONTINUE and kept keys the
// promoted server no longer has.
func TestPromotionMidCopyEndsTheOldHistory(t *testing.T) {
	var loading atomic.Bool
	r, eng, _ := newTest(t, Config{AckInterval: time.Hour, SetLoading: func(on bool) { loading.Store(on) }})
	v := eng.NewView()
	put := func(k string) {
		if _, err := v.Import(engine.Record{Key: []byte(k), Kind: limiter.KindGCRA, ExpireMs: time.Now().Add(time.Hour).UnixMilli(), Words: [3]int64{time.Now().Add(time.Hour).UnixNano()}}); err != nil {
			t.Fatal(err)
		}
	}
	// A primary with a replica at its end of stream.
	oldID := infoOf(r)["master_replid"]
	_, serve, err := r.Sync(StreamVersion, "?", -1, "10.0.0.9", 7777)
	if err != nil {
		t.Fatal(err)
	}
	primary, replica := testkit.TCPPair(t)
	go serve(primary, nil)
	// The feed comes on in serve, before its full copy: a key written
	// before that goes with the copy, not the stream.
	testkit.WaitFor(t, "the change feed on", eng.FeedOn)
	put("old")
	testkit.WaitFor(t, "the stream to carry the key", func() bool { return infoOf(r)["master_repl_offset"] != "0" })
	end := infoOf(r)["master_repl_offset"]
	replica.Close()
	// It becomes a replica of another primary, whose full copy starts...
	nc, br := fakePrimary(t, r)
	for {
		cmd, err := readCommand(nc, br)
		if err != nil {
			t.Fatal(err)
		}
		if cmd[0] == "REPLSYNC" {
			if cmd[2] != oldID || cmd[3] != end {
				t.Fatalf("REPLSYNC %q, want its own history %s %s", cmd[1:], oldID, end)
			}
			if _, err := nc.Write([]byte("+FULLCOPY " + strings.Repeat("b", 40) + " 0\r\n")); err != nil {
				t.Fatal(err)
			}
			break
		}
		if _, err := nc.Write([]byte("+OK\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "the copy to start", loading.Load)
	// ... and is promoted before it ends.
	if _, err := r.ReplicaOf("", 0); err != nil {
		t.Fatal(err)
	}
	if in := infoOf(r); in["master_replid2"] == oldID {
		t.Errorf("replid2 is the history the copy discarded: %v", in)
	}
	reply, _, err := r.Sync(StreamVersion, oldID, mustAtoi(t, end), "10.0.0.9", 7777)
	if err != nil || !strings.HasPrefix(reply, "+FULLCOPY ") {
		t.Errorf("a former replica asking to continue: %q, %v, want +FULLCOPY", reply, err)
	}
}
