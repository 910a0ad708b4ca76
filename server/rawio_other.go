//go:build !unix

package server

import "net"

// newRawConn leaves connections as they are where raw system calls are not
// used (see rawio.go).
func newRawConn(nc net.Conn) net.Conn { return nc }
