package testkit

import (
	"fmt"
	"net"
	"testing"
)

// Listen returns a TCP listener on 127.0.0.1 at a port the system
// chooses, closed when the test ends. Hand it to the code under test
// (Serve(ln)): the port stays the test's from the start, where a port
// found free and closed again may be taken by another process meanwhile.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	return ListenOn(t, "127.0.0.1")
}

// ListenOn is Listen on host.
func ListenOn(t testing.TB, host string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", host, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// Port returns ln's TCP port.
func Port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// FreePort returns a loopback port nothing listens on right now, for code
// that takes a port number rather than a listener (a binary's --port). It
// is closed again before it is returned: another process may take it
// first, which StartBinary detects and retries.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return Port(ln)
}

// FreePair returns a loopback port p that is free, and whose p+offset is
// free for both TCP and UDP: a cluster node's client port and gossip
// port. Like FreePort, the ports are closed when it returns.
func FreePair(t testing.TB, offset int) int {
	t.Helper()
	for range 100 {
		p := FreePort(t)
		if p+offset > 65535 {
			continue
		}
		bus := fmt.Sprintf("127.0.0.1:%d", p+offset)
		if lt, err := net.Listen("tcp", bus); err == nil {
			lt.Close()
			if lu, err := net.ListenPacket("udp", bus); err == nil {
				lu.Close()
				return p
			}
		}
	}
	t.Fatal("testkit: no free pair of ports in 100 tries")
	return 0
}

// TCPPair returns both ends of a loopback TCP connection: the one a
// listener accepted, and the dialling peer. Both close when the test
// ends.
func TCPPair(t testing.TB) (accepted, peer net.Conn) {
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
	accepted, err = ln.Accept()
	if err != nil {
		peer.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { accepted.Close(); peer.Close() })
	return accepted, peer
}
