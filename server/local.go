package server

import (
	"net"
	"strings"
)

// refuses reports whether protected mode turns away a new connection from
// remote: as Redis 7 (clientAcceptHandler), when protected-mode is on, no
// password is set and the client is not local. Redis 7 does not look at
// bind: bound to loopback addresses only, every client is local anyway,
// and bound to any other address (0.0.0.0 and :: included) the remote
// clients are the ones refused.
func (c *Config) refuses(remote net.Addr) bool {
	return c.ProtectedMode && c.RequirePass == "" && !isLocal(remote)
}

// isLocal reports whether a client at addr is local as Redis counts it
// (connIsLocal): a TCP peer on a loopback address (127.0.0.0/8, ::1, or
// either mapped into the other family), or a connection that is not over
// IP at all: a unix socket, or an in-process net.Pipe. An IP address it
// cannot read, or no address, is not local.
func isLocal(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	case nil:
		return false
	}
	switch n := addr.Network(); {
	case strings.HasPrefix(n, "tcp"), strings.HasPrefix(n, "udp"), strings.HasPrefix(n, "ip"):
	default:
		return true
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
