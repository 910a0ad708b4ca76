package server

import (
	"net"
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
// replies by flushing whenever more than flushAt bytes are waiting.

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
}

type conn struct {
	s   *Server
	nc  net.Conn
	w   *commands.Writer
	cl  *commands.Client
	buf []byte // read buffer: buf[:n] is unparsed input, from a request's start
	n   int
	p   parser
	la  lookahead

	deadline  bool // a read deadline is set
	oneThread bool // GOMAXPROCS is 1: see the yield before a batch's flush
}

// serve runs the connection until the client leaves, breaks the protocol,
// is killed, or the server shuts down.
func (c *conn) serve() {
	defer c.s.release(c)
	c.buf = make([]byte, readBufSize)
	rawconn.ReadLoop(c.nc, c.afterRead)
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
				_ = c.w.Flush() // closing anyway
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
		if q != nil {
			c.s.table.DispatchFound(c.cl, q.cmd, args, q.key)
		} else {
			c.s.table.Dispatch(c.cl, args)
		}
		ran++
		if c.cl.CloseAfterReply() {
			c.cl.Settle()
			_ = c.w.Flush() // closing anyway
			return nil
		}
		if c.w.Len() > flushAt && c.w.Flush() != nil {
			return nil
		}
	}
	c.cl.Settle() // before p.release: a lone fast command's arguments may go to the slow log
	c.p.release()
	if ran > 0 {
		c.cl.Touch(c.s.nowSec.Load())
		if ran > 1 && c.oneThread {
			// A pipelined batch: let the connections whose requests are
			// already in hand run theirs before this reply goes out, so
			// that replies leave in bursts. A client that went to sleep
			// waiting is then woken once per burst rather than once per
			// reply, and waking it is most of what a write costs beyond
			// copying. Only on one thread: with more, other connections
			// run meanwhile anyway, and a yield wakes an idle thread to
			// take this goroutine (+200 ns a request in
			// BenchmarkServeConn).
			runtime.Gosched()
		}
		if c.w.Flush() != nil {
			return nil
		}
	}

	// Keep the unparsed rest of a request at the front of the buffer.
	pending := n - r
	switch {
	case len(c.buf) > readBufSize && pending <= readBufSize/2:
		small := make([]byte, readBufSize) // give a large request's buffer back
		copy(small, c.buf[r:n])
		c.buf = small
	case r > 0 && pending > 0:
		copy(c.buf, c.buf[r:n])
	}
	c.n = pending
	if c.n == len(c.buf) {
		grown := make([]byte, 2*len(c.buf))
		copy(grown, c.buf[:c.n])
		c.buf = grown
	}

	if d := c.s.limits.timeout.Load(); d > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(time.Duration(d))) // fails only on a closed connection, which is going anyway
		c.deadline = true
	} else if c.deadline {
		_ = c.nc.SetReadDeadline(time.Time{}) // fails only on a closed connection, which is going anyway
		c.deadline = false
	}
	return c.buf[c.n:]
}
