//go:build unix

package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
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

// Reads wait for data, writes wait for room: 8 MiB through a socket whose
// reader drains it slowly arrive whole and in order, and what the peer
// sends arrives the same.
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
	buf := make([]byte, 100_000)
	var read []byte
	for len(read) < len(big) {
		n, err := raw.Read(buf)
		if err != nil {
			t.Fatalf("Read after %d bytes: %v", len(read), err)
		}
		read = append(read, buf[:n]...)
	}
	if !bytes.Equal(read, big) {
		t.Fatal("read back something else")
	}
}

func TestRawConnEOFDeadlineAndClose(t *testing.T) {
	raw, peer := tcpPair(t)
	buf := make([]byte, 16)

	raw.SetReadDeadline(time.Now().Add(20 * time.Millisecond)) //nolint:errcheck
	if _, err := raw.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline: %v, want a deadline error", err)
	}
	raw.SetReadDeadline(time.Time{}) //nolint:errcheck

	peer.Write([]byte("hi")) //nolint:errcheck
	peer.Close()
	if n, err := raw.Read(buf); n != 2 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	if _, err := raw.Read(buf); err != io.EOF {
		t.Fatalf("Read after the peer closed: %v, want EOF", err)
	}

	done := make(chan error)
	raw2, _ := tcpPair(t)
	go func() { _, err := raw2.Read(buf); done <- err }()
	raw2.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read interrupted by Close: %v, want net.ErrClosed", err)
	}
	if _, err := raw2.Write(buf); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

func TestRawConnDoesNotAllocate(t *testing.T) {
	raw, peer := tcpPair(t)
	msg, buf := []byte("*1\r\n$4\r\nPING\r\n"), make([]byte, 64)
	n := testing.AllocsPerRun(100, func() {
		if _, err := raw.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Read(buf); err != nil {
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
