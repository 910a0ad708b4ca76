package server

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
	scan   int    // where parsing resumes
	spans  []span // the arguments read so far
	args   [][]byte
	inline []byte // unescaped inline arguments
}

type span struct{ off, n int }

// next parses one request from b, which starts where the request starts.
// It returns the arguments (valid until b changes) and the bytes the
// request took; used is 0 when the request is not complete yet. A request
// of no arguments (an empty line, *0) is returned with used > 0 and no
// arguments.
func (p *parser) next(b []byte, maxBulk, maxQuery int64) (args [][]byte, used int, err error) {
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
		if n < 0 || n > maxBulk || int64(end)+n+2 > maxQuery {
			if n >= 0 && n <= maxBulk {
				return nil, 0, protocolError("query buffer limit exceeded")
			}
			return nil, 0, protocolError("invalid bulk length")
		}
		if int64(len(b)-end) < n+2 {
			return nil, 0, nil // the payload is not all here; the header is kept
		}
		if b[end+int(n)] != '\r' || b[end+int(n)+1] != '\n' {
			return nil, 0, protocolError("invalid bulk length")
		}
		p.spans = append(p.spans, span{end, int(n)})
		p.scan = end + int(n) + 2
	}
	args = p.args[:0]
	for _, s := range p.spans {
		args = append(args, b[s.off:s.off+s.n:s.off+s.n])
	}
	used = p.scan
	p.reset(args)
	return args, used, nil
}

// reset readies the parser for the next request, keeping small slices for
// reuse and dropping large ones, and never keeping slices of the buffer.
func (p *parser) reset(args [][]byte) {
	p.want, p.scan = 0, 0
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
}

// release drops the arguments' references to the read buffer, so that a
// buffer replaced after a large request can be collected.
func (p *parser) release() { clear(p.args[:cap(p.args)]) }

// header reads the integer of a header line (*n or $n) starting at b[i]
// and returns it with the offset after the line's "\n"; end is 0 when the
// line is not complete. The number must be an optional '-' then at most 18
// digits, so a header line is never longer than 22 bytes.
func header(b []byte, i int) (n int64, end int, err error) {
	var neg bool
	digits := 0
	for j := i + 1; j < len(b); j++ {
		c := b[j]
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
func (p *parser) nextInline(b []byte) ([][]byte, int, error) {
	end := -1
	for i, c := range b {
		if c == '\n' {
			end = i
			break
		}
		if i >= maxInlineSize {
			return nil, 0, protocolError("too big inline request")
		}
	}
	if end < 0 {
		return nil, 0, nil
	}
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

// splitInline splits a line into arguments, unescaping quoted ones into
// p.inline. It runs in time linear in the line.
func (p *parser) splitInline(line []byte) ([][]byte, bool) {
	if cap(p.inline) < len(line) {
		p.inline = make([]byte, 0, max(len(line), 256))
	}
	buf := p.inline[:0] // never grows past len(line): slices into it stay valid
	args := p.args[:0]
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
		switch line[i] {
		case '"':
			i++
			for {
				if i == len(line) {
					return nil, false
				}
				c := line[i]
				if c == '"' {
					i++
					break
				}
				if c == '\\' && i+1 < len(line) {
					i++
					switch e := line[i]; e {
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
					case 'x':
						if i+2 < len(line) && isHex(line[i+1]) && isHex(line[i+2]) {
							c = unhex(line[i+1])<<4 | unhex(line[i+2])
							i += 2
						} else {
							c = e
						}
					default:
						c = e
					}
				}
				buf = append(buf, c)
				i++
			}
		case '\'':
			i++
			for {
				if i == len(line) {
					return nil, false
				}
				c := line[i]
				if c == '\'' {
					i++
					break
				}
				if c == '\\' && i+1 < len(line) && line[i+1] == '\'' {
					i++
					c = '\''
				}
				buf = append(buf, c)
				i++
			}
		default:
			for i < len(line) && !isSpace(line[i]) {
				buf = append(buf, line[i])
				i++
			}
			args = append(args, buf[start:len(buf):len(buf)])
			continue
		}
		if i < len(line) && !isSpace(line[i]) {
			return nil, false // a closing quote must be followed by a space
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
