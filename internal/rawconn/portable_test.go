//go:build !linux || cellserver_portable

package rawconn

import (
	"net"
	"testing"
)

// On the portable path a socket is served as it is too.
func TestWrapLeavesSockets(t *testing.T) {
	nc, _ := tcpPair(t)
	if _, ok := nc.(*net.TCPConn); !ok {
		t.Fatalf("a TCP connection was wrapped on the portable path: %T", nc)
	}
}
