package server

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/tidwall/redcon"
)

// The connection loop. redcon parses each request (ReadNextCommand, into an
// argument slice reused for every command) and encodes each reply
// (redcon.Writer), so a limiter command allocates nothing on its way
// through. The loop bounds what one client can make the server buffer: a
// request that is not complete yet has its headers checked against the
// limits before more is read, so a client learns of an oversized request
// as soon as it announces it.

const (
	readBufSize   = 16 << 10    // a connection's read buffer to start with
	maxMultibulk  = 1024 * 1024 // arguments in one request
	maxInlineSize = 64 << 10    // bytes of one inline (telnet) command
	maxHeaderLen  = 32          // bytes of a *count or $length line
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
	s    *Server
	nc   net.Conn
	w    *redcon.Writer
	cl   *commands.Client
	buf  []byte   // read buffer: buf[r:n] is unparsed input
	args [][]byte // reused for every command's arguments
}

// serve runs the connection until the client leaves, breaks the protocol,
// is killed, or the server shuts down.
func (c *conn) serve() {
	defer c.s.release(c)
	c.buf = make([]byte, readBufSize)
	r, n := 0, 0
	deadline := false
	for {
		// Run every complete request in the buffer, then flush once.
		ran := 0
		for r < n {
			args, used, err := c.next(c.buf[r:n])
			if err != nil {
				c.fail(err)
				return
			}
			if used == 0 {
				break // incomplete
			}
			r += used
			if len(args) == 0 {
				continue // an empty line or *0: nothing to do, as in Redis
			}
			c.s.table.Dispatch(c.cl, args)
			ran++
			if c.cl.CloseAfterReply() {
				c.w.Flush() //nolint:errcheck // closing anyway
				return
			}
		}
		if ran > 0 {
			c.cl.Touch(c.s.nowSec.Load())
			if c.w.Flush() != nil {
				return
			}
		}

		// Keep the unparsed rest at the front of the buffer, checked.
		pending := n - r
		if pending > 0 {
			if err := c.s.checkPending(c.buf[r:n]); err != nil {
				c.fail(err)
				return
			}
		}
		switch {
		case pending == 0 && len(c.buf) > readBufSize:
			c.buf = make([]byte, readBufSize) // give a large request's buffer back
		case r > 0 && pending > 0:
			copy(c.buf, c.buf[r:n])
		}
		r, n = 0, pending
		if n == len(c.buf) {
			grown := make([]byte, 2*len(c.buf))
			copy(grown, c.buf[:n])
			c.buf = grown
		}

		if d := c.s.limits.timeout.Load(); d > 0 {
			c.nc.SetReadDeadline(time.Now().Add(time.Duration(d))) //nolint:errcheck
			deadline = true
		} else if deadline {
			c.nc.SetReadDeadline(time.Time{}) //nolint:errcheck
			deadline = false
		}
		m, err := c.nc.Read(c.buf[n:])
		n += m
		if err != nil && m == 0 {
			return
		}
	}
}

// next parses one request from the front of b. It returns the request's
// arguments (valid until the next read) and the bytes it used; used is 0
// when the request is not complete yet.
func (c *conn) next(b []byte) (args [][]byte, used int, err error) {
	if b[0] == '$' {
		// redcon reads a leading '$' as Tile38's protocol; Redis reads any
		// line not starting with '*' as an inline command.
		return c.nextInlineDollar(b)
	}
	complete, args, _, rest, err := redcon.ReadNextCommand(b, c.args[:0])
	if err != nil {
		return nil, 0, err
	}
	if !complete {
		return nil, 0, nil
	}
	if cap(args) <= 1024 {
		c.args = args[:0] // keep the grown slice for the next command
	}
	used = len(b) - len(rest)
	if used == 0 {
		used = len(b) // cannot happen for a complete request; never loop
	}
	return args, used, nil
}

// nextInlineDollar splits an inline line that starts with '$' at spaces.
func (c *conn) nextInlineDollar(b []byte) ([][]byte, int, error) {
	for i, ch := range b {
		if ch != '\n' {
			continue
		}
		line := b[:i]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		args := c.args[:0]
		start := -1
		for j := 0; j <= len(line); j++ {
			if j == len(line) || line[j] == ' ' {
				if start >= 0 {
					args = append(args, line[start:j])
					start = -1
				}
			} else if start < 0 {
				start = j
			}
		}
		return args, i + 1, nil
	}
	return nil, 0, nil
}

// fail answers a protocol error and lets serve close the connection.
func (c *conn) fail(err error) {
	var pe protocolError
	if errors.As(err, &pe) || isRedconProtocolError(err) {
		c.w.WriteError("ERR " + err.Error())
		c.w.Flush() //nolint:errcheck // closing anyway
	}
}

func isRedconProtocolError(err error) bool {
	const prefix = "Protocol error: "
	return len(err.Error()) > len(prefix) && err.Error()[:len(prefix)] == prefix
}

// checkPending checks the headers of an incomplete request against the
// limits: its argument count, each announced bulk length, their total, and
// an inline line's length. It reads headers only and skips payloads, so it
// costs little however large the request.
func (s *Server) checkPending(b []byte) error {
	if b[0] != '*' {
		if len(b) > maxInlineSize {
			return protocolError("too big inline request")
		}
		return nil
	}
	count, i, ok := headerNum(b, 1)
	if !ok {
		if i < 0 {
			return protocolError("too big mbulk count string")
		}
		return nil // the header is not all here yet
	}
	if count > maxMultibulk {
		return protocolError("invalid multibulk length")
	}
	maxBulk, maxQuery := s.limits.maxBulk.Load(), s.limits.maxQuery.Load()
	total := int64(i)
	for ; count > 0 && i < len(b); count-- {
		if b[i] != '$' {
			return nil // malformed: redcon reports it once it is all here
		}
		size, next, ok := headerNum(b, i+1)
		if !ok {
			if next < 0 {
				return protocolError("too big bulk count string")
			}
			return nil
		}
		if size > maxBulk {
			return protocolError("invalid bulk length")
		}
		total += int64(next-i) + size + 2
		if total > maxQuery {
			return protocolError("query buffer limit exceeded")
		}
		i = next + int(size) + 2
	}
	return nil
}

// headerNum reads the decimal number of a header line starting at b[i]
// (after its '*' or '$') and returns it with the index after the line's
// "\r\n". ok is false when the line is not complete; then end is -1 if
// the line is already too long to be a header.
func headerNum(b []byte, i int) (num int64, end int, ok bool) {
	start := i
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\n':
			return num, i + 1, true
		case c >= '0' && c <= '9':
			if num < 1<<50 {
				num = num*10 + int64(c-'0')
			}
		}
		if i-start > maxHeaderLen {
			return 0, -1, false
		}
	}
	return 0, 0, false
}
