// Package rawconn owns the socket I/O of the server's connection loop:
// Wrap prepares an accepted connection, and ReadLoop reads it, handing
// what each read brings to the caller, until the caller is done.
//
// On Linux a socket is read and written with raw read(2) and write(2)
// system calls inside Go's netpoller, which, unlike net.Conn's Read and
// Write, do not tell the scheduler that the thread may block (see conn in
// raw_linux.go for why that matters). Everywhere else the path is
// portable: Wrap returns the connection as it is and ReadLoop is a loop
// over its Read.
//
// The build tag cellserver_portable forces the portable path on Linux too
// (go test -tags cellserver_portable ./...). CI runs the tests with it, so
// that the path every other platform takes is tested where CI runs.
//
// The raw path is restricted to Linux, where it was measured: on OpenBSD
// Go makes system calls through libc and syscall.RawSyscall fails with
// ENOSYS, and on darwin a raw call bypasses libc. It is written by hand
// because no library does this: golang.org/x/sys offers the raw calls,
// but not the read loop that waits on the netpoller without a read first.
//
// It holds the raw system calls and the unsafe pointer conversion of the
// connection loop, so that package server has neither. It must import only
// the standard library, nothing from cellserver, so that it stays
// machinery with no knowledge of RESP or of the server.
package rawconn

import (
	"crypto/tls"
	"net"
)

// readLooper is a connection that runs its own read loop (the raw path's
// conn), with ReadLoop's contract.
type readLooper interface {
	readLoop(next func(m int, err error) []byte)
}

// Wrap returns nc ready for ReadLoop and Write. On the raw path a socket
// is wrapped so that both make raw system calls; any other connection, and
// every connection on the portable path, is returned as it is.
//
// A wrapped connection takes one Write at a time and one ReadLoop, as a
// connection loop that is its only reader and writer does. Deadlines and
// Close work as for net.Conn, but a Close while ReadLoop runs completes
// in the background as the loop returns, and a failed read or write is
// reported as an *os.SyscallError.
func Wrap(nc net.Conn) net.Conn { return wrap(nc) }

// ReadLoop reads nc until next returns nil. It first calls next(0, nil)
// for a buffer, then reads into the buffer next last returned and hands
// next what each read brought: m bytes, or, with m == 0, the error that
// ends the stream (io.EOF, a deadline, net.ErrClosed, or a failed read).
// next returns the buffer for the next read, or nil to stop.
func ReadLoop(nc net.Conn, next func(m int, err error) []byte) {
	if rl, ok := nc.(readLooper); ok {
		rl.readLoop(next)
		return
	}
	for b := next(0, nil); b != nil; {
		m, err := nc.Read(b)
		b = next(m, err)
	}
}

// Detach readies nc, whose ReadLoop has returned, to be read and written
// by other code (a replication link taking the connection over): the
// loop's own read deadline is withdrawn. nc is Wrap's result, or a TLS
// connection over it.
func Detach(nc net.Conn) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if d, ok := nc.(interface{ detach() }); ok {
		d.detach()
	}
}
