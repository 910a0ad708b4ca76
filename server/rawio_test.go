//go:build unix

package server

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
)

// tcpPair returns both ends of a loopback TCP connection, the server's
// wrapped by newRawConn.
func tcpPair(t *testing.T) (raw net.Conn, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	raw = newRawConn(nc)
	if _, ok := raw.(*rawConn); !ok {
		t.Fatalf("a TCP connection was not wrapped: %T", raw)
	}
	t.Cleanup(func() { raw.Close(); peer.Close() })
	return raw, peer
}

// collect runs raw's readLoop until want bytes have come (or the loop
// ends), reading into a buffer of size bytes, and returns them and how the
// loop ended (nil: it was stopped once want was reached).
func collect(raw *rawConn, size, want int) ([]byte, error) {
	buf := make([]byte, size)
	var read []byte
	var end error
	raw.readLoop(func(m int, err error) []byte {
		if err != nil && m == 0 {
			end = err
			return nil
		}
		read = append(read, buf[:m]...)
		if len(read) >= want {
			return nil
		}
		return buf
	})
	return read, end
}

// Reads wait for data, writes wait for room: 8 MiB through a socket whose
// reader drains it slowly arrive whole and in order, and what the peer
// sends arrives the same through readLoop (in reads that fill its buffer).
func TestRawConnReadsAndWrites(t *testing.T) {
	raw, peer := tcpPair(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(big))))
		got <- b
	}()
	if n, err := raw.Write(big); n != len(big) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not what was written", len(b))
	}

	go peer.Write(big) //nolint:errcheck
	read, err := collect(raw.(*rawConn), 100_000, len(big))
	if err != nil {
		t.Fatalf("readLoop after %d bytes: %v", len(read), err)
	}
	if !bytes.Equal(read, big) {
		t.Fatal("read back something else")
	}
}

func TestRawConnEOFDeadlineAndClose(t *testing.T) {
	raw, peer := tcpPair(t)

	raw.SetReadDeadline(time.Now().Add(20 * time.Millisecond)) //nolint:errcheck
	if _, err := collect(raw.(*rawConn), 16, 1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("readLoop past the deadline: %v, want a deadline error", err)
	}
	raw.SetReadDeadline(time.Time{}) //nolint:errcheck

	peer.Write([]byte("hi")) //nolint:errcheck
	peer.Close()
	if read, err := collect(raw.(*rawConn), 16, 3); string(read) != "hi" || err != io.EOF {
		t.Fatalf("readLoop read %q, then %v; want hi, then EOF", read, err)
	}

	done := make(chan error)
	raw2, _ := tcpPair(t)
	go func() { _, err := collect(raw2.(*rawConn), 16, 1); done <- err }()
	for !raw2.(*rawConn).looping.Load() {
		runtime.Gosched() // Close while the loop waits
	}
	raw2.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("readLoop interrupted by Close: %v, want net.ErrClosed", err)
	}
	if _, err := raw2.Write([]byte("x")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

// A round trip through readLoop and Write allocates nothing.
func TestRawConnDoesNotAllocate(t *testing.T) {
	nc, peer := tcpPair(t)
	raw := nc.(*rawConn)
	msg, buf, back := []byte("*1\r\n$4\r\nPING\r\n"), make([]byte, 64), make([]byte, 64)
	go raw.readLoop(func(m int, err error) []byte {
		if err != nil && m == 0 {
			return nil
		}
		if _, err := raw.Write(buf[:m]); err != nil {
			return nil
		}
		return buf
	})
	n := testing.AllocsPerRun(100, func() {
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, back[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per round trip", n)
	}
}

// A connection that is not a socket is served as it is.
func TestRawConnLeavesOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if c := newRawConn(a); c != a {
		t.Fatalf("net.Pipe wrapped: %T", c)
	}
}

// loopPair is tcpPair with readLoop running on the server's end: it
// answers every read with the bytes it got, upper-cased (calling onRead
// first, if not nil, for a read that brought some), reports how it ended, and then closes, as the
// server's release does. setup, if not nil, runs before the loop starts.
func loopPair(t *testing.T, setup func(raw *rawConn, peer net.Conn), onRead func(raw *rawConn)) (raw *rawConn, peer net.Conn, ended <-chan error) {
	t.Helper()
	nc, peer := tcpPair(t)
	raw = nc.(*rawConn)
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
	raw, peer, ended := loopPair(t, func(raw *rawConn, _ net.Conn) { raw.probeWait = time.Hour }, nil)
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
	peer.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck
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
	sc.Control(func(fd uintptr) { //nolint:errcheck
		if err := syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, 1); err != nil {
			t.Error(err)
		}
	})
	peer.Write([]byte("bye"))        //nolint:errcheck
	peer.(*net.TCPConn).CloseWrite() //nolint:errcheck
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
	_, peer, ended := loopPair(t, nil, func(raw *rawConn) {
		raw.SetReadDeadline(time.Now().Add(50 * time.Millisecond)) //nolint:errcheck
	})
	peer.Write([]byte("x")) //nolint:errcheck
	if err := <-ended; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the loop ended with %v, want the deadline", err)
	}

	_, peer, ended = loopPair(t, nil, func(raw *rawConn) { raw.Close() })
	peer.Write([]byte("x")) //nolint:errcheck
	select {
	case err := <-ended:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the loop ended with %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close from inside the loop did not end it")
	}
}

// A Close stops the loop's reading even while reads keep filling its
// buffer and bring nothing to answer (a killed client that streams a
// large request): no read is made after it.
func TestReadLoopStopsReadingOnClose(t *testing.T) {
	nc, peer := tcpPair(t)
	raw := nc.(*rawConn)
	go peer.Write(bytes.Repeat([]byte("x"), 1<<20)) //nolint:errcheck
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
