//go:build !linux || cellserver_portable

package rawconn

import "net"

// wrap returns nc as it is: off Linux, or with the cellserver_portable
// tag, the connection loop reads and writes through net.Conn (see the
// package doc).
func wrap(nc net.Conn) net.Conn { return nc }
