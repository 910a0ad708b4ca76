//go:build !linux

package rawconn

import "net"

// wrap returns nc as it is: off Linux the connection loop reads and writes
// through net.Conn (see the package doc).
func wrap(nc net.Conn) net.Conn { return nc }
