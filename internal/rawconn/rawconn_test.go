package rawconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// These tests hold on every platform and build: they go through Wrap and
// ReadLoop, so they test whichever path the build takes.

// tcpPair returns both ends of a loopback TCP connection, the server's
// passed through Wrap.
func tcpPair(t *testing.T) (nc net.Conn, peer net.Conn) {
	t.Helper()
	accepted, peer := testkit.TCPPair(t)
	nc = Wrap(accepted)
	t.Cleanup(func() { nc.Close() })
	return nc, peer
}

// collect runs ReadLoop on nc until want bytes have come (or the loop
// ends), reading into a buffer of size bytes, and returns them and how the
// loop ended (nil: it was stopped once want was reached).
func collect(nc net.Conn, size, want int) ([]byte, error) {
	buf := make([]byte, size)
	var read []byte
	var end error
	ReadLoop(nc, func(m int, err error) []byte {
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
// sends arrives the same through ReadLoop (in reads that fill its buffer).
func TestReadsAndWrites(t *testing.T) {
	nc, peer := tcpPair(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(big))))
		got <- b
	}()
	if n, err := nc.Write(big); n != len(big) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not what was written", len(b))
	}

	go peer.Write(big)
	read, err := collect(nc, 100_000, len(big))
	if err != nil {
		t.Fatalf("ReadLoop after %d bytes: %v", len(read), err)
	}
	if !bytes.Equal(read, big) {
		t.Fatal("read back something else")
	}
}

// ReadLoop ends with the read deadline's error, with io.EOF after the
// data a peer sent before it closed, and with net.ErrClosed once the
// connection is closed; a Write after Close fails.
func TestEOFDeadlineAndClose(t *testing.T) {
	nc, peer := tcpPair(t)

	nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := collect(nc, 16, 1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadLoop past the deadline: %v, want a deadline error", err)
	}
	nc.SetReadDeadline(time.Time{})

	peer.Write([]byte("hi"))
	peer.Close()
	if read, err := collect(nc, 16, 3); string(read) != "hi" || err != io.EOF {
		t.Fatalf("ReadLoop read %q, then %v; want hi, then EOF", read, err)
	}

	nc2, _ := tcpPair(t)
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		buf, first := make([]byte, 16), true
		ReadLoop(nc2, func(m int, err error) []byte {
			if err != nil && m == 0 {
				done <- err
				return nil
			}
			if first {
				close(started)
				first = false
			}
			return buf
		})
	}()
	<-started // the loop is about to read or wait: Close either way
	nc2.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadLoop interrupted by Close: %v, want net.ErrClosed", err)
	}
	if _, err := nc2.Write([]byte("x")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

// A round trip through ReadLoop and Write allocates nothing.
func TestRoundTripDoesNotAllocate(t *testing.T) {
	nc, peer := tcpPair(t)
	msg, buf, back := []byte("*1\r\n$4\r\nPING\r\n"), make([]byte, 64), make([]byte, 64)
	go ReadLoop(nc, func(m int, err error) []byte {
		if err != nil && m == 0 {
			return nil
		}
		if _, err := nc.Write(buf[:m]); err != nil {
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
func TestWrapLeavesOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if c := Wrap(a); c != a {
		t.Fatalf("net.Pipe wrapped: %T", c)
	}
}
