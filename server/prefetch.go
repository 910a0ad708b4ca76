package server

import (
	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
)

// Lookahead over a pipeline. When one read brings several requests, the
// connection peeks at the next two while it runs the current one: the
// request two ahead has its key's index slot prefetched, the one ahead its
// record (engine.Prefetch). With a million keys each request would
// otherwise wait for two cache misses in turn; this way they overlap with
// the work in between. Peeking is only a hint: it reads RESP loosely, stops
// at anything unusual (an inline command, an incomplete request, more than
// peekMaxArgs arguments), and the parser still reads every request itself.

const peekMaxArgs = 8 // longer requests are not limiter commands; never peeked

type lookahead struct {
	pk    int // where the next request to peek at starts; -1: stop peeking in this batch
	queue [2]peeked
	n     int // requests in queue
}

type peeked struct {
	off    int // where the request starts in the read buffer
	hint   engine.Hint
	staged bool // its record has been prefetched
}

// reset starts a new batch at offset r of the read buffer.
func (la *lookahead) reset(r int) { *la = lookahead{pk: r} }

// advance is called when the request starting at r is the next to run
// (b holds the batch): it drops what has run, peeks up to two requests
// ahead of r and prefetches for them.
func (la *lookahead) advance(b []byte, r int, t *commands.Table, e *engine.Engine) {
	for la.n > 0 && la.queue[0].off < r {
		la.queue[0] = la.queue[1]
		la.n--
	}
	if la.pk >= 0 && la.pk < r {
		la.pk = r
	}
	for la.n < len(la.queue) && la.pk >= 0 && la.pk < len(b) {
		name, key, used := peek(b[la.pk:])
		if used == 0 {
			la.pk = -1
			break
		}
		p := peeked{off: la.pk}
		if cmd := t.Lookup(name); cmd != nil && cmd.FirstKey == 1 {
			p.hint = e.Prefetch(key)
		}
		la.queue[la.n] = p
		la.n++
		la.pk += used
	}
	// The request after r had its slot requested a request ago: now its record.
	if la.n > 0 && la.queue[0].off == r && !la.queue[0].staged {
		e.PrefetchRecord(la.queue[0].hint)
		la.queue[0].staged = true
	}
}

// peek returns the name and first argument of the complete RESP request at
// the start of b and its length, or used 0 when b does not start with one
// of 2 to peekMaxArgs arguments that it can read at a glance.
func peek(b []byte) (name, key []byte, used int) {
	if len(b) == 0 || b[0] != '*' {
		return nil, nil, 0
	}
	n, i := peekNum(b, 1)
	if n < 2 || n > peekMaxArgs {
		return nil, nil, 0
	}
	for k := range n {
		if i >= len(b) || b[i] != '$' {
			return nil, nil, 0
		}
		l, j := peekNum(b, i+1)
		if l < 0 || j+l+2 > len(b) {
			return nil, nil, 0
		}
		switch k {
		case 0:
			name = b[j : j+l]
		case 1:
			key = b[j : j+l]
		}
		i = j + l + 2
	}
	return name, key, i
}

// peekNum reads the decimal number at b[i:] up to its CRLF and returns it
// and where the line after it starts; -1 when b holds no such line (or the
// number has more than 9 digits).
func peekNum(b []byte, i int) (n, next int) {
	for k := i; k < len(b) && k-i <= 9; k++ {
		c := b[k]
		switch {
		case '0' <= c && c <= '9':
			n = 10*n + int(c-'0')
		case c == '\r' && k > i && k+1 < len(b) && b[k+1] == '\n':
			return n, k + 2
		default:
			return -1, 0
		}
	}
	return -1, 0
}
