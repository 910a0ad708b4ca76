package server

import (
	"errors"
	"net"
	"sync/atomic"
)

// guard bounds what one connection can make the server buffer. redcon
// buffers a request until it is complete and grows its buffer as needed, so
// without a bound one client could make the server hold any amount of
// memory. guardConn follows the RESP framing of the bytes as they are read
// (headers only; bulk payloads are skipped in one step) and stops a request
// whose multibulk count, bulk length, inline line or total size is over the
// limits, answering Redis's protocol error and closing the connection.

const (
	maxMultibulk  = 1024 * 1024 // arguments in one request
	maxInlineSize = 64 * 1024   // bytes of one inline (telnet) command
	maxHeaderLen  = 32          // digits and sign of a count or length
)

var errGuardClosed = errors.New("server: request over limits")

type guardLimits struct {
	maxBulk  atomic.Int64 // proto-max-bulk-len
	maxQuery atomic.Int64 // client-query-buffer-limit
}

type guardState uint8

const (
	gsStart      guardState = iota // at the start of a request
	gsInline                       // inside an inline command line
	gsCount                        // reading *<count>
	gsBulkHeader                   // expecting '$'
	gsBulkLen                      // reading $<len>
	gsBulkBody                     // skipping a bulk payload and its CRLF
	gsPass                         // malformed: leave it to redcon, which will reject it
)

type guardConn struct {
	net.Conn
	limits *guardLimits

	state   guardState
	num     int64 // the number being read
	digits  int
	neg     bool
	args    int64 // bulk strings left in this request
	skip    int64 // payload bytes left to skip
	used    int64 // bytes of the current request so far
	pending string
}

// Read reads from the connection and checks the framing of what it read.
// When a request is over a limit, Read returns the bytes before it, then,
// on the next call, writes the protocol error and fails.
func (g *guardConn) Read(p []byte) (int, error) {
	if g.pending != "" {
		_, _ = g.Conn.Write([]byte("-ERR Protocol error: " + g.pending + "\r\n"))
		return 0, errGuardClosed
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		if cut, msg := g.scan(p[:n]); msg != "" {
			g.pending = msg
			if cut == 0 {
				return g.Read(p)
			}
			return cut, nil
		}
	}
	return n, err
}

// scan advances the framing state over b. It returns, when a limit is
// broken, the offset of the request start that broke it and the message.
func (g *guardConn) scan(b []byte) (int, string) {
	reqStart := 0
	for i := 0; i < len(b); i++ {
		if g.state == gsStart {
			reqStart = i
			g.used = 0
		}
		if g.state == gsBulkBody {
			step := min(g.skip, int64(len(b)-i))
			g.skip -= step
			g.used += step
			i += int(step) - 1
			if g.skip == 0 {
				g.args--
				g.state = gsBulkHeader
				if g.args == 0 {
					g.state = gsStart
				}
			}
			if g.used > g.limits.maxQuery.Load() {
				return reqStart, "query buffer limit exceeded"
			}
			continue
		}
		g.used++
		c := b[i]
		switch g.state {
		case gsPass:
			// Stay out of the way: redcon answers and closes.
		case gsStart:
			switch c {
			case '*':
				g.state, g.num, g.digits, g.neg = gsCount, 0, 0, false
			case '\r', '\n':
			default:
				g.state = gsInline
			}
		case gsInline:
			if c == '\n' {
				g.state = gsStart
			} else if g.used > maxInlineSize {
				return reqStart, "too big inline request"
			}
		case gsCount, gsBulkLen:
			switch {
			case c >= '0' && c <= '9':
				g.digits++
				if g.digits > maxHeaderLen {
					g.state = gsPass
					continue
				}
				if g.num < 1<<58 {
					g.num = g.num*10 + int64(c-'0')
				}
			case c == '-' && g.digits == 0 && !g.neg:
				g.neg = true
			case c == '\r':
			case c == '\n':
				if g.neg || g.digits == 0 {
					g.state = gsPass
					continue
				}
				if g.state == gsCount {
					if g.num > maxMultibulk {
						return reqStart, "invalid multibulk length"
					}
					g.args = g.num
					g.state = gsBulkHeader
					if g.args == 0 {
						g.state = gsStart
					}
					continue
				}
				if g.num > g.limits.maxBulk.Load() {
					return reqStart, "invalid bulk length"
				}
				g.skip = g.num + 2
				g.state = gsBulkBody
			default:
				g.state = gsPass
			}
		case gsBulkHeader:
			if c != '$' {
				g.state = gsPass
				continue
			}
			g.state, g.num, g.digits, g.neg = gsBulkLen, 0, 0, false
		}
	}
	return 0, ""
}

// guardListener wraps every accepted connection in a guardConn.
type guardListener struct {
	net.Listener
	limits *guardLimits
}

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &guardConn{Conn: c, limits: l.limits}, nil
}
