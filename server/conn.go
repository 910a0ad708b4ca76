package server

import (
	"errors"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/internal/rawconn"
)

// The connection loop: read, run every complete request, flush, repeat.
// Requests are read ahead a group at a time (prefetch.go), or parsed by
// the parser (parse.go) when reading ahead does not take them; replies are
// encoded by commands.Writer (redcon's encoders, and its own for a limiter
// reply); a limiter command allocates
// nothing on its way through. What one client can make the server hold is
// bounded: a request by its limits (checked as each header arrives),
// replies by flushing whenever more than flushAt bytes are waiting, and
// by the output limits (flush).

const (
	readBufSize   = 16 << 10    // a connection's read buffer to start with
	flushAt       = 64 << 10    // flush replies once this many are waiting
	maxMultibulk  = 1024 * 1024 // arguments in one request
	maxInlineSize = 64 << 10    // bytes of one inline (telnet) command
)

// protocolError is a request the server will not read: it is answered
// "-ERR Protocol error: <msg>" and the connection is closed, as Redis does.
type protocolError string

func (e protocolError) Error() string { return "Protocol error: " + string(e) }

// limits are the request bounds, changeable at run time.
type limits struct {
	maxBulk  atomic.Int64 // proto-max-bulk-len
	maxQuery atomic.Int64 // client-query-buffer-limit
	timeout  atomic.Int64 // idle timeout in ns; 0: none
	outHard  atomic.Int64 // client-output-buffer-limit normal: hard bytes; 0: none
	outSoft  atomic.Int64 // soft bytes; 0: none
	outSecs  atomic.Int64 // soft seconds
	psHard   atomic.Int64 // client-output-buffer-limit pubsub: hard bytes; 0: none
	psSoft   atomic.Int64 // soft bytes; 0: none
	psSecs   atomic.Int64 // soft seconds
}

// Writing replies. A flush must complete within a deadline of wait to
// 2·wait, where wait is writeTimeout, or the idle timeout when one is set
// and shorter: a client that takes none of its replies for that long is
// disconnected, so that it cannot hold its connection, and what the
// server buffered for it, for ever. The deadline is set 2·wait ahead and
// set again only once less than wait of it is left, so that a busy
// connection resets a timer once per wait rather than on every batch.
//
// Under an output limit, a flush in the middle of a batch does not wait
// for the client: it writes what the socket takes within tryWrite and
// keeps the rest, so a client that sends requests and never reads sees
// its replies pile up until the limit disconnects it, as in Redis. After a
// write that left some, the next is tried once flushAt more bytes wait.
const (
	writeTimeout = 30 * time.Second
	tryWrite     = time.Millisecond
)

type conn struct {
	s   *Server
	nc  net.Conn
	w   *commands.Writer
	cl  *commands.Client
	buf []byte // read buffer: buf[:n] is unparsed input, from a request's start
	n   int
	p   parser
	la  lookahead

	deadline bool // a read deadline is set

	// linkOnly: protected mode let the connection in for the cluster link
	// handshake alone (Config.admitsLinks); linkSteps counts its steps.
	linkOnly  bool
	linkSteps int

	writeBy   int64     // the write deadline set, Unix ns; 0: set it again
	softSince time.Time // since when more than the soft limit waits; zero: not above it
	retryAt   int       // under output limits, the next mid-batch write waits for this many bytes
	taken     int       // bytes of buf[:n] taken by the requests run so far in this batch
	counted   int64     // the buffers' bytes this connection has added to the engine's count (countBuffers)
	push      *pusher   // once the client has subscribed (push.go): where its output goes

	// What REPLSYNC handed the connection to, and the bytes read past it
	// (replication.go).
	handOffFn   func(nc net.Conn, buffered []byte)
	handOffRest []byte
}

// serve runs the connection until the client leaves, breaks the protocol,
// is killed, or the server shuts down.
func (c *conn) serve() {
	defer c.s.release(c)
	if !c.handshake() {
		return
	}
	c.buf = make([]byte, readBufSize)
	rawconn.ReadLoop(c.nc, c.afterRead)
	if c.handOffFn != nil {
		c.handOff(c.handOffFn, c.handOffRest)
	}
}

// afterRead takes what a read brought (m bytes at buf[n:], or readErr),
// runs every complete request in the buffer, flushes once, and returns
// where the next read goes; nil when the connection is done.
func (c *conn) afterRead(m int, readErr error) []byte {
	c.n += m
	if readErr != nil && m == 0 {
		return nil
	}
	r, n := 0, c.n
	ran := 0 // requests run
	if m > 0 {
		c.cl.Mark()
		c.cl.CountInput(m)
	}
	lim := bounds{maxBulk: c.s.limits.maxBulk.Load(), maxQuery: c.s.limits.maxQuery.Load()}
	c.la.reset(r)
	for r < n {
		lim.authed = c.cl.Authenticated() // AUTH may come in this very batch
		c.la.advance(c.buf[:n], r, lim, c.s.table, c.s.loc)
		var args [][]byte
		q := c.la.take(r)
		if q != nil {
			args = c.p.fromSpans(c.buf[:n], q.spans[:q.nargs])
			r += q.used
		} else {
			var used int
			var err error
			args, used, err = c.p.next(c.buf[r:n], lim)
			if err != nil {
				c.w.WriteError("ERR " + err.Error())
				c.flush(true) // closing anyway
				return nil
			}
			if used == 0 {
				break // incomplete
			}
			r += used
			if len(args) == 0 {
				continue // an empty line or *0: nothing to do, as in Redis
			}
		}
		if c.cl.Killed() {
			return nil // CLIENT KILL or shutdown: run nothing more
		}
		c.taken = r
		if c.linkOnly && !c.linkStep(args) {
			c.s.connsRejected.Add(1)
			c.w.WriteError(commands.ErrProtectedMode)
			c.flush(true) // closing anyway
			return nil
		}
		if q != nil {
			c.s.table.DispatchFound(c.cl, q.cmd, args, q.key)
		} else {
			c.s.table.Dispatch(c.cl, args)
		}
		ran++
		if fn := c.cl.HandOff(); fn != nil {
			// A replica's link: serve runs fn once the read loop has
			// returned (replication.go).
			c.cl.Settle()
			c.handOffFn, c.handOffRest = fn, append([]byte(nil), c.buf[r:n]...)
			return nil
		}
		if c.cl.CloseAfterReply() {
			c.cl.Settle()
			c.flush(true) // closing anyway
			return nil
		}
		if c.w.Len() > flushAt {
			if !c.flush(false) {
				return nil
			}
			// A write can wait on a client that reads slowly: the
			// commands after it must not be timed, or decided (see
			// engine.At), at the instant before it.
			c.cl.Mark()
		}
	}
	c.cl.Settle() // before p.release: a lone fast command's arguments may go to the slow log
	c.p.release()
	if ran > 0 {
		c.cl.Touch(c.s.nowSec.Load())
		if ran > 1 && c.s.oneThread.Load() {
			// A pipelined batch: let the connections whose requests are
			// already in hand run theirs before this reply goes out, so
			// that replies leave in bursts. A client that went to sleep
			// waiting is then woken once per burst rather than once per
			// reply, and waking it is most of what a write costs beyond
			// copying. Only on one thread: with more, other connections
			// run meanwhile anyway, and a yield would wake an idle thread
			// to take this goroutine (bench/RESULTS.md, "Replies in
			// bursts").
			runtime.Gosched()
		}
		if !c.flush(true) {
			return nil
		}
	}

	// Keep the unparsed rest of a request at the front of the buffer.
	pending := n - r
	switch {
	case len(c.buf) > readBufSize && pending <= readBufSize/2 && c.p.need == 0:
		small := make([]byte, readBufSize) // give a large request's buffer back
		copy(small, c.buf[r:n])
		c.buf = small
	case r > 0 && pending > 0:
		copy(c.buf, c.buf[r:n])
	}
	c.n = pending
	if c.n == len(c.buf) {
		c.grow()
	}

	c.cl.NoteBuffers(c.n, len(c.buf)-c.n, c.w.Len(), len(c.buf)+c.w.Cap())
	c.countBuffers()

	if d := c.s.limits.timeout.Load(); d > 0 && (c.push == nil || !c.cl.Subscribed()) { // a subscriber has no idle timeout, as in Redis
		_ = c.nc.SetReadDeadline(time.Now().Add(time.Duration(d))) // fails only on a closed connection, which is going anyway
		c.deadline = true
	} else if c.deadline {
		_ = c.nc.SetReadDeadline(time.Time{}) // fails only on a closed connection, which is going anyway
		c.deadline = false
	}
	return c.buf[c.n:]
}

// grow replaces the full read buffer by one twice its size: never more
// than twice the bytes of the request that have arrived, so that what a
// client makes the server hold, and used_memory count, is bounded by what
// it sent, not by what a header announces. While a large bulk string is
// awaited (parser.need, bigBulk), the step that would pass its request's
// end stops there, with readBufSize more for the arguments after it: a
// request of 1 MiB ends in a buffer of about 1 MiB, after doublings from
// readBufSize that allocated about 3 MiB and copied about 2 MiB in all.
func (c *conn) grow() {
	size := 2 * len(c.buf)
	if need := c.p.need + readBufSize; c.p.need > len(c.buf) && need < size {
		size = need
	}
	grown := make([]byte, size)
	copy(grown, c.buf[:c.n])
	c.buf = grown
}

// countBuffers brings the engine's count of buffer memory (for
// maxmemory and used_memory) up to this connection's buffers as
// NoteBuffers last noted them, and when they grew, the peak of
// used_memory with it: a large request's buffers may come and go between
// two of the cron's samples. Their size seldom changes, so the shared
// count is seldom written.
func (c *conn) countBuffers() {
	if n := c.cl.BufferBytes(); n != c.counted {
		c.s.eng.AddBufferMemory(n - c.counted)
		if n > c.counted {
			c.s.notePeak(c.s.eng.UsedMemory())
		}
		c.counted = n
	}
}

// flush hands the buffered replies to the connection within the output
// limits and the write deadline (see writeTimeout), and reports whether
// the connection goes on; false once it has been dropped for them or its
// write failed. final is the flush that ends a batch, which waits for
// the client to take everything.
func (c *conn) flush(final bool) bool {
	n := c.w.Len()
	if n == 0 {
		return true
	}
	if c.push != nil { // subscribed: the pusher writes, under the pubsub class's limits
		c.cl.PushOut()
		return !c.cl.Killed()
	}
	hard, soft := c.s.limits.outHard.Load(), c.s.limits.outSoft.Load()
	if hard > 0 && int64(n) > hard {
		return c.overLimit("hard", n)
	}
	var softBy time.Time // when the soft limit runs out; zero: not above it
	if soft > 0 && int64(n) > soft {
		now := time.Now()
		if c.softSince.IsZero() {
			c.softSince = now
		}
		softBy = c.softSince.Add(time.Duration(c.s.limits.outSecs.Load()) * time.Second)
		if !now.Before(softBy) {
			return c.overLimit("soft", n)
		}
	} else {
		c.softSince = time.Time{}
	}
	c.cl.NoteBuffers(c.n-c.taken, len(c.buf)-c.n, n, len(c.buf)+c.w.Cap())
	if !final && (hard > 0 || soft > 0) {
		if n < c.retryAt {
			return true
		}
		c.writeBy = 0
		_ = c.nc.SetWriteDeadline(time.Now().Add(tryWrite)) // fails only on a closed connection, which the write reports
		done, err := c.w.FlushPart()
		if err != nil {
			return false
		}
		c.retryAt = 0
		if !done {
			c.retryAt = c.w.Len() + flushAt
		}
		return true
	}
	wait := writeTimeout
	if d := time.Duration(c.s.limits.timeout.Load()); d > 0 && d < wait {
		wait = d
	}
	switch now := time.Now().UnixNano(); {
	case !softBy.IsZero():
		c.writeBy = 0
		_ = c.nc.SetWriteDeadline(softBy) // fails only on a closed connection, which the write reports
	case c.writeBy-now < int64(wait):
		c.writeBy = now + 2*int64(wait)
		_ = c.nc.SetWriteDeadline(time.Unix(0, c.writeBy)) // as above
	}
	if err := c.w.Flush(); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if !softBy.IsZero() {
				return c.overLimit("soft", n)
			}
			c.s.outputDropped.Add(1)
			c.s.log.Logf("warning", "Client id=%d addr=%s closed: it took no replies for %v", c.cl.ID(), c.nc.RemoteAddr(), wait)
		}
		c.cl.Kill()
		return false
	}
	c.softSince, c.retryAt = time.Time{}, 0
	return true
}

// overLimit drops the connection's replies and reports false: the client
// is disconnected for its output limit (which: "hard" or "soft").
func (c *conn) overLimit(which string, n int) bool {
	c.s.outputDropped.Add(1) // counted before the close, which the client sees
	c.w.Drop()
	c.cl.Kill() // nothing more runs or is written: the connection closes
	c.s.log.Logf("warning", "Client id=%d addr=%s closed for overcoming of output buffer limits (%s limit, %d bytes waiting).", c.cl.ID(), c.nc.RemoteAddr(), which, n)
	return false
}
