package commands

import (
	"bytes"
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
