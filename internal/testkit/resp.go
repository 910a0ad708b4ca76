package testkit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Conn is a plain TCP connection to a RESP server that writes bytes as
// they are and reads replies as the exact bytes the server sent. Every
// read and write is bounded by IOTimeout; a failure fails the test.
type Conn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

// Dial opens a Conn to addr, closed when the test ends.
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, IOTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return NewConn(t, c)
}

// NewConn makes a Conn of c (a TLS connection, one end of a pipe), closed
// when the test ends.
func NewConn(t testing.TB, c net.Conn) *Conn {
	t.Cleanup(func() { _ = c.Close() })
	return &Conn{t: t, c: c, r: bufio.NewReader(c)}
}

// NetConn returns the connection underneath.
func (rc *Conn) NetConn() net.Conn { return rc.c }

// Send writes s as it is.
func (rc *Conn) Send(s string) {
	rc.t.Helper()
	_ = rc.c.SetWriteDeadline(time.Now().Add(IOTimeout))
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// Do sends args as a multibulk request and returns the raw reply.
func (rc *Conn) Do(args ...string) string {
	rc.t.Helper()
	rc.Send(Encode(args...))
	return rc.Reply()
}

// WantDo asserts the raw reply of a request.
func (rc *Conn) WantDo(want string, args ...string) {
	rc.t.Helper()
	if got := rc.Do(args...); got != want {
		rc.t.Fatalf("%.200q:\n got %q\nwant %q", args, got, want)
	}
}

// CheckDo is WantDo that lets the test go on after a mismatch.
func (rc *Conn) CheckDo(want string, args ...string) {
	rc.t.Helper()
	if got := rc.Do(args...); got != want {
		rc.t.Errorf("%.200q:\n got %q\nwant %q", args, got, want)
	}
}

// WantLines sends raw as it is, reads as many lines as want holds and
// asserts that they are want: for replies to requests a server may not
// parse as a client meant them.
func (rc *Conn) WantLines(want, raw string) {
	rc.t.Helper()
	rc.Send(raw)
	var got string
	for range strings.Count(want, "\r\n") {
		got += rc.Line()
	}
	if got != want {
		rc.t.Fatalf("%.200q:\n got %q\nwant %q", raw, got, want)
	}
}

// Reply reads one complete reply and returns its bytes.
func (rc *Conn) Reply() string {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(IOTimeout))
	s, err := ReadReply(rc.r)
	if err != nil {
		rc.t.Fatalf("read reply: %v (read so far %q)", err, s)
	}
	return s
}

// Line reads one line, CRLF included.
func (rc *Conn) Line() string {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(IOTimeout))
	s, err := rc.r.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("read line: %v (read so far %q)", err, s)
	}
	return s
}

// WantClosed asserts that the server closes the connection without
// sending anything more.
func (rc *Conn) WantClosed() {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(IOTimeout))
	b, err := io.ReadAll(rc.r)
	if len(b) > 0 {
		rc.t.Fatalf("got %q, want the connection closed", b)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		rc.t.Fatalf("the server did not close the connection")
	}
}

// Encode returns args as a RESP multibulk request.
func Encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// ReadReply reads one RESP2 or RESP3 reply and returns its exact bytes.
func ReadReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return line, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return line, fmt.Errorf("malformed line %q", line)
	}
	head := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return line, nil
	case '$', '=', '!':
		n, err := strconv.Atoi(head)
		if err != nil {
			return line, err
		}
		if n < 0 {
			return line, nil
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return line + string(body), err
		}
		return line + string(body), nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(head)
		if err != nil {
			return line, err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		out := line
		for range max(n, 0) {
			s, err := ReadReply(r)
			out += s
			if err != nil {
				return out, err
			}
		}
		return out, nil
	}
	return line, fmt.Errorf("unknown reply type in %q", line)
}

// Ints is the raw RESP of an array of integers (a limiter's reply).
func Ints(v ...int64) string {
	s := fmt.Sprintf("*%d\r\n", len(v))
	for _, n := range v {
		s += fmt.Sprintf(":%d\r\n", n)
	}
	return s
}

// Err is the raw RESP of an error reply; msg has no leading '-'.
func Err(msg string) string { return "-" + msg + "\r\n" }

// Bulk is the raw RESP of a bulk string.
func Bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// Flat returns a raw reply as one line: a simple reply without its CRLF,
// an array as its elements' lines joined by spaces (":0 :1 :0 :-1 :60"),
// a bulk string as its text. It makes short transcripts of the replies
// tests compare whole.
func Flat(reply string) string {
	lines := strings.Split(strings.TrimSuffix(reply, "\r\n"), "\r\n")
	if len(lines) > 0 && strings.HasPrefix(lines[0], "*") {
		lines = lines[1:]
	}
	return strings.Join(lines, " ")
}
