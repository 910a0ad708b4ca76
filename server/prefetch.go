package server

import (
	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/internal/ahead"
)

// Reading ahead over a pipeline. Before running the request at the front
// of the batch, the connection reads ahead a group of up to groupMax
// requests: it finds each one's arguments (quick, in parse.go), looks its
// command up and locates its key in the engine (see internal/ahead). When the
// group has more than one request, it then starts loading every key's
// index slot, and once those lines are on their way, every record
// (the locator's Prefetch, PrefetchRecords). With a million keys each request would
// otherwise wait for two cache misses in turn; this way the misses of a
// whole group overlap, and the group's first requests are served from
// lines that arrived while the rest were being asked for.
//
// The requests are then run from what was read ahead: their arguments are
// not parsed again, their command not looked up again, and their key not
// hashed again (commands.Table.DispatchFound, engine.At's Hint). A group
// of one (every request, without pipelining) is read this way too, just
// not prefetched for. Reading ahead stops, for the rest of the batch, at
// the first request quick does not take (an inline command, an incomplete
// request, anything unusual); the parser reads that one and every one
// after it. Nothing read ahead keeps a reference to the read buffer.

const groupMax = 16 // requests read ahead together

// aheadReq is one request read ahead.
type aheadReq struct {
	start, used int                // its offset in the batch and its length
	nargs       int                // how many arguments it has
	spans       [quickMaxArgs]span // where they are: spans[:nargs], offsets in the batch
	cmd         *commands.Command  // Lookup of its name; nil: unknown
	key         ahead.Hint         // its first key's, for a command that has one
}

type lookahead struct {
	next int // where the first request not yet read ahead starts; -1: stop reading ahead in this batch
	reqs [groupMax]aheadReq
	keys [groupMax]ahead.Hint // reqs[i].key, side by side for the prefetches
	n, k int                  // reqs[k:n] have been read ahead and not yet run
}

// reset starts a new batch at offset r of the read buffer.
func (la *lookahead) reset(r int) { la.next, la.n, la.k = r, 0, 0 }

// advance is called before the request starting at r runs (b holds the
// batch, read under lim). Once every request read ahead has been taken, it
// reads the next group from r on.
func (la *lookahead) advance(b []byte, r int, lim bounds, t *commands.Table, e ahead.Locator) {
	if la.k < la.n || la.next < 0 || r < la.next {
		return
	}
	la.next = r
	n := 0
	for n < groupMax && la.next < len(b) {
		q := &la.reqs[n]
		nargs, used := quick(b[la.next:], lim, &q.spans)
		if used == 0 {
			la.next = -1 // the parser reads the rest of the batch
			break
		}
		q.start, q.used, q.nargs = la.next, used, nargs
		for i := range q.spans[:nargs] {
			q.spans[i].off += la.next
		}
		if name := q.arg(b, 0); n > 0 && string(name) == string(la.reqs[n-1].arg(b, 0)) {
			q.cmd = la.reqs[n-1].cmd // a pipeline mostly repeats one command
		} else {
			q.cmd = t.Lookup(name)
		}
		q.key = ahead.Hint{}
		if q.cmd != nil && q.cmd.FirstKey == 1 && nargs > 1 {
			q.key = e.Locate(q.arg(b, 1))
		}
		n++
		la.next += used
	}
	la.n, la.k = n, 0
	if n < 2 {
		return // a lone request's misses would be waited for at once anyway
	}
	for i := range n {
		la.keys[i] = la.reqs[i].key
	}
	e.Prefetch(la.keys[:n])
	e.PrefetchRecords(la.keys[:n])
}

// take returns the request read ahead that starts at r, or nil when none
// does (the parser reads it).
func (la *lookahead) take(r int) *aheadReq {
	if la.k < la.n && la.reqs[la.k].start == r {
		la.k++
		return &la.reqs[la.k-1]
	}
	return nil
}

// arg returns argument i of q, a slice of the batch b.
func (q *aheadReq) arg(b []byte, i int) []byte { return q.spans[i].of(b) }
