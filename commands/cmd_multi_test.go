package commands

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestMulti(t *testing.T) {
	h := newHarness(t, "")
	h.do("MULTI")
	if got := h.do("MULTI"); got != errReply(errMultiNested) {
		t.Fatalf("nested: %q", got)
	}
	if got := h.do("CL.THROTTLE", "k", "15", "30", "60"); got != "+QUEUED\r\n" {
		t.Fatalf("queue: %q", got)
	}
	h.do("CL.THROTTLE", "k", "15", "30", "60")
	h.do("GET", "nope")
	want := "*3\r\n" + ints(0, 16, 15, -1, 2) + ints(0, 16, 14, -1, 4) + "$-1\r\n"
	if got := h.do("EXEC"); got != want {
		t.Fatalf("EXEC:\n got %q\nwant %q", got, want)
	}
	// An error while queuing aborts the transaction; nothing runs.
	h.do("MULTI")
	h.do("CL.THROTTLE", "k", "15", "30", "60")
	if got := h.do("ECHO"); got != errReply(errArity("echo")) {
		t.Fatalf("arity in MULTI: %q", got)
	}
	h.do("NOSUCH")
	if got := h.do("EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXECABORT: %q", got)
	}
	if got := h.do("CL.THROTTLE", "k", "15", "30", "60"); got != ints(0, 16, 13, -1, 6) {
		t.Fatalf("the aborted transaction must not have run: %q", got)
	}
	// DISCARD drops the queue.
	h.do("MULTI")
	h.do("DEL", "k")
	if got := h.do("DISCARD"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got := h.do("EXISTS", "k"); got != ":1\r\n" {
		t.Fatalf("DISCARD ran the queue: %q", got)
	}
	// Runtime errors inside EXEC are replies in the array.
	h.do("MULTI")
	h.do("TB.TAKE", "k", "1", "1", "1")
	h.do("PING")
	if got := h.do("EXEC"); got != "*2\r\n"+errReply(errWrongType)+"+PONG\r\n" {
		t.Fatalf("EXEC with a runtime error: %q", got)
	}
}

func TestMultiQueueIsBounded(t *testing.T) {
	h := newHarness(t, "") // the fake host's limit: 1024 bytes
	h.do("MULTI")
	big := strings.Repeat("x", 200) // 316 bytes queued each: three fit in 1024
	for i := range 3 {
		if got := h.do("ECHO", big); got != "+QUEUED\r\n" {
			t.Fatalf("command %d: %q", i, got)
		}
	}
	if got := h.do("ECHO", big); got != errReply(errMultiTooBig) {
		t.Fatalf("over the limit: %q", got)
	}
	if got := h.do("EXEC"); got != errReply(errExecAbort) {
		t.Fatalf("EXEC after an over-limit queue: %q", got)
	}
	h.do("MULTI")
	if got := h.do("ECHO", big); got != "+QUEUED\r\n" {
		t.Fatalf("a new MULTI starts empty: %q", got)
	}
}

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
