package engine

import (
	"encoding/binary"
	"slices"

	"github.com/cellserver/cellserver/limiter"
)

// This file is the sliding log's part of the table. A log's hits live in
// its record, after the expiry, so that a request costs one cache miss
// (the record, which the server prefetches), allocates nothing, and leaves
// no pointer for the garbage collector. A log is kept in one of two
// encodings, told apart by the low bit of its first field:
//
//	compact: room<<1|1 (uvarint, w bytes) | head (w) | n (w) | base (8) | c0 (3) | room × entry (8)
//	wide:    room<<1   (uvarint, w bytes) | n (w) | room × (At (8) | N (8))
//
// room is fixed when the record is written, and n ≤ room < 2^(7w−1), so n
// and head fit in w bytes and are rewritten in place. A log that outgrows
// its room, or shrinks far below it, moves to a new record (table.put).
//
// The compact encoding is a ring of 8 bytes per hit: the n hits are the
// entries head, head+1, … (mod room), oldest first, and each entry is
//
//	(At − base) << 17 | cum
//
// cum being the running total of N up to and including the hit, mod 2^17,
// and c0 the running total before the first hit. Every log whose hits are
// sorted by At, strictly, with N ≥ 1, within 2^47 ns (39 hours) of the
// first one, and that counts under 2^17 hits in all is compact: every log
// of a window up to 39 hours whose clock never went back, since an
// allowed hit leaves at most limit ≤ 100000 hits in the log. Any sum of
// consecutive counts is then below 2^17, so it is the difference of two
// cums mod 2^17: the log is read in place through its prefix sums
// (logView), a hit appends at the tail, the hits that left the window are
// dropped by moving head, a refund lowers the newest cums, all in O(1)
// once limiter.SlidingLogEdit has found where (inPlaceLocked). A log that
// is not compact (a longer window, a clock that went back past 2^17 hits,
// an imported log of any values) is wide: the old 16 bytes per hit, which
// every request decodes whole.
//
// logAt decodes either encoding into the table's scratch, reused from
// request to request, for the requests that move a log, for ApplyAll and
// for export, and put encodes a []Hit back, choosing the encoding. The
// scratch is on the Go heap, apart from the arena: a change to the table
// never invalidates it; the next logAt overwrites it.

// scratchKeep is the largest scratch, in hits, that the sweep leaves in
// place: 4 KiB.
const scratchKeep = 256

const (
	cumBits   = 17
	cumMask   = 1<<cumBits - 1
	spanLimit = uint64(1) << (64 - cumBits) // the most ns between a compact log's base and a hit, exclusive
	headBase  = 8                           // the bytes of base
	headC0    = 3                           // the bytes of c0
)

// compactLog reports whether hits can be kept in the compact encoding.
func compactLog(hits []limiter.Hit) bool {
	var total int64
	for k, h := range hits {
		if h.N < 1 || h.N > cumMask || (k > 0 && h.At <= hits[k-1].At) ||
			uint64(h.At)-uint64(hits[0].At) >= spanLimit {
			return false
		}
		if total += h.N; total > cumMask {
			return false
		}
	}
	return true
}

// logLen returns the bytes of a log's fields for room hits in the compact
// encoding or the wide one.
func logLen(room int, compact bool) int {
	w := uvarintLen(uint64(room) << 1)
	if compact {
		return 3*w + headBase + headC0 + 8*room
	}
	return 2*w + 16*room
}

// putLog writes a log's fields at the start of b: room for room hits, and
// hits, of which there are at most room, in the encoding compactLog
// chooses.
func putLog(b []byte, room int, hits []limiter.Hit, compact bool) {
	v := uint64(room) << 1
	if compact {
		v |= 1
	}
	w := binary.PutUvarint(b, v)
	if !compact {
		putCount(b[w:2*w], len(hits))
		putHits(b[2*w:], hits)
		return
	}
	putCount(b[w:2*w], 0) // head
	putCount(b[2*w:3*w], len(hits))
	var base int64
	if len(hits) > 0 {
		base = hits[0].At
	}
	p := 3 * w
	binary.LittleEndian.PutUint64(b[p:], uint64(base))
	putCount(b[p+headBase:p+headBase+headC0], 0) // c0
	p += headBase + headC0
	var cum uint64
	for _, h := range hits {
		cum += uint64(h.N)
		binary.LittleEndian.PutUint64(b[p:], (uint64(h.At)-uint64(base))<<cumBits|cum&cumMask)
		p += 8
	}
}

// putCount writes n little-endian in all of b.
func putCount(b []byte, n int) {
	for k := range b {
		b[k] = byte(n >> (8 * k))
	}
}

// getCount reads what putCount wrote.
func getCount(b []byte) int {
	n := 0
	for k := len(b) - 1; k >= 0; k-- {
		n = n<<8 | int(b[k])
	}
	return n
}

func putHits(b []byte, hits []limiter.Hit) {
	b = b[:16*len(hits)]
	for _, h := range hits {
		binary.LittleEndian.PutUint64(b, uint64(h.At))
		binary.LittleEndian.PutUint64(b[8:], uint64(h.N))
		b = b[16:]
	}
}

// logHead is the fields of a log, read from the arena.
type logHead struct {
	p       int // the offset of the log's first field
	w       int // the bytes of room, head and n
	compact bool
	room    int
	head, n int    // compact: the first hit's entry; the hits
	base    int64  // compact
	c0      uint64 // compact
	at      int    // the offset of the first entry
}

// logHeadAt reads the fields of the log at p (its first field).
func (t *table) logHeadAt(p int) logHead {
	v, w := binary.Uvarint(t.arena[p:])
	l := logHead{p: p, w: w, compact: v&1 != 0, room: int(v >> 1)}
	if !l.compact {
		l.n = getCount(t.arena[p+w : p+2*w])
		l.at = p + 2*w
		return l
	}
	l.head = getCount(t.arena[p+w : p+2*w])
	l.n = getCount(t.arena[p+2*w : p+3*w])
	q := p + 3*w
	l.base = t.word(q)
	l.c0 = uint64(getCount(t.arena[q+headBase : q+headBase+headC0]))
	l.at = q + headBase + headC0
	return l
}

// logFields reads the room, the number of hits and the offset of the
// first entry of the log at p (its first field).
func (t *table) logFields(p int) (room, n, at int) {
	l := t.logHeadAt(p)
	return l.room, l.n, l.at
}

// updateLog rewrites the hits of the log at p (its first field) and
// reports whether it could: whether hits fit in the log's room, in its
// encoding.
func (t *table) updateLog(p int, hits []limiter.Hit) bool {
	l := t.logHeadAt(p)
	if len(hits) > l.room || compactLog(hits) != l.compact {
		return false
	}
	putLog(t.arena[p:], l.room, hits, l.compact)
	return true
}

// logAt decodes the hits of the sliding log in slot i (none for i < 0: no
// key) into the table's scratch and returns them, with capacity for one
// more hit, the most SlidingLog adds: so that it never allocates. They are
// valid until the next logAt, which reuses the same memory.
func (t *table) logAt(i int) []limiter.Hit {
	if i < 0 {
		t.growScratch(1)
		return t.scratch[:0]
	}
	l := t.logHeadAt(t.stateAt(uint32(t.slots[i])) + 8)
	t.growScratch(l.n + 1)
	t.scratch = t.scratch[:l.n]
	if !l.compact {
		b := t.arena[l.at : l.at+16*l.n]
		for k := range t.scratch {
			t.scratch[k] = limiter.Hit{At: int64(binary.LittleEndian.Uint64(b)), N: int64(binary.LittleEndian.Uint64(b[8:]))}
			b = b[16:]
		}
		return t.scratch
	}
	v := t.logView(l)
	prev := l.c0
	for k := range t.scratch {
		x := v.entry(k)
		t.scratch[k] = limiter.Hit{At: l.base + int64(x>>cumBits), N: int64((x - prev) & cumMask)}
		prev = x
	}
	return t.scratch
}

// shrunk reports whether the sliding log in slot i, once it holds n hits,
// has so much more room than it needs (twice, and 16 hits over) that it
// should move to a smaller record.
func (t *table) shrunk(i, n int) bool {
	room, _, _ := t.logFields(t.stateAt(uint32(t.slots[i])) + 8)
	return shrinks(room, n)
}

// shrinks reports whether a log of n hits in room for room should move.
func shrinks(room, n int) bool { return room > 2*n+16 }

// releaseScratch drops a scratch larger than scratchKeep. The sweep calls
// it, so that a long log decoded request after request reuses its scratch
// in between, yet the memory goes back at the next sweep.
func (t *table) releaseScratch() {
	if cap(t.scratch) > scratchKeep {
		t.mem.Account(-hitBytes * int64(cap(t.scratch)))
		t.scratch = nil
	}
}

// hitBytes is the size of a limiter.Hit in the scratch.
const hitBytes = 16

// growScratch makes the scratch's capacity n hits or more (its length 0),
// counting what it adds in the table's allocator (manual.Allocator.Held),
// for the memory limit.
func (t *table) growScratch(n int) {
	c := cap(t.scratch)
	if c >= n {
		t.scratch = t.scratch[:0]
		return
	}
	t.scratch = slices.Grow(t.scratch[:0], n)
	t.mem.Account(hitBytes * int64(cap(t.scratch)-c))
}

// logView is a compact log read in place: the limiter.SumLog that
// limiter.SlidingLogEdit reads. It aliases the arena: it is valid until
// the next change to the table.
type logView struct {
	b          []byte // the room entries
	room, head int
	n          int
	base       int64
	c0         uint64
}

func (t *table) logView(l logHead) logView {
	return logView{b: t.arena[l.at : l.at+8*l.room], room: l.room, head: l.head, n: l.n, base: l.base, c0: l.c0}
}

// slot returns the ring position of hit k.
func (v logView) slot(k int) int {
	s := v.head + k
	if s >= v.room {
		s -= v.room
	}
	return s
}

// entry returns the entry of hit k, 0 ≤ k < n.
func (v logView) entry(k int) uint64 {
	return binary.LittleEndian.Uint64(v.b[8*v.slot(k):])
}

func (v logView) setEntry(k int, x uint64) {
	binary.LittleEndian.PutUint64(v.b[8*v.slot(k):], x)
}

// Len returns the number of hits.
func (v logView) Len() int { return v.n }

// At returns the instant of hit k.
func (v logView) At(k int) int64 { return v.base + int64(v.entry(k)>>cumBits) }

// Sum returns the N of the hits before hit k: a difference of cums,
// exact since the log counts under 2^17 hits.
func (v logView) Sum(k int) int64 {
	if k == 0 {
		return 0
	}
	return int64((v.entry(k-1) - v.c0) & cumMask)
}

var _ limiter.SumLog = logView{}

// inPlaceLocked applies SW.HIT EXACT r at now to the log in slot i, in
// its record, and reports whether it did: not when the log is wide, nor
// when the write would add a hit past its room, leave it shrunk, or make
// it no longer compact, nor when it holds hits later than now. Then it has
// changed nothing, and the caller takes the general path (decode, run
// limiter.SlidingLog, put), which moves or re-encodes the log. Whatever
// it returns, it is what limiter.SlidingLog would have: the differential
// test holds it to that.
func (s *shard) inPlaceLocked(key []byte, h uint64, i int, now int64, r limiter.SlidingWindowRequest) (limiter.Result, bool, error) {
	t := &s.t
	p := t.stateAt(uint32(t.slots[i])) // the expiry; the log follows
	l := t.logHeadAt(p + 8)
	if !l.compact {
		return limiter.Result{}, false, nil
	}
	v := t.logView(l)
	ed, out, err := limiter.SlidingLogEdit(v, now, r)
	switch {
	case err != nil:
		return limiter.Result{}, true, err
	case out.Write == limiter.WriteDelete:
		s.removeLocked(i)
	case out.Write == limiter.WriteStore:
		if !t.editLogLocked(l, v, ed) {
			return limiter.Result{}, false, nil
		}
		t.putWord(p, out.ExpireMs)
		t.arena[uint32(t.slots[i])] |= t.dirtyBit // changed, for the next snapshot (dirty.go)
		s.changes++
		s.feedLocked(key, uint32(slotTag(h)>>32))
	}
	if out.Result.Limited {
		s.limited[limiter.KindSlidingLog]++
		if s.top == nil {
			s.top = new(topK) // once per shard
		}
		s.top.addLocked(key, h, limiter.KindSlidingLog, now)
	} else {
		s.allowed[limiter.KindSlidingLog]++
	}
	return out.Result, true, nil
}

// editLogLocked makes ed to the compact log l (read as v) in place and
// reports whether it could; if not, it has changed nothing.
func (t *table) editLogLocked(l logHead, v logView, ed limiter.LogEdit) bool {
	n := ed.Keep - ed.Drop
	grown := n
	if ed.Add.N > 0 {
		grown++
	}
	base := v.base
	if n == 0 {
		base = ed.Add.At // an empty log starts again from its next hit
	}
	if ed.End != v.n || grown > l.room || shrinks(l.room, grown) ||
		uint64(ed.Sum)+uint64(ed.Add.N) > cumMask ||
		(ed.Add.N > 0 && uint64(ed.Add.At)-uint64(base) >= spanLimit) {
		return false
	}
	c0 := v.c0
	if ed.Drop > 0 {
		c0 = v.entry(ed.Drop-1) & cumMask
	}
	cum := (c0 + uint64(ed.Sum)) & cumMask
	if n > 0 {
		k := ed.Keep - 1
		v.setEntry(k, v.entry(k)&^cumMask|cum)
	}
	if ed.Add.N > 0 {
		cum = (cum + uint64(ed.Add.N)) & cumMask
		v.setEntry(ed.Keep, (uint64(ed.Add.At)-uint64(base))<<cumBits|cum)
	}
	b := t.arena[l.p:]
	putCount(b[l.w:2*l.w], v.slot(ed.Drop))
	putCount(b[2*l.w:3*l.w], grown)
	q := 3 * l.w
	binary.LittleEndian.PutUint64(b[q:], uint64(base))
	putCount(b[q+headBase:q+headBase+headC0], int(c0))
	return true
}
