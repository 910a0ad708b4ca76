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
		{pipeAddr{}, true},
		{nil, false},
	}
	for _, c := range cases {
		if got := isLocal(c.addr); got != c.want {
			t.Errorf("isLocal(%v) = %v, want %v", c.addr, got, c.want)
		}
	}
}

// pipeAddr is the address of an end of net.Pipe.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestProtectedModeRefuses: protected mode turns away exactly the clients
// Redis 7 does: not local, while on and with no password.
func TestProtectedModeRefuses(t *testing.T) {
	remote := &net.TCPAddr{IP: net.ParseIP("192.0.2.9"), Port: 5}
	remote6 := &net.TCPAddr{IP: net.ParseIP("2001:db8::9"), Port: 5}
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 5}
	local6 := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 5}
	unix := &net.UnixAddr{Name: "/tmp/s", Net: "unix"}
	cases := []struct {
		protected bool
		pass      string
		addr      net.Addr
		want      bool
	}{
		{true, "", remote, true},
		{true, "", remote6, true},
		{true, "", local, false},
		{true, "", local6, false},
		{true, "", unix, false},
		{true, "pw", remote, false},
		{false, "", remote, false},
		{false, "", remote6, false},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		cfg.ProtectedMode, cfg.RequirePass = c.protected, c.pass
		if got := cfg.refuses(c.addr); got != c.want {
			t.Errorf("protected-mode %v, requirepass %q, client %v: refuses = %v, want %v", c.protected, c.pass, c.addr, got, c.want)
		}
	}
	if !DefaultConfig().ProtectedMode {
		t.Error("protected-mode must default to yes")
	}
}
