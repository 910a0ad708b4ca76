package replication

import (
	"bufio"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
)

// testClock is the injected clock of Config.Now.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newTest(t *testing.T, cfg Config) (*Replication, *engine.Engine, *testClock) {
	t.Helper()
	clock := &testClock{}
	clock.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	eng, err := engine.New(engine.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Now = clock.now
	r := New(eng, cfg)
	t.Cleanup(func() { r.Close(); eng.Close() })
	return r, eng, clock
}

func infoOf(r *Replication) map[string]string {
	m := map[string]string{}
	for _, l := range r.InfoLines() {
		k, v, _ := strings.Cut(l, ":")
		m[k] = v
	}
	return m
}

func TestReplicaOfRefusedInClusterMode(t *testing.T) {
	r, _, _ := newTest(t, Config{ClusterMode: true})
	if _, err := r.ReplicaOf("127.0.0.1", 6379); !errors.Is(err, ErrClusterMode) {
		t.Fatalf("ReplicaOf in cluster mode: %v", err)
	}
	if _, _, err := r.Sync(StreamVersion, "?", -1, "127.0.0.1", 1); !errors.Is(err, ErrSyncClusterMode) {
		t.Fatalf("Sync in cluster mode: %v", err)
	}
}

// A replica whose primary cannot be reached reports its link down, since
// when by the injected clock; promoted, it starts a new history and keeps
// the one it had as replid2.
func TestLinkDownAndPromotion(t *testing.T) {
	ln := testkit.Listen(t)
	port := testkit.Port(ln)
	ln.Close() // nobody listens there
	r, _, clock := newTest(t, Config{})
	first := infoOf(r)["master_replid"]
	if msg, err := r.ReplicaOf("127.0.0.1", port); err != nil || msg != "OK" {
		t.Fatalf("ReplicaOf = %q, %v", msg, err)
	}
	if msg, _ := r.ReplicaOf("127.0.0.1", port); msg != "OK Already connected to specified master" {
		t.Fatalf("ReplicaOf again = %q", msg)
	}
	clock.advance(42 * time.Second)
	in := infoOf(r)
	for k, want := range map[string]string{"role": "slave", "master_host": "127.0.0.1", "master_link_status": "down",
		"master_link_down_since_seconds": "42", "master_last_io_seconds_ago": "-1", "master_sync_in_progress": "0",
		"slave_priority": "100", "slave_read_only": "1", "replica_announced": "1", "slave_repl_offset": "0"} {
		if in[k] != want {
			t.Errorf("%s:%s, want %s", k, in[k], want)
		}
	}
	if got := r.Role(); len(got) != 5 || got[0] != "slave" || got[2] != int64(port) || got[3] != "connect" {
		t.Errorf("ROLE = %v", got)
	}
	if msg, err := r.ReplicaOf("", 0); err != nil || msg != "OK" {
		t.Fatalf("ReplicaOf NO ONE = %q, %v", msg, err)
	}
	in = infoOf(r)
	if in["role"] != "master" || in["master_replid2"] != first || in["master_replid"] == first || in["second_repl_offset"] != "1" {
		t.Errorf("after promotion: %v", in)
	}
}

// The primary's side of a link, played against a test replica: a full
// copy of the keys, then the stream; the replica's acks set its offset and
// lag (by the injected clock) in INFO and ROLE, and WAIT counts it.
func TestPrimaryServesAReplica(t *testing.T) {
	r, eng, clock := newTest(t, Config{AckInterval: time.Hour})
	v := eng.NewView()
	put := func(k string) {
		if _, err := v.Import(engine.Record{Key: []byte(k), Kind: limiter.KindGCRA, ExpireMs: time.Now().Add(time.Hour).UnixMilli(), Words: [3]int64{time.Now().Add(time.Hour).UnixNano()}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b", "c"} {
		put(k)
	}
	reply, serve, err := r.Sync(StreamVersion, "?", -1, "10.0.0.9", 7777)
	if err != nil || !strings.HasPrefix(reply, "+FULLCOPY ") {
		t.Fatalf("Sync = %q, %v", reply, err)
	}
	primary, replica := testkit.TCPPair(t)
	go serve(primary, nil)
	br := bufio.NewReader(replica)
	var copied []string
	for done := false; !done; {
		typ, p, err := readFrame(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case frameCopy:
			for len(p) > 0 {
				rec, n, err := engine.DecodeRecord(p)
				if err != nil {
					t.Fatal(err)
				}
				copied = append(copied, string(rec.Key))
				p = p[n:]
			}
		case frameEnd:
			done = true
		}
	}
	slices.Sort(copied)
	if !slices.Equal(copied, []string{"a", "b", "c"}) {
		t.Fatalf("full copy = %q", copied)
	}
	v.Del([]byte("b"), nil)
	put("d")
	// The stream brings b's removal and d.
	var stream []byte
	var got []string
	for len(got) < 2 {
		typ, p, err := readFrame(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if typ != frameStream {
			continue
		}
		stream = append(stream, p...)
		for {
			e, n, err := decodeEntry(stream)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			stream = stream[n:]
			switch e.typ {
			case entryWrite:
				got = append(got, "W "+string(e.rec.Key))
			case entryDelete:
				got = append(got, "D "+string(e.rec.Key))
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"D b", "W d"}) {
		t.Fatalf("stream = %q", got)
	}
	end := infoOf(r)["master_repl_offset"]
	if _, err := replica.Write(appendUvarintFrame(nil, frameAck, uint64(mustAtoi(t, end)))); err != nil {
		t.Fatal(err)
	}
	line := "slave0:ip=10.0.0.9,port=7777,state=online,offset=" + end + ",lag=0"
	testkit.WaitFor(t, "the ack", func() bool { return slices.Contains(r.InfoLines(), line) })
	clock.advance(5 * time.Second)
	if want := strings.Replace(line, "lag=0", "lag=5", 1); !slices.Contains(r.InfoLines(), want) {
		t.Errorf("INFO after 5 s lacks %q: %q", want, r.InfoLines())
	}
	if secs, bytes, changes := r.Lag(); len(secs) != 1 || secs[0] != 5 || bytes[0] != 0 || changes[0] != 0 {
		t.Errorf("Lag = %v %v", secs, bytes)
	}
	if n, err := r.Wait(1, time.Second, nil); n != 1 || err != nil {
		t.Errorf("Wait = %d, %v", n, err)
	}
	if got := r.Role(); len(got) != 3 || got[0] != "master" {
		t.Errorf("ROLE = %v", got)
	} else if l := got[2].([]any); len(l) != 1 || l[0].([]any)[0] != "10.0.0.9" || l[0].([]any)[1] != "7777" || l[0].([]any)[2] != end {
		t.Errorf("ROLE's replicas = %v", l)
	}
	// A replica that goes leaves the list.
	replica.Close()
	testkit.WaitFor(t, "the replica to go", func() bool { return infoOf(r)["connected_slaves"] == "0" })
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// The primary counts the syncs it answers as Redis's INFO stats does:
// full copies served, partial resyncs accepted, and those refused (a
// replica that named a history and an offset and got a full copy).
func TestSyncCounts(t *testing.T) {
	r, _, _ := newTest(t, Config{})
	id := infoOf(r)["master_replid"]
	for _, s := range []struct {
		replid string
		offset int64
		reply  string
	}{
		{"?", -1, "+FULLCOPY"},
		{"1111111111111111111111111111111111111111", 0, "+FULLCOPY"},
		{id, 0, "+CONTINUE"},
		{id, 7, "+FULLCOPY"}, // not (yet) in the backlog
	} {
		reply, _, err := r.Sync(StreamVersion, s.replid, s.offset, "127.0.0.1", 1)
		if err != nil || !strings.HasPrefix(reply, s.reply+" ") {
			t.Fatalf("Sync(%s, %d) = %q, %v; want %s", s.replid, s.offset, reply, err, s.reply)
		}
	}
	if full, ok, bad := r.SyncCounts(); full != 3 || ok != 1 || bad != 2 {
		t.Errorf("SyncCounts() = %d, %d, %d; want 3, 1, 2", full, ok, bad)
	}
}

// The backlog's ring, once allocated, counts in the engine's used memory
// (what maxmemory checks, INFO's used_memory), and stops counting when
// the replication state is closed.
func TestBacklogCountsInUsedMemory(t *testing.T) {
	const size = 1 << 20
	r, eng, _ := newTest(t, Config{BacklogSize: size})
	before := eng.UsedMemory()
	if _, _, err := r.Sync(StreamVersion, "?", -1, "127.0.0.1", 1); err != nil {
		t.Fatal(err)
	}
	v := eng.NewView()
	testkit.WaitFor(t, "the ring to be allocated", func() bool {
		// A change for the drain to append (the feed turns on just after Sync).
		_, _ = v.Import(engine.Record{Key: []byte("k"), Kind: limiter.KindGCRA, ExpireMs: time.Now().Add(time.Hour).UnixMilli(), Words: [3]int64{time.Now().Add(time.Hour).UnixNano()}})
		return eng.BacklogMemory() == size
	})
	if used := eng.UsedMemory(); used < before+size {
		t.Errorf("UsedMemory() = %d with a backlog of %d, was %d", used, size, before)
	}
	r.Close()
	if got := eng.BacklogMemory(); got != 0 {
		t.Errorf("BacklogMemory() = %d after Close", got)
	}
}

// A primary whose replicas have all gone for BacklogTTL (repl-backlog-ttl)
// stops its feed and drain loop and frees its backlog, under a new
// replication id (a replica that comes back cannot continue over the
// changes the stream no longer carried: it gets a full copy); a replica
// that attaches starts them again.
func TestBacklogFreedAfterTTL(t *testing.T) {
	const size = 64 << 10
	r, eng, clock := newTest(t, Config{BacklogSize: size, BacklogTTL: time.Minute, AckInterval: time.Hour})
	v := eng.NewView()
	put := func(k string) {
		_, _ = v.Import(engine.Record{Key: []byte(k), Kind: limiter.KindGCRA, ExpireMs: time.Now().Add(time.Hour).UnixMilli(), Words: [3]int64{time.Now().Add(time.Hour).UnixNano()}})
	}
	attach := func() net.Conn {
		reply, serve, err := r.Sync(StreamVersion, "?", -1, "127.0.0.1", 1)
		if err != nil || !strings.HasPrefix(reply, "+FULLCOPY ") {
			t.Fatalf("Sync = %q, %v", reply, err)
		}
		primary, replica := testkit.TCPPair(t)
		go serve(primary, nil)
		br := bufio.NewReader(replica)
		for {
			typ, _, err := readFrame(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if typ == frameEnd {
				return replica
			}
		}
	}
	replica := attach()
	testkit.WaitFor(t, "the ring", func() bool { put("k"); return eng.BacklogMemory() == size && eng.FeedOn() })
	id := infoOf(r)["master_replid"]
	replica.Close()
	testkit.WaitFor(t, "the replica to go", func() bool { return infoOf(r)["connected_slaves"] == "0" })
	clock.advance(time.Minute - time.Second)
	put("k2")
	if in := infoOf(r); in["repl_backlog_active"] != "1" || !eng.FeedOn() {
		t.Fatalf("before repl-backlog-ttl: repl_backlog_active:%s, feed on %v", in["repl_backlog_active"], eng.FeedOn())
	}
	clock.advance(time.Second)
	testkit.WaitFor(t, "the backlog freed", func() bool {
		return infoOf(r)["repl_backlog_active"] == "0" && !eng.FeedOn() && eng.BacklogMemory() == 0
	})
	in := infoOf(r)
	if in["master_replid"] == id || in["master_replid2"] != zeroReplID || in["second_repl_offset"] != "-1" {
		t.Errorf("after the backlog was freed: master_replid %s (was %s), master_replid2 %s, second_repl_offset %s", in["master_replid"], id, in["master_replid2"], in["second_repl_offset"])
	}
	if reply, _, _ := r.Sync(StreamVersion, id, mustAtoi(t, in["master_repl_offset"]), "127.0.0.1", 1); !strings.HasPrefix(reply, "+FULLCOPY ") {
		t.Errorf("a replica of the old history: %q, want a full copy", reply)
	}
	replica = attach()
	testkit.WaitFor(t, "the feed on again", func() bool { put("k3"); return eng.FeedOn() && eng.BacklogMemory() == size })
	replica.Close()
}
