package server

import (
	"bytes"
	"errors"
)

// The request parser. It reads RESP multibulk requests and inline (telnet)
// lines as Redis does, and is built for a server that must not be brought
// down by what it reads:
//
//   - incremental: a request that arrives in pieces is parsed once, the
//     parser keeping its place between reads, so a client dripping bytes
//     costs time linear in what it sends;
//   - bounded: every count and length is checked against the limits as
//     soon as its header line is complete, before the payload is waited for;
//   - allocation-free for RESP: arguments are slices of the read buffer.
//
// Redis's replies to broken input are kept: "Protocol error: invalid
// multibulk length", "expected '$', got 'x'", "invalid bulk length",
// "unbalanced quotes in request", "too big inline request".

// parser holds the state of the request being read. Offsets are relative to
// the start of that request, which the connection keeps at the front of
// its unparsed input.
type parser struct {
	want   int    // arguments the request announced; 0: no header read yet
	scan   int    // where parsing resumes (in an inline line: where to look for its end)
	spans  []span // the arguments read so far
	args   [][]byte
	inline []byte // unescaped inline arguments
	// need, while a large bulk string's payload is awaited, is the
	// bytes from the request's start to the end of that payload; 0
	// otherwise. The connection's buffer grows no further than that
	// (conn.grow, bigBulk).
	need int
}

// bigBulk is the length from which the read buffer, doubling as a bulk
// string's bytes arrive, stops at the end of its request rather than
// doubling past it (conn.grow), so that a large argument ends in a buffer
// about its size; Redis reads arguments of 32 KiB or more
// (PROTO_MBULK_BIG_ARG) apart too. The buffer is not sized by the header
// alone: a header costs a few bytes to send and would make the server
// hold, and maxmemory count, as much as proto-max-bulk-len for as long as
// the client stays connected.
const bigBulk = 32 << 10

// bounds are the limits a request is read under.
type bounds struct {
	maxBulk  int64 // proto-max-bulk-len
	maxQuery int64 // client-query-buffer-limit
	authed   bool  // false: Redis's limits for a client that has not authenticated
}

// Redis's limits before AUTH, when a password is required.
const (
	unauthMultibulk = 10
	unauthBulk      = 16384
)

type span struct{ off, n int }

// next parses one request from b, which starts where the request starts.
// It returns the arguments (valid until b changes) and the bytes the
// request took; used is 0 when the request is not complete yet. A request
// of no arguments (an empty line, *0) is returned with used > 0 and no
// arguments.
func (p *parser) next(b []byte, lim bounds) (args [][]byte, used int, err error) {
	args, used, err = p.parse(b, lim)
	if err != nil {
		p.reset(nil)
	}
	return args, used, err
}

func (p *parser) parse(b []byte, lim bounds) (args [][]byte, used int, err error) {
	maxBulk, maxQuery := lim.maxBulk, lim.maxQuery
	if p.want == 0 {
		if b[0] != '*' {
			return p.nextInline(b)
		}
		n, end, err := header(b, 0)
		if err != nil || end == 0 {
			return nil, 0, err
		}
		switch {
		case n > maxMultibulk:
			return nil, 0, protocolError("invalid multibulk length")
		case !lim.authed && n > unauthMultibulk:
			return nil, 0, protocolError("unauthenticated multibulk length")
		case n <= 0:
			return nil, end, nil // *0 and *-1 are ignored, as in Redis
		}
		p.want, p.scan = int(n), end
	}
	for len(p.spans) < p.want {
		i := p.scan
		if i >= len(b) {
			return nil, 0, nil
		}
		if b[i] != '$' {
			return nil, 0, protocolError("expected '$', got '" + printable(b[i]) + "'")
		}
		n, end, err := header(b, i)
		if err != nil || end == 0 {
			return nil, 0, err
		}
		if !lim.authed && n > unauthBulk {
			return nil, 0, protocolError("unauthenticated bulk length")
		}
		if n < 0 || n > maxBulk || int64(end)+n+2 > maxQuery {
			if n >= 0 && n <= maxBulk {
				return nil, 0, protocolError("query buffer limit exceeded")
			}
			return nil, 0, protocolError("invalid bulk length")
		}
		if int64(len(b)-end) < n+2 {
			if n >= bigBulk {
				p.need = end + int(n) + 2
			}
			return nil, 0, nil // the payload is not all here; the header is kept
		}
		if b[end+int(n)] != '\r' || b[end+int(n)+1] != '\n' {
			return nil, 0, protocolError("invalid bulk length")
		}
		p.spans = append(p.spans, span{end, int(n)})
		p.scan = end + int(n) + 2
	}
	used = p.scan
	return p.fromSpans(b, p.spans), used, nil
}

// reset readies the parser for the next request, keeping small slices for
// reuse and dropping large ones, and never keeping slices of the buffer.
func (p *parser) reset(args [][]byte) {
	p.want, p.scan, p.need = 0, 0, 0
	if cap(p.spans) > 1024 {
		p.spans = nil
	} else {
		p.spans = p.spans[:0]
	}
	if cap(args) > 1024 {
		p.args = nil
	} else {
		p.args = args[:0]
	}
	if cap(p.inline) > 4096 {
		p.inline = nil // a long inline line's buffer is not kept
	}
}

// release drops the arguments' references to the read buffer, so that a
// buffer replaced after a large request can be collected.
func (p *parser) release() { clear(p.args[:cap(p.args)]) }

// header reads the integer of a header line (*n or $n) starting at b[i]
// and returns it with the offset after the line's "\n"; end is 0 when the
// line is not complete. The number is written as Redis's string2ll wants
// it: an optional '-', then at most 18 digits with no leading zero (so "0",
// but not "00", "01" or "-0"); a header line is never longer than 22 bytes.
func header(b []byte, i int) (n int64, end int, err error) {
	var neg bool
	digits := 0
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		if digits == 1 && n == 0 && c != '\r' || neg && digits == 1 && n == 0 {
			return 0, 0, protocolError(headerError(b[i])) // a leading zero, or -0
		}
		switch {
		case c == '\r':
			if j+1 == len(b) {
				return 0, 0, nil
			}
			if b[j+1] != '\n' || digits == 0 {
				return 0, 0, protocolError(headerError(b[i]))
			}
			if neg {
				n = -n
			}
			return n, j + 2, nil
		case c == '-' && j == i+1:
			neg = true
		case c >= '0' && c <= '9' && digits < 18:
			n = n*10 + int64(c-'0')
			digits++
		default:
			return 0, 0, protocolError(headerError(b[i]))
		}
	}
	return 0, 0, nil
}

func headerError(kind byte) string {
	if kind == '*' {
		return "invalid multibulk length"
	}
	return "invalid bulk length"
}

func printable(c byte) string {
	if c < ' ' || c > '~' {
		return "?"
	}
	return string(rune(c))
}

// nextInline parses an inline command: one line, split at spaces, with
// Redis's quoting ("…" with \n \r \t \b \a \\ \" \xHH escapes, '…' with \').
// A line that arrives in pieces is searched for its end once: p.scan keeps
// how far the search went.
func (p *parser) nextInline(b []byte) ([][]byte, int, error) {
	end := bytes.IndexByte(b[p.scan:min(len(b), maxInlineSize+1)], '\n')
	if end < 0 {
		if len(b) > maxInlineSize {
			return nil, 0, protocolError("too big inline request")
		}
		p.scan = len(b)
		return nil, 0, nil
	}
	end += p.scan
	p.scan = 0
	line := b[:end]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	args, ok := p.splitInline(line)
	if !ok {
		return nil, 0, protocolError("unbalanced quotes in request")
	}
	return args, end + 1, nil
}

// ErrUnbalancedQuotes is redis-server's text for a config line whose
// quotes do not close, or close with something other than a blank after.
var ErrUnbalancedQuotes = errors.New("Unbalanced quotes in configuration line") //lint:ignore ST1005 redis-server's own text

// SplitConfigLine splits one config file line into words as redis.conf's
// reader does: by the rules of an inline request (splitInline), which
// are redis-server's sdssplitargs for both. Words are separated by blanks;
// a word in "double quotes" may hold blanks and the escapes \n \r \t \b
// \a \\ \" and \xHH; one in 'single quotes' may hold blanks and \'. A
// closing quote must be followed by a blank or the end of the line; ""
// is an empty word. CONFIG REWRITE writes what it reads (quoteConfig).
func SplitConfigLine(line string) ([]string, error) {
	var p parser
	args, ok := p.splitInline([]byte(line))
	if !ok {
		return nil, ErrUnbalancedQuotes
	}
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = string(a)
	}
	return words, nil
}

// splitInline splits a line into arguments as Redis's sdssplitargs does,
// unescaping quoted parts into p.inline. A quote may open inside a word
// (a"b c" is one argument, ab c); a closing quote must be followed by a
// space or the end of the line; a NUL byte ends the line, since Redis reads
// it as a C string. It runs in time linear in the line.
func (p *parser) splitInline(line []byte) ([][]byte, bool) {
	if k := bytes.IndexByte(line, 0); k >= 0 {
		line = line[:k]
	}
	if cap(p.inline) < len(line) {
		p.inline = make([]byte, 0, max(len(line), 256))
	}
	buf := p.inline[:0] // never grows past len(line): slices into it stay valid
	args := p.args[:0]
	closes := func(i int) bool { return i+1 == len(line) || isSpace(line[i+1]) }
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			if cap(args) <= 1024 {
				p.args = args[:0]
			}
			return args, true
		}
		start := len(buf)
		inq, insq := false, false
	word:
		for ; ; i++ {
			switch {
			case inq:
				if i == len(line) {
					return nil, false // unterminated quotes
				}
				c := line[i]
				switch {
				case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					c = unhex(line[i+2])<<4 | unhex(line[i+3])
					i += 3
				case c == '\\' && i+1 < len(line):
					i++
					switch line[i] {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					default:
						c = line[i]
					}
				case c == '"':
					if !closes(i) {
						return nil, false
					}
					i++
					break word
				}
				buf = append(buf, c)
			case insq:
				if i == len(line) {
					return nil, false
				}
				c := line[i]
				switch {
				case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
					i++
					c = '\''
				case c == '\'':
					if !closes(i) {
						return nil, false
					}
					i++
					break word
				}
				buf = append(buf, c)
			default:
				if i == len(line) {
					break word
				}
				switch c := line[i]; c {
				case ' ', '\n', '\r', '\t':
					i++
					break word
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					buf = append(buf, c)
				}
			}
		}
		args = append(args, buf[start:len(buf):len(buf)])
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// quickMaxArgs is the most arguments quick reads: limiter commands take at
// most seven.
const quickMaxArgs = 8

// quick reads the request at the start of b the quick way, for the
// lookahead (prefetch.go): it takes only a complete RESP request of 1 to
// quickMaxArgs arguments whose headers are all short and plain ("*n",
// "$len" of at most five digits) and whose arguments are within the limits
// of every client, unauthenticated ones included (lim's and Redis's
// unauthenticated bulk limit both). It returns how many arguments it
// found (their offsets in b in spans) and the request's length, or 0, 0
// for anything else: the parser reads that. What quick takes, the parser
// takes too, with the same arguments and length (FuzzParser checks it);
// so a request either can read may be run from quick's reading.
func quick(b []byte, lim bounds, spans *[quickMaxArgs]span) (nargs, used int) {
	if len(b) < 4 || b[0] != '*' || b[1] < '1' || b[1] > '0'+quickMaxArgs || b[2] != '\r' || b[3] != '\n' {
		return 0, 0
	}
	nargs = int(b[1] - '0')
	i := 4
	for k := range nargs {
		if i+3 >= len(b) || b[i] != '$' {
			return 0, 0
		}
		l, j := 0, i+1
		for ; j < len(b) && j <= i+5 && '0' <= b[j] && b[j] <= '9'; j++ {
			l = 10*l + int(b[j]-'0')
		}
		if j == i+1 || b[i+1] == '0' && j > i+2 { // no digits, or a leading zero
			return 0, 0
		}
		end := j + 2 // the payload's start
		if end+l+2 > len(b) || b[j] != '\r' || b[j+1] != '\n' ||
			l > unauthBulk || int64(l) > lim.maxBulk || int64(end+l+2) > lim.maxQuery ||
			b[end+l] != '\r' || b[end+l+1] != '\n' {
			return 0, 0
		}
		spans[k] = span{end, l}
		i = end + l + 2
	}
	return nargs, i
}

// fromSpans returns the arguments spans locate in b and readies the parser
// for the next request. It ends next's reading of a request, and serves
// one that quick read instead, which the parser may have been part way
// through from an earlier read.
func (p *parser) fromSpans(b []byte, spans []span) [][]byte {
	args := p.args[:0]
	for _, s := range spans {
		args = append(args, s.of(b))
	}
	p.reset(args)
	return args
}

// of returns the bytes of b that s spans, capped so that appending to
// them cannot write over what follows.
func (s span) of(b []byte) []byte { return b[s.off : s.off+s.n : s.off+s.n] }
