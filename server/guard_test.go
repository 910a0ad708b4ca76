package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// pipeConn is a net.Conn whose reads come from a fixed byte stream, in
// chunks of a given size, and whose writes are recorded.
type pipeConn struct {
	net.Conn
	in    []byte
	chunk int
	out   bytes.Buffer
}

func (p *pipeConn) Read(b []byte) (int, error) {
	if len(p.in) == 0 {
		return 0, io.EOF
	}
	n := min(len(b), p.chunk, len(p.in))
	copy(b, p.in[:n])
	p.in = p.in[n:]
	return n, nil
}

func (p *pipeConn) Write(b []byte) (int, error)     { return p.out.Write(b) }
func (p *pipeConn) SetReadDeadline(time.Time) error { return nil }

// readAll drains a guardConn: what passed, and the error it stopped with.
func readAll(g *guardConn) (string, error) {
	var got bytes.Buffer
	buf := make([]byte, 1<<20)
	for {
		n, err := g.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			return got.String(), err
		}
	}
}

func newGuard(in string, chunk int) (*guardConn, *pipeConn) {
	limits := &guardLimits{}
	limits.maxBulk.Store(1 << 20)
	limits.maxQuery.Store(4 << 20)
	p := &pipeConn{in: []byte(in), chunk: chunk}
	return &guardConn{Conn: p, limits: limits}, p
}

func TestGuardPassesValidTraffic(t *testing.T) {
	big := strings.Repeat("x", 1<<20) // exactly proto-max-bulk-len
	streams := []string{
		"*1\r\n$4\r\nPING\r\n",
		"*5\r\n$11\r\nCL.THROTTLE\r\n$3\r\nk\r\n\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n", // a CRLF inside a key
		"PING\r\nCL.THROTTLE user 15 30 60\r\n\r\n",
		"*2\r\n$4\r\nECHO\r\n$1048576\r\n" + big + "\r\n*1\r\n$4\r\nPING\r\n",
		"*0\r\n*1\r\n$4\r\nPING\r\n",
	}
	for _, s := range streams {
		for _, chunk := range []int{1, 3, 7, 4096} {
			g, p := newGuard(s, chunk)
			got, err := readAll(g)
			if !errors.Is(err, io.EOF) || got != s || p.out.Len() != 0 {
				t.Fatalf("chunk %d: stream %.40q: passed %d of %d bytes, err %v, wrote %q", chunk, s, len(got), len(s), err, p.out.String())
			}
		}
	}
}

func TestGuardStopsOversizedRequests(t *testing.T) {
	// passed: what must pass when the whole stream arrives in one read;
	// cut: the offset of the byte that breaks the limit, which never passes.
	cases := []struct {
		name, in, passed, reply string
		cut                     int
	}{
		{"bulk too long", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1048577\r\n", "*1\r\n$4\r\nPING\r\n", "invalid bulk length", 42},
		{"too many arguments", "*1048577\r\n", "", "invalid multibulk length", 10},
		{"inline too long", "PING\r\n" + strings.Repeat("a", 70000), "PING\r\n", "too big inline request", 6 + maxInlineSize},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 5, 100000} {
			g, p := newGuard(c.in, chunk)
			got, err := readAll(g)
			if !errors.Is(err, errGuardClosed) {
				t.Fatalf("%s, chunk %d: err %v", c.name, chunk, err)
			}
			if !strings.HasPrefix(c.in, got) || len(got) > c.cut {
				t.Fatalf("%s, chunk %d: passed %d bytes, the limit breaks at %d", c.name, chunk, len(got), c.cut)
			}
			if chunk == 100000 && got != c.passed {
				t.Fatalf("%s: requests before the bad one must pass: got %d bytes, want %d", c.name, len(got), len(c.passed))
			}
			if want := "-ERR Protocol error: " + c.reply + "\r\n"; p.out.String() != want {
				t.Fatalf("%s, chunk %d: wrote %q, want %q", c.name, chunk, p.out.String(), want)
			}
		}
	}
}

func TestGuardQueryLimit(t *testing.T) {
	g, p := newGuard("", 1<<16)
	g.limits.maxQuery.Store(1 << 20)
	// Two bulks of 600 KB each: each under proto-max-bulk-len, together over the query limit.
	chunk := strings.Repeat("y", 600<<10)
	p.in = []byte("*3\r\n$3\r\nSET\r\n$614400\r\n" + chunk + "\r\n$614400\r\n" + chunk + "\r\n")
	if _, err := readAll(g); !errors.Is(err, errGuardClosed) || !strings.Contains(p.out.String(), "query buffer limit") {
		t.Fatalf("err %v, wrote %q", err, p.out.String())
	}
}

func TestGuardLeavesMalformedInputToRedcon(t *testing.T) {
	for _, s := range []string{"*x\r\n", "*1\r\n#4\r\n", "*-1\r\n", "*1\r\n$-5\r\n", "*" + strings.Repeat("9", 40) + "\r\n"} {
		g, p := newGuard(s+"more bytes that are not checked", 4)
		if _, err := readAll(g); !errors.Is(err, io.EOF) || p.out.Len() != 0 {
			t.Fatalf("%q: err %v, wrote %q", s, err, p.out.String())
		}
	}
}
