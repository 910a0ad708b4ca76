//go:build !cellserver_portable

package rawconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// rawPair is tcpPair with the server's end as the raw connection Wrap
// made of it.
func rawPair(t *testing.T) (raw *conn, peer net.Conn) {
	t.Helper()
	nc, peer := tcpPair(t)
	raw, ok := nc.(*conn)
	if !ok {
		t.Fatalf("a TCP connection was not wrapped: %T", nc)
	}
	return raw, peer
}

// A Close while readLoop waits ends the loop with net.ErrClosed, and a
// Write after it fails.
func TestRawConnCloseWhileLoopWaits(t *testing.T) {
	raw, _ := rawPair(t)
	done := make(chan error)
	go func() { _, err := collect(raw, 16, 1); done <- err }()
	for !raw.looping.Load() {
		runtime.Gosched() // Close while the loop waits
	}
	raw.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("readLoop interrupted by Close: %v, want net.ErrClosed", err)
	}
	if _, err := raw.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close = %v, want net.ErrClosed", err)
	}
}

// loopPair is rawPair with readLoop running on the server's end: it
// answers every read with the bytes it got, upper-cased (calling onRead
// first, if not nil, for a read that brought some), reports how it ended,
// and then closes, as the server's release does. setup, if not nil, runs
// before the loop starts.
func loopPair(t *testing.T, setup func(raw *conn, peer net.Conn), onRead func(raw *conn)) (raw *conn, peer net.Conn, ended <-chan error) {
	t.Helper()
	raw, peer = rawPair(t)
	if setup != nil {
		setup(raw, peer)
	}
	done := make(chan error, 1)
	buf := make([]byte, 64)
	next := func(m int, err error) []byte {
		if err != nil && m == 0 {
			done <- err
			return nil
		}
		if onRead != nil && m > 0 {
			onRead(raw)
		}
		if _, err := raw.Write(bytes.ToUpper(buf[:m])); err != nil {
			done <- err
			return nil
		}
		return buf
	}
	go func() {
		defer raw.Close()
		raw.readLoop(next)
	}()
	return raw, peer, done
}

// After a read that emptied the socket, readLoop waits for the next
// arrival without reading first: over 200 round trips it makes almost no
// read that finds nothing (a loop over Read makes one per round trip).
func TestReadLoopSkipsEmptyReads(t *testing.T) {
	// No probe fires during the test, however slow the machine: each
	// would make one read that may find nothing.
	raw, peer, ended := loopPair(t, func(raw *conn, _ net.Conn) { raw.probeWait = time.Hour }, nil)
	got := make([]byte, 4)
	for i := range 200 {
		if _, err := peer.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, got); err != nil || string(got) != "PING" {
			t.Fatalf("round %d: %q, %v", i, got, err)
		}
	}
	peer.Close()
	if err := <-ended; err != io.EOF {
		t.Fatalf("the loop ended with %v, want EOF", err)
	}
	if raw.empty > 2 { // the loop's first read, and perhaps one after a full buffer
		t.Fatalf("%d reads found nothing in 200 round trips", raw.empty)
	}
}

// A peer that sends its last bytes and closes its side in one segment,
// while readLoop waits, is answered and then sees the server close: the
// netpoller tells of the data and the end of stream once, the read takes
// the data, and the wait after it would never end but for the probe.
func TestReadLoopSeesHalfClose(t *testing.T) {
	_, peer, ended := loopPair(t, nil, nil)
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 2)
	if _, err := peer.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != "HI" {
		t.Fatalf("%q, %v", got, err) // the loop has read and waits (or is about to)
	}
	// Corked, the bytes wait for the FIN and leave with it.
	sc, err := peer.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	sc.Control(func(fd uintptr) {
		if err := syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1); err != nil {
			t.Error(err)
		}
	})
	peer.Write([]byte("bye"))
	peer.(*net.TCPConn).CloseWrite()
	if b, err := io.ReadAll(peer); string(b) != "BYE" || err != nil {
		t.Fatalf("the peer read %q, %v", b, err)
	}
	if err := <-ended; err != io.EOF {
		t.Fatalf("the loop ended with %v, want EOF", err)
	}
}

// The idle deadline ends the loop even while a probe is armed, and a
// Close while the loop holds the descriptor does not wait for the loop
// (here it runs on the loop's own goroutine: waiting would never end).
func TestReadLoopDeadlineAndClose(t *testing.T) {
	_, peer, ended := loopPair(t, nil, func(raw *conn) {
		raw.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	})
	peer.Write([]byte("x"))
	if err := <-ended; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the loop ended with %v, want the deadline", err)
	}

	_, peer, ended = loopPair(t, nil, func(raw *conn) { raw.Close() })
	peer.Write([]byte("x"))
	if err := testkit.Recv(t, ended, "Close from inside the loop to end it"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the loop ended with %v, want net.ErrClosed", err)
	}
}

// A Close stops the loop's reading even while reads keep filling its
// buffer and bring nothing to answer (a killed client that streams a
// large request): no read is made after it.
func TestReadLoopStopsReadingOnClose(t *testing.T) {
	raw, peer := rawPair(t)
	go peer.Write(bytes.Repeat([]byte("x"), 1<<20))
	buf := make([]byte, 64)
	after, closed := 0, false
	var end error
	raw.readLoop(func(m int, err error) []byte {
		if err != nil && m == 0 {
			end = err
			return nil
		}
		if closed {
			after++
		}
		if m > 0 && !closed {
			raw.Close()
			closed = true
		}
		return buf
	})
	if !errors.Is(end, net.ErrClosed) || after > 0 {
		t.Fatalf("the loop ended with %v after %d reads past Close; want net.ErrClosed after none", end, after)
	}
}
