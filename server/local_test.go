package server

import (
	"net"
	"testing"
)

// TestIsLocal: the clients Redis counts as local (connIsLocal): loopback
// TCP peers and unix sockets.
func TestIsLocal(t *testing.T) {
	cases := []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 5}, true},
		{&net.TCPAddr{IP: net.ParseIP("127.255.0.9"), Port: 5}, true},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 5}, true},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 5}, true},
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.2"), Port: 5}, false},
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 5}, false},
		{&net.TCPAddr{IP: net.ParseIP("0.0.0.0"), Port: 5}, false},
		{&net.TCPAddr{IP: net.ParseIP("fd00::2"), Port: 5}, false},
		{&net.TCPAddr{IP: net.ParseIP("::"), Port: 5}, false},
		{&net.UnixAddr{Name: "/tmp/cellserver.sock", Net: "unix"}, true},
		{nil, false},
	}
	for _, c := range cases {
		if got := isLocal(c.addr); got != c.want {
			t.Errorf("isLocal(%v) = %v, want %v", c.addr, got, c.want)
		}
	}
}
