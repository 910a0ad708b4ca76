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

// admitsLinks reports whether a connection that protected mode refuses
// (refuses) is let in all the same, to run the cluster link handshake
// only: in cluster mode, as peers' links come to the client port (see
// package cluster) and authenticate with the cluster secret, not
// requirepass. Such a connection runs CLUSTER LINK and nothing else
// (conn.linkStep) until the handshake has made it a link.
func (c *Config) admitsLinks() bool {
	return c.ClusterEnabled && c.Router != nil
}

// linkStep reports whether a connection let in by admitsLinks may run
// args: anything once the link handshake has authenticated it, and
// before that CLUSTER LINK, twice at most (HELLO, PROOF). Any other
// command, or a third step of a handshake that failed, gets protected
// mode's error and the connection is closed, as Redis closes a
// connection its protected mode refuses.
func (c *conn) linkStep(args [][]byte) bool {
	if c.cl.Authenticated() {
		return true
	}
	if c.linkSteps >= 2 || len(args) < 2 || !strings.EqualFold(string(args[0]), "cluster") || !strings.EqualFold(string(args[1]), "link") {
		return false
	}
	c.linkSteps++
	return true
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
