package engine

import (
	"encoding/binary"
	"slices"

	"github.com/cellserver/cellserver/limiter"
)

// This file is the sliding log's part of the table. A log's hits live in
// its record, after the expiry, so that a request costs one cache miss
// (the record, which the server prefetches), allocates nothing, and leaves
// no pointer for the garbage collector:
//
//	room (uvarint, w bytes) | n (w bytes, little-endian) | room × (At (8) | N (8))
//
// The first n hits are the log, sorted by At; the rest is room to grow.
// room is fixed when the record is written, and n ≤ room < 2^(7w), so n
// fits in w bytes and is rewritten in place: a new 17-byte key, with room
// for two hits, takes 1+1+17+8+1+1+32 = 61 bytes. A log that outgrows its
// room, or shrinks far below it, moves to a new record (table.put).
//
// SlidingLog works on a []Hit: logAt decodes the hits into the table's
// scratch, reused from request to request, and put encodes the result
// back. The scratch is on the Go heap, apart from the arena: a change to
// the table never invalidates it; the next logAt overwrites it.

// scratchKeep is the largest scratch, in hits, that the sweep leaves in
// place: 4 KiB.
const scratchKeep = 256

// logLen returns the bytes of a log's fields for room hits.
func logLen(room int) int { return 2*uvarintLen(uint64(room)) + 16*room }

// putLog writes a log's fields at the start of b: room for room hits, and
// hits, of which there are at most room.
func putLog(b []byte, room int, hits []limiter.Hit) {
	w := binary.PutUvarint(b, uint64(room))
	putCount(b[w:2*w], len(hits))
	putHits(b[2*w:], hits)
}

// putCount writes n little-endian in all of b.
func putCount(b []byte, n int) {
	for k := range b {
		b[k] = byte(n >> (8 * k))
	}
}

func putHits(b []byte, hits []limiter.Hit) {
	b = b[:16*len(hits)]
	for _, h := range hits {
		binary.LittleEndian.PutUint64(b, uint64(h.At))
		binary.LittleEndian.PutUint64(b[8:], uint64(h.N))
		b = b[16:]
	}
}

// logFields reads the fields of the log at p (its room field): its room,
// its number of hits, and the offset of its first hit.
func (t *table) logFields(p int) (room, n, at int) {
	r, w := binary.Uvarint(t.arena[p:])
	for k := w - 1; k >= 0; k-- {
		n = n<<8 | int(t.arena[p+w+k])
	}
	return int(r), n, p + 2*w
}

// updateLog rewrites the hits of the log at p (its room field) and reports
// whether it could: whether hits fit in the log's room.
func (t *table) updateLog(p int, hits []limiter.Hit) bool {
	room, _, at := t.logFields(p)
	if len(hits) > room {
		return false
	}
	w := (at - p) / 2
	putCount(t.arena[p+w:at], len(hits))
	putHits(t.arena[at:], hits)
	return true
}

// logAt decodes the hits of the sliding log in slot i (none for i < 0: no
// key) into the table's scratch and returns them, with capacity for one
// more hit, the most SlidingLog adds: so that it never allocates. They are
// valid until the next logAt, which reuses the same memory.
func (t *table) logAt(i int) []limiter.Hit {
	n, at := 0, 0
	if i >= 0 {
		_, n, at = t.logFields(t.stateAt(uint32(t.slots[i])) + 8)
	}
	t.scratch = slices.Grow(t.scratch[:0], n+1)[:n]
	b := t.arena[at : at+16*n]
	for k := range t.scratch {
		t.scratch[k] = limiter.Hit{At: int64(binary.LittleEndian.Uint64(b)), N: int64(binary.LittleEndian.Uint64(b[8:]))}
		b = b[16:]
	}
	return t.scratch
}

// shrunk reports whether the sliding log in slot i, once it holds n hits,
// has so much more room than it needs (twice, and 16 hits over) that it
// should move to a smaller record.
func (t *table) shrunk(i, n int) bool {
	room, _, _ := t.logFields(t.stateAt(uint32(t.slots[i])) + 8)
	return room > 2*n+16
}

// releaseScratch drops a scratch larger than scratchKeep. The sweep calls
// it, so that a long log decoded request after request reuses its scratch
// in between, yet the memory goes back at the next sweep.
func (t *table) releaseScratch() {
	if cap(t.scratch) > scratchKeep {
		t.scratch = nil
	}
}
