//go:build unix

package server

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawConn reads and writes a connection's socket with raw system calls
// (syscall.RawSyscall) inside Go's netpoller (syscall.RawConn), instead of
// net.Conn's Read and Write, which tell the scheduler before each call that
// the thread may block. The socket is non-blocking, so no call ever
// blocks; told otherwise, the runtime's monitor hands the processor to
// another thread whenever a call runs past 20 µs (as a loopback write that
// wakes its reader does, on a VM), and the server's work is spread over
// several threads that wake one another, stealing time from the other
// cores. Waiting for readiness, deadlines and Close work as for net.Conn
// (errors differ in their wrapping: a failed call is an *os.SyscallError).
//
// Unlike a net.Conn, a rawConn takes one Read and one Write at a time
// (they may overlap each other): each call keeps its state in the struct.
// The connection loop is its only reader and writer. And a raw call is
// invisible to the race detector, which sees the buffers of syscall.Read
// and Write being read or written.
type rawConn struct {
	net.Conn
	rc syscall.RawConn

	// Each call's arguments and results, for the functions below, which
	// are bound once so that a call allocates nothing. Reads and writes
	// each have their own: they may run at once.
	rbuf    []byte
	rn      int
	rerr    syscall.Errno
	wbuf    []byte
	wn      int
	werr    syscall.Errno
	wzero   bool
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
}

// newRawConn wraps nc when it is a socket, and returns it as it is
// otherwise.
func newRawConn(nc net.Conn) net.Conn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nc
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &rawConn{Conn: nc, rc: rc}
	c.readFn, c.writeFn = c.read, c.write
	return c
}

func (c *rawConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.rbuf, c.rn, c.rerr = b, 0, 0
	err := c.rc.Read(c.readFn)
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, err // closed, or past the deadline
	case c.rerr != 0:
		return 0, os.NewSyscallError("read", c.rerr)
	case c.rn == 0:
		return 0, io.EOF
	}
	return c.rn, nil
}

// read is one read(2); false asks the netpoller to wait for data.
func (c *rawConn) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			c.rn = int(n)
		default:
			c.rerr = e
		}
		return true
	}
}

func (c *rawConn) Write(b []byte) (int, error) {
	c.wbuf, c.wn, c.werr, c.wzero = b, 0, 0, false
	err := c.rc.Write(c.writeFn)
	n := c.wn
	c.wbuf = nil
	switch {
	case err != nil:
		return n, err
	case c.werr != 0:
		return n, os.NewSyscallError("write", c.werr)
	case c.wzero:
		return n, io.ErrUnexpectedEOF // as net.Conn says of a write that took nothing
	}
	return n, nil
}

// write writes all of wbuf; false asks the netpoller to wait for room.
func (c *rawConn) write(fd uintptr) bool {
	for len(c.wbuf) > 0 {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wbuf[0])), uintptr(len(c.wbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			if n == 0 {
				c.wzero = true // never loop on a write that takes nothing
				return true
			}
			c.wn += int(n)
			c.wbuf = c.wbuf[n:]
		default:
			c.werr = e
			return true
		}
	}
	return true
}
