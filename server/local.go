package server

import "net"

// isLocal reports whether a client at addr is local as Redis counts it
// (connIsLocal): a TCP peer on a loopback address (127.0.0.0/8, ::1, or
// either mapped into the other family) or a unix socket. Any other
// address, or one it cannot read, is not local.
func isLocal(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	case nil:
		return false
	}
	if addr.Network() == "unix" {
		return true
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
