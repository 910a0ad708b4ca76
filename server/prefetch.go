package server

import (
	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
)

// Lookahead over a pipeline. When one read brings several requests, the
// connection peeks at them in groups before running them: for each request
// of a group the engine starts loading its key's index slot, then, in a
// second pass once those lines are on their way, its record
// (engine.Prefetch). With a million keys each request would otherwise wait
// for two cache misses in turn; this way the misses of a whole group
// overlap, and the group's first requests are served from lines that
// arrived while the rest were being asked for. Peeking is only a hint: it
// reads RESP loosely, stops at anything unusual (an inline command, an
// incomplete request, more than peekMaxArgs arguments), and the parser
// still reads every request itself.

const (
	peekMaxArgs = 8  // longer requests are not limiter commands; never peeked
	groupMax    = 16 // requests prefetched together
)

type lookahead struct {
	next  int // where the first request not yet peeked at starts; -1: stop peeking in this batch
	hints [groupMax]engine.Hint
}

// reset starts a new batch at offset r of the read buffer.
func (la *lookahead) reset(r int) { la.next = r }

// advance is called before the request starting at r runs (b holds the
// batch). Once the requests peeked so far have all been reached, it peeks
// at the next group from r on and prefetches for it. A lone request is
// left alone: its misses would be waited for at once anyway.
func (la *lookahead) advance(b []byte, r int, t *commands.Table, e *engine.Engine) {
	if la.next < 0 || r < la.next {
		return
	}
	la.next = r
	// Local, not in la: slices of the read buffer kept past the batch would
	// keep a buffer the connection has replaced (after a large request).
	var names, keys [groupMax][]byte
	n := 0
	for n < groupMax && la.next < len(b) {
		name, key, used := peek(b[la.next:])
		if used == 0 {
			la.next = -1 // something peek cannot read: the rest of the batch goes without
			break
		}
		names[n], keys[n] = name, key
		n++
		la.next += used
	}
	if n < 2 {
		return
	}
	for i := range n {
		la.hints[i] = engine.Hint{}
		if cmd := t.Lookup(names[i]); cmd != nil && cmd.FirstKey == 1 && keys[i] != nil {
			la.hints[i] = e.Prefetch(keys[i])
		}
	}
	for _, h := range la.hints[:n] {
		e.PrefetchRecord(h)
	}
}

// peek returns the name and first argument (nil when there is none) of the
// complete RESP request at the start of b and its length, or used 0 when b
// does not start with one of 1 to peekMaxArgs arguments that it can read at
// a glance.
func peek(b []byte) (name, key []byte, used int) {
	if len(b) == 0 || b[0] != '*' {
		return nil, nil, 0
	}
	n, i := peekNum(b, 1)
	if n < 1 || n > peekMaxArgs {
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
