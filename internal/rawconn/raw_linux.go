//go:build !cellserver_portable

package rawconn

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// conn reads (readLoop) and writes (Write) a connection's socket with raw
// system calls (syscall.RawSyscall) inside Go's netpoller
// (syscall.RawConn), instead of net.Conn's Read and Write, which tell the
// scheduler before each call that the thread may block. The socket is
// non-blocking, so no call ever blocks; told otherwise, the runtime's
// monitor hands the processor to another thread whenever a call runs past
// 20 µs (as a loopback write that wakes its reader does, on a VM), and the
// server's work is spread over several threads that wake one another,
// stealing time from the other cores. Waiting for readiness, deadlines and
// Close work as for net.Conn (errors differ in their wrapping: a failed
// call is an *os.SyscallError).
//
// Unlike a net.Conn, a conn takes one Write at a time (a write keeps its
// state in the struct), and one readLoop. The connection loop is its only
// reader and writer. (Its Read is net.Conn's: ReadLoop reads only through
// readLoop.) And a raw call is invisible to the race detector, which sees
// the buffers of syscall.Read and Write being read or written.
type conn struct {
	net.Conn
	rc syscall.RawConn

	// A write's arguments and results, for write, which is bound once so
	// that a Write allocates nothing.
	wbuf    []byte
	wn      int
	werr    syscall.Errno
	wzero   bool
	writeFn func(fd uintptr) bool

	looping   atomic.Bool   // readLoop is running
	probeWait time.Duration // how long a probe waits: the constant probeWait, longer in tests
	closed    atomic.Bool   // Close was called
	empty     int           // readLoop's reads that found nothing (for tests)

	dmu     sync.Mutex // guards the deadlines: CONFIG SET timeout sets them from elsewhere
	idle    time.Time  // the idle deadline, SetReadDeadline's; zero: none
	probeAt time.Time  // readLoop's probe; zero: not armed
}

// readLoop is the connection's read loop, with ReadLoop's contract: it
// reads into the buffer next returns and hands next what each read
// brought, until next returns nil.
//
// It saves a read(2) per batch. syscall.RawConn.Read forgets, as it
// starts, whatever the netpoller has said of the socket, so it must begin
// with a read, and a loop over Read pays one read that finds nothing
// (EAGAIN) for every read that brings a batch. readLoop instead stays
// inside one RawConn.Read, and after a read that left room in its buffer
// it waits for the netpoller's word that more has come, without a read
// first. A short read means the socket had no more data, and data that
// arrives later wakes the netpoller. What a short read does not take, and
// the netpoller sends no word of again, is the end of the stream (a FIN,
// or a reset or error) when that arrived before the read, its word merged
// with the one that woke the loop; so too data past an urgent (MSG_OOB)
// mark, where a read stops short. So that a client that sends and closes
// (or half-closes) at once is still seen to go, a read follows within
// probeWait of a wait that skipped one (the probe, a read deadline):
// such a client is released up to probeWait later than a loop over Read
// would. Once a read has found nothing, waits need no probe until the next
// read that brings data, and a busy connection arms one probe per
// probeWait, not one per batch.
//
// While the loop runs it holds the descriptor, so Close closes in the
// background (see Close), and the loop stops reading once Close was called.
func (c *conn) readLoop(next func(m int, err error) []byte) {
	b := next(0, nil)
	c.looping.Store(true)
	defer c.looping.Store(false)
	for b != nil {
		err := c.rc.Read(func(fd uintptr) bool {
			for b != nil {
				if c.closed.Load() {
					b = next(0, net.ErrClosed) // a killed client streaming a large request
					break
				}
				n, e := rawCall(syscall.SYS_READ, fd, b)
				switch {
				case e == syscall.EAGAIN:
					c.empty++
					c.probe(false) // empty: whatever comes now, FIN included, sends word
					return false
				case e != 0:
					b = next(0, os.NewSyscallError("read", e))
				case n == 0:
					b = next(0, io.EOF)
				default:
					drained := n < len(b)
					b = next(n, nil)
					if drained && b != nil {
						c.probe(true)
						return false // wait for word without reading first
					}
				}
			}
			return true
		})
		if err != nil && b != nil && !c.probeFired(err) {
			b = next(0, err) // closed, or idle past the deadline
		}
	}
}

// probeWait is how long a wait that skipped its read lasts at most before
// the read is made after all (see readLoop).
const probeWait = 10 * time.Millisecond

// probe arms (on) or disarms the read deadline that ends a wait which
// skipped its read. Arming an armed probe leaves it as it is: a busy
// connection sets a deadline once per probeWait, not once per batch.
func (c *conn) probe(on bool) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if on == !c.probeAt.IsZero() {
		return
	}
	c.probeAt = time.Time{}
	if on {
		c.probeAt = time.Now().Add(c.probeWait)
	}
	c.applyDeadline()
}

// probeFired reports whether err, which ended a wait, is the probe's
// deadline rather than the idle timeout's, and disarms the probe if so.
func (c *conn) probeFired(err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.probeAt.IsZero() || !c.idle.IsZero() && !time.Now().Before(c.idle) {
		return false
	}
	c.probeAt = time.Time{}
	c.applyDeadline()
	return true
}

// detach disarms readLoop's probe, once the loop has returned, so that
// the connection's reads from then on see only the deadlines they set.
func (c *conn) detach() { c.probe(false) }

// SetDeadline sets both deadlines, the read one as SetReadDeadline does.
func (c *conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetReadDeadline sets the idle deadline (the zero time: none), which
// readLoop's probe may bring forward.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.idle = t
	return c.applyDeadline()
}

// applyDeadline sets the socket's read deadline to the earlier of the idle
// deadline and the probe's. c.dmu is held.
func (c *conn) applyDeadline() error {
	d := c.idle
	if !c.probeAt.IsZero() && (d.IsZero() || c.probeAt.Before(d)) {
		d = c.probeAt
	}
	return c.Conn.SetReadDeadline(d)
}

// Close closes the connection. While readLoop runs it holds the
// descriptor, and net.Conn's Close waits for every holder to let go, that
// is for the loop to finish the batch it is running and wait again. That
// must not be waited for: the server's Shutdown kills (closes) each client
// while holding the server's lock, which the batch may be waiting for itself
// (CLIENT LIST, CONFIG SET timeout). So then the close runs in the
// background: it begins at once (a wait for readiness, a write, or the
// loop's next read fails), and completes as the loop returns.
func (c *conn) Close() error {
	c.closed.Store(true)
	if c.looping.Load() {
		go c.Conn.Close() // its error has no one to go to: this Close has returned
		return nil
	}
	return c.Conn.Close()
}

// wrap wraps nc when it is a socket, and returns it as it is otherwise.
func wrap(nc net.Conn) net.Conn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nc
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &conn{Conn: nc, rc: rc, probeWait: probeWait}
	c.writeFn = c.write
	return c
}

// Write writes all of b, waiting in the netpoller while the socket has no
// room, as net.Conn's Write does.
func (c *conn) Write(b []byte) (int, error) {
	if c.closed.Load() {
		// A Close while readLoop ran closes the socket in the background:
		// until it has, the socket would still take the write.
		return 0, &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: net.ErrClosed}
	}
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
func (c *conn) write(fd uintptr) bool {
	for len(c.wbuf) > 0 {
		n, e := rawCall(syscall.SYS_WRITE, fd, c.wbuf)
		switch e {
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

// rawCall makes the read(2) or write(2) system call trap on fd with b
// (not empty), again while it is interrupted (EINTR).
func rawCall(trap, fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e != syscall.EINTR {
			return int(n), e
		}
	}
}
