package server

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/ahead"
	"github.com/cellserver/cellserver/internal/testkit"
)

func newTestServer(t testing.TB) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.LogLevel = "nothing"
	cfg.ProtoMaxBulkLen = 1 << 20
	cfg.QueryBufferLimit = 4 << 20
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// parseAll feeds in to a fresh parser in chunks of chunk bytes, as reads
// would deliver it, and returns the requests it parsed and its error.
func parseAll(in string, chunk int) ([]string, error) {
	var p parser
	var out []string
	buf := []byte{}
	for fed := 0; ; {
		for len(buf) > 0 {
			args, used, err := p.next(buf, bounds{maxBulk: 1 << 20, maxQuery: 4 << 20, authed: true})
			if err != nil {
				return out, err
			}
			if used == 0 {
				break
			}
			var parts []string
			for _, a := range args {
				parts = append(parts, string(a))
			}
			out = append(out, strings.Join(parts, "|"))
			buf = buf[used:]
		}
		if fed == len(in) {
			return out, nil
		}
		step := min(chunk, len(in)-fed)
		buf = append(buf, in[fed:fed+step]...)
		fed += step
	}
}

func TestParser(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	cases := []struct {
		name, in string
		want     []string // requests, arguments joined by |
		err      string
	}{
		{"resp", "*2\r\n$4\r\nECHO\r\n$5\r\nab\r\nc\r\n", []string{"ECHO|ab\r\nc"}, ""},
		{"pipeline", "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$0\r\n\r\n", []string{"PING", "GET|"}, ""},
		{"empty multibulk is skipped", "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", []string{"", "", "PING"}, ""},
		{"largest bulk", "*1\r\n$1048576\r\n" + big + "\r\n", []string{big}, ""},
		{"inline", "PING\r\nSET  a   b\n\r\n", []string{"PING", "SET|a|b", ""}, ""},
		{"inline quotes", `SET "a b" 'c d' "\x41\n" 'it\'s' ""` + "\r\n", []string{"SET|a b|c d|A\n|it's|"}, ""},
		{"quote inside a word", `SET k a"b c"` + "\r\n", []string{"SET|k|ab c"}, ""},
		{"quoted then word", `SET "a"` + "\t" + `b` + "\r\n", []string{"SET|a|b"}, ""},
		{"escape at the end of quotes", `ECHO "a\"` + "\r\n", nil, "unbalanced quotes in request"},
		{"NUL ends the line", "ECHO ab\x00cd\r\n", []string{"ECHO|ab"}, ""},
		{"NUL inside quotes", "ECHO \"ab\x00cd\"\r\n", nil, "unbalanced quotes in request"},
		{"inline $", "$3 PING\r\n", []string{"$3|PING"}, ""},
		{"negative bulk length", "*1\r\n$-2\r\n", nil, "invalid bulk length"},
		{"huge bulk length", "*1\r\n$9223372036854775807\r\n", nil, "invalid bulk length"},
		{"bulk over the limit", "*1\r\n$1048577\r\n", nil, "invalid bulk length"},
		{"bulk not a number", "*1\r\n$1x\r\n", nil, "invalid bulk length"},
		{"bulk without digits", "*1\r\n$\r\n", nil, "invalid bulk length"},
		{"bulk not terminated", "*1\r\n$2\r\nabcd\r\n", nil, "invalid bulk length"},
		{"bulk length of 19 digits", "*1\r\n$" + strings.Repeat("0", 19), nil, "invalid bulk length"},
		{"count over the limit", "*1048577\r\n", nil, "invalid multibulk length"},
		{"count not a number", "*x\r\n", nil, "invalid multibulk length"},
		{"count with a leading zero", "*01\r\n", nil, "invalid multibulk length"},
		{"count -0", "*-0\r\n", nil, "invalid multibulk length"},
		{"length -0", "*1\r\n$-0\r\n\r\n", nil, "invalid bulk length"},
		{"length with a leading zero", "*1\r\n$01\r\nA\r\n", nil, "invalid bulk length"},
		{"length 0", "*1\r\n$0\r\n\r\n", []string{""}, ""},
		{"count of 19 digits", "*" + strings.Repeat("0", 19), nil, "invalid multibulk length"},
		{"expected $", "*1\r\n:1\r\n", nil, "expected '$', got ':'"},
		{"query limit", "*5\r\n" + strings.Repeat("$1048576\r\n"+big+"\r\n", 3) + "$1048576\r\n", nil, "query buffer limit exceeded"},
		{"unbalanced quotes", `SET "a` + "\r\n", nil, "unbalanced quotes in request"},
		{"quote not followed by space", `SET "a"b` + "\r\n", nil, "unbalanced quotes in request"},
		{"inline too long", strings.Repeat("a", maxInlineSize+1), nil, "too big inline request"},
		{"inline line too long", strings.Repeat("a", maxInlineSize+1) + "\r\n", nil, "too big inline request"},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 7, 1 << 22} {
			if chunk == 1 && len(c.in) > 4096 {
				chunk = 4093 // byte by byte through megabytes is just slow
			}
			got, err := parseAll(c.in, chunk)
			gotErr := ""
			if err != nil {
				gotErr = strings.TrimPrefix(err.Error(), "Protocol error: ")
			}
			if gotErr != c.err || strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("%s, chunks of %d: got %.60q, %q; want %.60q, %q", c.name, chunk, got, gotErr, c.want, c.err)
			}
		}
	}
}

// Before AUTH (with a password required), requests are read under Redis's
// tighter limits: at most 10 arguments, bulks of at most 16384 bytes.
func TestParserLimitsBeforeAuth(t *testing.T) {
	var p parser
	lim := bounds{maxBulk: 1 << 20, maxQuery: 1 << 30}
	cases := []struct{ in, err string }{
		{"*11\r\n", "unauthenticated multibulk length"},
		{"*2\r\n$4\r\nAUTH\r\n$16385\r\n", "unauthenticated bulk length"},
		{"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n", ""},
	}
	for _, c := range cases {
		_, _, err := p.next([]byte(c.in), lim)
		got := ""
		if err != nil {
			got = strings.TrimPrefix(err.Error(), "Protocol error: ")
		}
		if got != c.err {
			t.Errorf("%q before AUTH: %q, want %q", c.in, got, c.err)
		}
	}
	lim.authed = true
	if _, _, err := p.next([]byte("*11\r\n"), lim); err != nil {
		t.Errorf("11 arguments after AUTH: %v", err)
	}
}

// An inline line that arrives a byte at a time is searched for its end
// once: the parser remembers how far it looked.
func TestParserResumesInline(t *testing.T) {
	var p parser
	line := []byte(strings.Repeat("a", 60000) + "\n")
	lim := bounds{maxBulk: 1 << 20, maxQuery: 1 << 30, authed: true}
	for i := 1; i < len(line); i++ {
		if _, used, err := p.next(line[:i], lim); used != 0 || err != nil {
			t.Fatalf("at %d: %d %v", i, used, err)
		}
		if p.scan != i {
			t.Fatalf("at %d bytes the parser resumes at %d", i, p.scan)
		}
	}
	if args, used, err := p.next(line, lim); err != nil || used != len(line) || len(args) != 1 {
		t.Fatalf("complete line: %d args, used %d, %v", len(args), used, err)
	}
}

// A request dripped in small pieces is parsed once, not again from its
// start on every read: the work is linear in its size.
func TestParserResumes(t *testing.T) {
	var p parser
	const n = 20000
	var req strings.Builder
	req.WriteString("*20000\r\n")
	for range n {
		req.WriteString("$1\r\nx\r\n")
	}
	in := []byte(req.String())
	for i := 1; i < len(in); i += 7 {
		if _, used, err := p.next(in[:i], bounds{maxBulk: 1 << 20, maxQuery: 4 << 20, authed: true}); used != 0 || err != nil {
			t.Fatalf("at %d: used %d err %v", i, used, err)
		}
		// Resuming means the spans read so far are never read again.
		if got, lo := len(p.spans), (i-9)/7-1; got < lo {
			t.Fatalf("at %d bytes only %d arguments kept, want at least %d", i, got, lo)
		}
	}
	args, used, err := p.next(in, bounds{maxBulk: 1 << 20, maxQuery: 4 << 20, authed: true})
	if err != nil || used != len(in) || len(args) != n {
		t.Fatalf("complete: %d args, used %d of %d, %v", len(args), used, len(in), err)
	}
}

// pipeConn serves one connection of s over an in-memory pipe (no buffer
// between its ends: a write waits for the other end's read), and returns
// the server's side of it and the client's.
func pipeConn(t *testing.T, s *Server) (*conn, *testkit.Conn) {
	t.Helper()
	client, server := net.Pipe()
	c := s.admit(server)
	if c == nil {
		t.Fatal("admit refused")
	}
	go c.serve()
	return c, testkit.NewConn(t, client)
}

// replies reads n replies from rc and returns their bytes.
func replies(rc *testkit.Conn, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(rc.Reply())
	}
	return b.String()
}

// Requests split at every byte, pipelined, inline or RESP, all parse.
func TestConnParsesAcrossSplits(t *testing.T) {
	s := newTestServer(t)
	_, rc := pipeConn(t, s)
	stream := "*2\r\n$4\r\nECHO\r\n$5\r\nab\r\nc\r\nPING\r\n\r\n*0\r\n$3 PING\r\n*1\r\n$4\r\nPING\r\n"
	go func() {
		for i := range len(stream) {
			if _, err := rc.NetConn().Write([]byte{stream[i]}); err != nil {
				return
			}
		}
	}()
	// "$3 PING" is an inline command named "$3", as in Redis.
	want := "$5\r\nab\r\nc\r\n+PONG\r\n-ERR unknown command '$3', with args beginning with: 'PING' \r\n+PONG\r\n"
	if got := replies(rc, 4); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestConnAnswersOversizedHeaderAtOnce(t *testing.T) {
	s := newTestServer(t)
	_, rc := pipeConn(t, s)
	go rc.NetConn().Write([]byte("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1048577\r\n"))
	if got := replies(rc, 2); got != "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n" {
		t.Fatalf("got %q", got)
	}
	rc.WantClosed()
}

func TestConnGrowsAndShrinksItsBuffer(t *testing.T) {
	s := newTestServer(t)
	c, rc := pipeConn(t, s)
	big := strings.Repeat("x", 200<<10)
	go rc.NetConn().Write([]byte("*2\r\n$4\r\nECHO\r\n$204800\r\n" + big + "\r\n"))
	if got := rc.Reply(); got != "$204800\r\n"+big+"\r\n" {
		t.Fatalf("echo of 200 KiB: got %d bytes", len(got))
	}
	rc.Send("PING\r\n")
	if got := rc.Reply(); got != "+PONG\r\n" {
		t.Fatal(got)
	}
	// The PING's read came after the large request was done: the buffer
	// must be back to its starting size. (serve owns c.buf; the pipe's
	// synchronous handoff orders this read after serve's last write.)
	if n := len(c.buf); n != readBufSize {
		t.Fatalf("read buffer is %d bytes after the large request", n)
	}
}

// TestConnSizesItsBufferForALargeBulk: a bulk string of bigBulk bytes or
// more ends in a buffer sized for its request, as Redis reads a large
// argument: the buffer doubles as its bytes arrive but stops at the
// request's end, where plain doubling took a 2 MiB buffer for a request of
// 1 MiB and 27 bytes, and allocations of 4 MiB in all on the way there.
func TestConnSizesItsBufferForALargeBulk(t *testing.T) {
	s := newTestServer(t)
	_, rc := pipeConn(t, s)
	_, admin := pipeConn(t, s)
	head := "*2\r\n$4\r\nECHO\r\n$1048576\r\n"
	body := strings.Repeat("x", 1<<20)
	// All but the final CRLF: the request stays in the buffer. (A pipe's
	// Write returns once the connection has read every byte.)
	if _, err := rc.NetConn().Write([]byte(head + body)); err != nil {
		t.Fatal(err)
	}
	var qbuf, free int
	testkit.WaitFor(t, "the request's bytes in the buffer", func() bool {
		list := admin.Do("CLIENT", "LIST")
		line := strings.SplitN(list[strings.Index(list, "\r\n")+2:], "\n", 2)[0] // the first client's
		for _, f := range strings.Fields(line) {
			fmt.Sscanf(f, "qbuf=%d", &qbuf)
			fmt.Sscanf(f, "qbuf-free=%d", &free)
		}
		return qbuf == len(head)+len(body)
	})
	if got, want := qbuf+free, len(head)+len(body)+2+readBufSize; got != want {
		t.Fatalf("read buffer of %d bytes for a request of %d: want %d", got, qbuf+2, want)
	}
	rc.Send("\r\n")
	if got := rc.Reply(); got != "$1048576\r\n"+body+"\r\n" {
		t.Fatalf("echo of 1 MiB: got %d bytes", len(got))
	}
}

// clientBuffer waits, via admin's CLIENT LIST, for the first client's
// read buffer to hold qbuf bytes, and returns the buffer's size.
func clientBuffer(t *testing.T, admin *testkit.Conn, qbuf int) int {
	t.Helper()
	var got, free int
	testkit.WaitFor(t, "the request's bytes in the buffer", func() bool {
		list := admin.Do("CLIENT", "LIST")
		line := strings.SplitN(list[strings.Index(list, "\r\n")+2:], "\n", 2)[0] // the first client's
		for _, f := range strings.Fields(line) {
			fmt.Sscanf(f, "qbuf=%d", &got)
			fmt.Sscanf(f, "qbuf-free=%d", &free)
		}
		return got == qbuf
	})
	return got + free
}

// TestConnBuffersABulkAsItsBytesCome: a large bulk string's header alone
// does not size the read buffer; the buffer grows only as the payload
// arrives, to at most twice what has. Before, the 27 bytes of a header
// announcing 256 MiB made the connection allocate 256 MiB, and used_memory
// count it (review hrev).
func TestConnBuffersABulkAsItsBytesCome(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogLevel = "nothing"
	s, err := New(cfg) // proto-max-bulk-len 512 MiB
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	_, rc := pipeConn(t, s)
	_, admin := pipeConn(t, s)
	used := s.eng.UsedMemory()
	head := "*2\r\n$4\r\nECHO\r\n$268435456\r\n"
	if _, err := rc.NetConn().Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	if got := clientBuffer(t, admin, len(head)); got != readBufSize {
		t.Fatalf("read buffer of %d bytes for the header of a 256 MiB bulk string, want %d", got, readBufSize)
	}
	if got := s.eng.UsedMemory(); got > used+1<<20 {
		t.Fatalf("used_memory %d after the header of a 256 MiB bulk string, %d before", got, used)
	}
	part := strings.Repeat("x", 100<<10)
	if _, err := rc.NetConn().Write([]byte(part)); err != nil {
		t.Fatal(err)
	}
	if got, in := clientBuffer(t, admin, len(head)+len(part)), len(head)+len(part); got > 2*in {
		t.Fatalf("read buffer of %d bytes for %d bytes of a request: want at most twice", got, in)
	}
}

// TestConnBuffersARefusedKeyAsItComes: a key longer than max-key-size is
// refused once read (Dispatch); while it comes, its buffer grows only with
// what has arrived, as any bulk string's does, and the connection goes on.
func TestConnBuffersARefusedKeyAsItComes(t *testing.T) {
	s := newTestServer(t)
	_, rc := pipeConn(t, s)
	_, admin := pipeConn(t, s)
	head := "*5\r\n$11\r\nCL.THROTTLE\r\n$524288\r\n"
	part := strings.Repeat("k", 64<<10)
	if _, err := rc.NetConn().Write([]byte(head + part)); err != nil {
		t.Fatal(err)
	}
	var qbuf, free int
	testkit.WaitFor(t, "the request's bytes in the buffer", func() bool {
		list := admin.Do("CLIENT", "LIST")
		line := strings.SplitN(list[strings.Index(list, "\r\n")+2:], "\n", 2)[0] // the first client's
		for _, f := range strings.Fields(line) {
			fmt.Sscanf(f, "qbuf=%d", &qbuf)
			fmt.Sscanf(f, "qbuf-free=%d", &free)
		}
		return qbuf == len(head)+len(part)
	})
	if got := qbuf + free; got > 4*len(part) {
		t.Fatalf("read buffer of %d bytes for %d bytes of a refused key", got, qbuf)
	}
	go rc.NetConn().Write([]byte(strings.Repeat("k", 512<<10-len(part)) + "\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n"))
	if got, want := rc.Reply(), "-ERR key exceeds maximum allowed size (max-key-size)\r\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	rc.WantDo("+PONG\r\n", "PING")
}

// TestQuick: quick takes plain, complete requests within every client's
// limits, and leaves everything else to the parser.
func TestQuick(t *testing.T) {
	big := strings.Repeat("x", unauthBulk+1)
	lim := bounds{maxBulk: 1 << 20, maxQuery: 1 << 30}
	cases := []struct {
		in   string
		args []string // nil: not taken
		used int
	}{
		{"*3\r\n$3\r\nGET\r\n$1\r\nk\r\n$2\r\n15\r\n", []string{"GET", "k", "15"}, 28},
		{"*2\r\n$11\r\nCL.THROTTLE\r\n$0\r\n\r\n*1\r\n", []string{"CL.THROTTLE", ""}, 28},
		{"*1\r\n$4\r\nPING\r\n", []string{"PING"}, 14},
		{"*8\r\n" + strings.Repeat("$1\r\na\r\n", 8), []string{"a", "a", "a", "a", "a", "a", "a", "a"}, 60},
		{"*1\r\n$5\r\n" + big[:5] + "\r\n", []string{"xxxxx"}, 15},
		{"*1\r\n$16384\r\n" + big[:unauthBulk] + "\r\n", []string{big[:unauthBulk]}, 4 + 8 + unauthBulk + 2},
		{"*2\r\n$3\r\nGET\r\n$1\r\nk\r", nil, 0},              // incomplete
		{"*2\r\n$3\r\nGET\r\n$1\r\n", nil, 0},                 // incomplete
		{"*2\r\n$3\r\nGET\r\n$1", nil, 0},                     // incomplete header
		{"*0\r\n", nil, 0},                                    // no arguments
		{"*9\r\n" + strings.Repeat("$1\r\na\r\n", 9), nil, 0}, // more than quickMaxArgs
		{"*10\r\n", nil, 0},                         // a two-digit count
		{"*01\r\n$1\r\na\r\n", nil, 0},              // a leading zero (a protocol error)
		{"*1\r\n$01\r\na\r\n", nil, 0},              // a leading zero (a protocol error)
		{"*1\r\n$00\r\n\r\n", nil, 0},               // "00" (a protocol error)
		{"*1\r\n$-1\r\n", nil, 0},                   // negative
		{"*1\r\n$\r\n\r\n", nil, 0},                 // no digits
		{"*1\r\n$16385\r\n" + big + "\r\n", nil, 0}, // past the unauthenticated limit
		{"*1\r\n$100000\r\n", nil, 0},               // six digits
		{"*1\r\n$1\r\nab\r\n", nil, 0},              // payload longer than said (a protocol error)
		{"*1\r\n$1\n\na\r\n", nil, 0},               // LF without CR
		{"*2\r\n$3\r\nGET\r\n:1\r\n", nil, 0},       // not a bulk string
		{"GET k\r\n", nil, 0},                       // inline
		{"", nil, 0},
	}
	for _, c := range cases {
		var spans [quickMaxArgs]span
		n, used := quick([]byte(c.in), lim, &spans)
		var got []string
		if used > 0 {
			got = []string{}
			for _, sp := range spans[:n] {
				got = append(got, c.in[sp.off:sp.off+sp.n])
			}
		}
		if used != c.used || fmt.Sprint(got) != fmt.Sprint(c.args) || (got == nil) != (c.args == nil) {
			t.Errorf("quick(%.40q) = %.60q, %d; want %.60q, %d", c.in, got, used, c.args, c.used)
		}
	}
	// The limits of the batch: proto-max-bulk-len and the query buffer limit.
	var spans [quickMaxArgs]span
	in := []byte("*1\r\n$5\r\nhello\r\n")
	for _, l := range []bounds{{maxBulk: 4, maxQuery: 1 << 30}, {maxBulk: 1 << 20, maxQuery: 14}} {
		if _, used := quick(in, l, &spans); used != 0 {
			t.Errorf("quick took %q under %+v", in, l)
		}
	}
	if _, used := quick(in, bounds{maxBulk: 5, maxQuery: 15}, &spans); used != 15 {
		t.Errorf("quick did not take %q at its limits", in)
	}
}

// TestLookahead: advance reads a group ahead at a time, locating the key
// of the requests that have one, reads the next group only once the first
// has been taken, and stops for the rest of the batch at a request quick
// does not take; take hands out exactly the requests read ahead.
func TestLookahead(t *testing.T) {
	s := newTestServer(t)
	cl := func(k string) string {
		return fmt.Sprintf("*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n", len(k), k)
	}
	var b []byte
	var starts []int
	add := func(req string) {
		starts = append(starts, len(b))
		b = append(b, req...)
	}
	for i := range groupMax + 3 {
		if i == 1 {
			add("*1\r\n$4\r\nPING\r\n")
			continue
		}
		add(cl(fmt.Sprint("k", i)))
	}
	add("PING\r\n") // inline: reading ahead stops here
	add(cl("last"))
	lim := bounds{maxBulk: 1 << 20, maxQuery: 1 << 30}

	var la lookahead
	la.reset(0)
	la.advance(b, 0, lim, s.table, s.loc)
	if la.next != starts[groupMax] || la.n != groupMax {
		t.Fatalf("first group ends at %d (%d requests), want %d", la.next, la.n, starts[groupMax])
	}
	for i := range groupMax {
		if i == 5 {
			la.advance(b, starts[5], lim, s.table, s.loc) // inside the group: nothing to do
			if la.next != starts[groupMax] || la.k != 5 {
				t.Fatal("advance inside a group read ahead again")
			}
		}
		if la.take(starts[i]+1) != nil {
			t.Fatal("took a request at the wrong offset")
		}
		q := la.take(starts[i])
		if q == nil || q.start != starts[i] || q.used != starts[i+1]-starts[i] {
			t.Fatalf("request %d: %+v", i, q)
		}
		wantName, wantKey := "CL.THROTTLE", fmt.Sprint("k", i)
		if i == 1 {
			wantName, wantKey = "PING", ""
		}
		if string(q.arg(b, 0)) != wantName || q.cmd == nil || !strings.EqualFold(q.cmd.Name, wantName) {
			t.Fatalf("request %d: name %q, command %v", i, q.arg(b, 0), q.cmd)
		}
		if (q.key == ahead.Hint{}) != (wantKey == "") || wantKey != "" && q.key != s.loc.Locate(q.arg(b, 1)) {
			t.Fatalf("request %d: key hint %v", i, q.key)
		}
	}
	la.advance(b, starts[groupMax], lim, s.table, s.loc)
	if la.next != -1 || la.n != 3 {
		t.Fatalf("after the inline request: next %d, %d requests; want -1, 3", la.next, la.n)
	}
	for i := groupMax; i < groupMax+3; i++ {
		if la.take(starts[i]) == nil {
			t.Fatalf("request %d was not read ahead", i)
		}
	}
	la.advance(b, starts[groupMax+3], lim, s.table, s.loc)
	if la.take(starts[groupMax+3]) != nil {
		t.Fatal("read the inline request ahead")
	}
	la.advance(b, starts[len(starts)-1], lim, s.table, s.loc)
	if la.take(starts[len(starts)-1]) != nil {
		t.Fatal("read ahead after stopping for the batch")
	}
	la.reset(starts[len(starts)-1]) // a new batch: a lone request is read too
	la.advance(b, starts[len(starts)-1], lim, s.table, s.loc)
	if q := la.take(starts[len(starts)-1]); q == nil || string(q.arg(b, 1)) != "last" {
		t.Fatalf("lone request: %+v", q)
	}
}
