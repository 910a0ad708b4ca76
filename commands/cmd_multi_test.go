package commands

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMultiQueueCountIsBounded(t *testing.T) {
	h := newHarness(t, "")
	h.host.queryMax = 1 << 30
	h.do("MULTI")
	for i := range maxQueued {
		if got := h.do("PING"); got != "+QUEUED\r\n" {
			t.Fatalf("command %d: %q", i, got)
		}
	}
	if got := h.do("PING"); got != errReply(errMultiTooBig) {
		t.Fatalf("command %d: %q", maxQueued, got)
	}
	if h.c.queue != nil {
		t.Fatalf("the discarded queue is still held: %d commands", len(h.c.queue))
	}
	if got := h.do("PING"); got != "+QUEUED\r\n" {
		t.Fatalf("after the error, commands are still acknowledged: %q", got)
	}
	if len(h.c.queue) != 0 {
		t.Fatalf("a failed transaction keeps queuing: %d commands", len(h.c.queue))
	}
	if got := h.do("EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXEC: %q", got)
	}
}

func TestMultiQueueBytesAreBounded(t *testing.T) {
	h := newHarness(t, "")
	h.host.queryMax = 1 << 30
	h.do("MULTI")
	big := strings.Repeat("x", 1<<20)
	n := 0
	for ; n < 100; n++ {
		if got := h.do("ECHO", big); got != "+QUEUED\r\n" {
			if got != errReply(errMultiTooBig) {
				t.Fatalf("command %d: %q", n, got)
			}
			break
		}
	}
	if n != maxQueuedBytes>>20-1 {
		t.Fatalf("queued %d commands of 1 MiB, want %d", n, maxQueuedBytes>>20-1)
	}
	if got := h.do("EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXEC: %q", got)
	}
}

// An EXEC whose reply is long hands it to the connection as it goes, and
// while it waits on the connection it holds no lock: another client's
// CL.THROTTLE on a key of the transaction is answered meanwhile.
func TestExecStreamsWithoutHoldingLocks(t *testing.T) {
	h := newHarness(t, "")
	h.host.queryMax = 1 << 30
	conn := &bytes.Buffer{}
	slow := h.table.NewClient(ClientOptions{ID: 8, Writer: NewWriter(conn), Authorized: true})
	// The connection's client stops reading at EXEC's first hand-over:
	// the hand-over reports itself on arrived, and returns once release
	// is closed.
	arrived, release := make(chan struct{}), make(chan struct{})
	slow.flushFunc = func() bool {
		select {
		case <-arrived:
		default:
			close(arrived)
			<-release
		}
		return slow.W.Flush() == nil
	}
	run := func(c *Client, words ...string) {
		args := make([][]byte, len(words))
		for i, w := range words {
			args[i] = []byte(w)
		}
		h.table.Dispatch(c, args)
	}
	run(slow, "MULTI")
	run(slow, "CL.THROTTLE", "k", "15", "30", "60")
	const docs = 200
	for range docs {
		run(slow, "COMMAND", "DOCS")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(slow, "EXEC")
		_ = slow.W.Flush()
	}()
	select {
	case <-arrived:
	case <-done:
		t.Fatal("EXEC returned without handing any reply to the connection: it built its whole reply")
	}
	// EXEC is now waiting on its connection, in the middle of its reply.
	answered := make(chan string)
	go func() { answered <- h.do("CL.THROTTLE", "k", "15", "30", "60") }()
	select {
	case got := <-answered:
		if got != ints(0, 16, 14, -1, 4) {
			t.Fatalf("another client during EXEC: %q", got)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a measurement
		t.Fatal("another client's CL.THROTTLE waits for EXEC")
	}
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang guard, not a measurement
		t.Fatal("EXEC did not finish")
	}
	one := &bytes.Buffer{}
	probe := h.table.NewClient(ClientOptions{ID: 9, Writer: NewWriter(one), Authorized: true})
	run(probe, "COMMAND", "DOCS")
	_ = probe.W.Flush()
	queued := len("+OK\r\n") + (1+docs)*len("+QUEUED\r\n")
	want := len("*201\r\n") + len(ints(0, 16, 15, -1, 2)) + docs*one.Len()
	if conn.Len() != queued+want {
		t.Fatalf("wrote %d bytes, want %d", conn.Len(), queued+want)
	}
}

// A command whose reply grows with its request is bounded: COMMAND DOCS
// names each command once however often it is asked for, COMMAND INFO
// hands its reply to the connection as it goes, and INFO keeps only the
// section names it knows.
func TestOneCommandHugeReplyIsBounded(t *testing.T) {
	h := newHarness(t, "")
	once := h.do("COMMAND", "DOCS", "ping", "cl.throttle")
	words := []string{"COMMAND", "DOCS"}
	for range 100000 {
		words = append(words, "ping", "cl.throttle", "nosuch")
	}
	if got := h.do(words...); got != once {
		t.Fatalf("COMMAND DOCS of 300,000 names: %d bytes, want %d, those of each name once", len(got), len(once))
	}

	most := 0
	h.c.flushFunc = func() bool {
		most = max(most, h.c.W.Len())
		return h.c.W.Flush() == nil
	}
	words[1] = "INFO"
	got := h.do(words...)
	entry := h.do("COMMAND", "INFO", "ping", "cl.throttle", "nosuch")
	entry = entry[len("*3\r\n"):]
	if want := "*300000\r\n" + strings.Repeat(entry, 100000); got != want {
		t.Fatalf("COMMAND INFO of 300,000 names: %d bytes, want %d", len(got), len(want))
	}
	if most == 0 || most > streamFlushAt+len(entry) {
		t.Fatalf("COMMAND INFO held up to %d bytes of its reply before handing it over, want at most %d", most, streamFlushAt+len(entry))
	}

	words[0], words[1] = "INFO", "server"
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	info := func(args [][]byte) func() {
		return func() {
			h.table.Dispatch(h.c, args)
			h.c.W.b = h.c.W.b[:0]
		}
	}
	// Averaged over runs: AllocsPerRun counts the whole process's
	// allocations, other goroutines' too (a single run under -race saw 63).
	before := testing.AllocsPerRun(10, info(args[:2]))
	if got := testing.AllocsPerRun(10, info(args)); got > before+50 {
		t.Fatalf("INFO with 300,000 unknown section names: %.0f allocations, %.0f with one name", got, before)
	}
	if got := h.do("INFO", "nosuch"); got != "$0\r\n\r\n" {
		t.Fatalf("INFO of an unknown section: %q", got)
	}
}

// partWriter takes at most room bytes per write, and reports a deadline
// for the rest, as a socket with a full buffer does.
type partWriter struct {
	got  []byte
	room int
}

func (p *partWriter) Write(b []byte) (int, error) {
	n := min(len(b), p.room)
	p.got = append(p.got, b[:n]...)
	if n < len(b) {
		return n, os.ErrDeadlineExceeded
	}
	return n, nil
}

// FlushPart writes what the connection takes, keeps the rest in order,
// and writes nothing twice.
func TestWriterFlushPart(t *testing.T) {
	p := &partWriter{room: 3}
	w := NewWriter(p)
	w.WriteString("hello") // +hello\r\n: 8 bytes
	if done, err := w.FlushPart(); done || err != nil || w.Len() != 5 {
		t.Fatalf("first: done %v, err %v, %d left", done, err, w.Len())
	}
	w.WriteString("x")
	p.room = 100
	if done, err := w.FlushPart(); !done || err != nil || w.Len() != 0 {
		t.Fatalf("second: done %v, err %v, %d left", done, err, w.Len())
	}
	if string(p.got) != "+hello\r\n+x\r\n" {
		t.Fatalf("wrote %q", p.got)
	}
}
