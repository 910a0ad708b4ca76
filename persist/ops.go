package persist

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cellserver/cellserver/engine"
)

// The kinds of op a snapshot writes.
const (
	opPut    = 1 // set key to value (a record)
	opDelete = 2 // delete key
)

// ops is the list of changes a snapshot writes: the puts and deletes each
// take of a shard (Engine.TakeDirty) brought, and the shards emptied
// whole (FLUSHALL) before them. A part holds one take of one shard, its
// ops sorted by key with one op per key; part is where a take builds it.
// A failed snapshot leaves its parts here and the next one adds its own
// after them, so a shard may have several parts, and a key an op in each:
// the last wins, and a flush voids the parts of its shard before it.
type ops struct {
	parts []part
	n     int   // ops in parts
	mem   arena // the parts' buffers

	byShard [][]int // each's scratch: the parts of each shard, in order
	runs    []run   // each's scratch: the runs of one slot
	refs    []opRef // addPart's scratch
	sorted  []opRef
}

// part is one take of one shard: its ops in one byte buffer (per op its
// kind, then its key and value, each a uvarint length then bytes), sorted
// by key, one per key.
type part struct {
	shard   int
	flushed bool // the shard was emptied whole before these ops
	buf     []byte
	n       int
}

// run is the ops of one slot in one part: buf[at:end].
type run struct {
	buf     []byte
	at, end int
}

// opRef locates one op in a buffer: the offsets of its key and value,
// their lengths, its kind, and the slot of its key.
type opRef struct {
	w1, w2     uint64 // addPart's: the key's bytes after its slot, 8 and 8, big-endian, zero-padded
	key, val   uint32
	klen, vlen uint32
	slot       uint16
	op         byte
}

// add adds an op to the part being built.
func (p *part) add(op byte, k, v []byte) {
	p.buf = append(p.buf, op)
	p.buf = binary.AppendUvarint(p.buf, uint64(len(k)))
	p.buf = append(p.buf, k...)
	p.buf = binary.AppendUvarint(p.buf, uint64(len(v)))
	p.buf = append(p.buf, v...)
	p.n++
}

// addRecord adds a put of r's encoding under k to the part being built,
// encoding it in place.
func (p *part) addRecord(k []byte, r engine.Record) {
	p.buf = append(p.buf, opPut)
	p.buf = binary.AppendUvarint(p.buf, uint64(len(k)))
	p.buf = append(p.buf, k...)
	// The value's length comes before it: encode after a one-byte guess,
	// and move the value when the length takes more.
	at := len(p.buf)
	p.buf = append(p.buf, 0)
	p.buf = r.AppendBinary(p.buf)
	vlen := len(p.buf) - at - 1
	var lenBuf [binary.MaxVarintLen64]byte
	if w := binary.PutUvarint(lenBuf[:], uint64(vlen)); w > 1 {
		p.buf = append(p.buf, make([]byte, w-1)...)
		copy(p.buf[at+w:], p.buf[at+1:at+1+vlen])
	}
	binary.PutUvarint(p.buf[at:], uint64(vlen))
	p.n++
}

// reset empties the part being built, keeping its buffer.
func (p *part) reset(shard int) {
	p.shard, p.flushed, p.buf, p.n = shard, false, p.buf[:0], 0
}

// addPart adds p, the take of one shard, to o: its ops sorted by key, the
// last of each key only, in a buffer of their own. p is left as it was.
// The sort runs on the take's few thousand ops at most, while they are in
// the processor's cache; each then only merges sorted parts.
func (o *ops) addPart(p *part) {
	if p.n == 0 && !p.flushed {
		return
	}
	// A counting sort on the slot's high bits (a shard's slots spread
	// over all of them), then a sort of each bucket by slot, key, then
	// order of addition (key is the op's offset): stable, which Go's own
	// stable sort (an in-place merge) makes several times dearer. Keys
	// are compared by their first 16 bytes after the slot as two integers
	// (keyWords), whole only when those are equal.
	const buckets = 64
	var counts [buckets + 1]int
	refs := o.refs[:0]
	for at := 0; at < len(p.buf); {
		r, next := opAt(p.buf, at)
		r.w1, r.w2 = keyWords(p.buf[r.key : r.key+r.klen])
		refs = append(refs, r)
		counts[int(r.slot)*buckets/engine.SlotCount+1]++
		at = next
	}
	for i := 1; i <= buckets; i++ {
		counts[i] += counts[i-1]
	}
	sorted := slices.Grow(o.sorted[:0], len(refs))[:len(refs)]
	for _, r := range refs {
		b := int(r.slot) * buckets / engine.SlotCount
		sorted[counts[b]] = r
		counts[b]++
	}
	key := func(r opRef) []byte { return p.buf[r.key : r.key+r.klen] }
	for lo := 0; lo < len(sorted); {
		b := int(sorted[lo].slot) * buckets / engine.SlotCount
		hi := counts[b] // the bucket's end, after the counting pass
		slices.SortFunc(sorted[lo:hi], func(a, b opRef) int {
			switch {
			case a.slot != b.slot:
				return int(a.slot) - int(b.slot)
			case a.w1 != b.w1:
				return cmp.Compare(a.w1, b.w1)
			case a.w2 != b.w2:
				return cmp.Compare(a.w2, b.w2)
			}
			if c := bytes.Compare(key(a), key(b)); c != 0 {
				return c
			}
			return int(a.key) - int(b.key)
		})
		lo = hi
	}
	o.refs, o.sorted = refs[:0], sorted[:0]
	refs = sorted
	q := part{shard: p.shard, flushed: p.flushed, buf: o.mem.alloc(len(p.buf))}
	for i, r := range refs {
		if i+1 < len(refs) && refs[i+1].slot == r.slot && bytes.Equal(key(r), key(refs[i+1])) {
			continue // a later op on the same key wins
		}
		q.add(r.op, key(r), p.buf[r.val:r.val+r.vlen])
	}
	o.parts = append(o.parts, q)
	o.n += q.n
}

// len returns the number of ops and flushes in o.
func (o *ops) len() int {
	n := o.n
	for _, p := range o.parts {
		if p.flushed {
			n++
		}
	}
	return n
}

// size returns the bytes of o's ops.
func (o *ops) size() int {
	n := 0
	for _, p := range o.parts {
		n += len(p.buf)
	}
	return n
}

// reset empties o and gives the parts' buffers back (arena), so that
// memory follows the churn: a large snapshot's buffers do not stay.
func (o *ops) reset() {
	clear(o.parts)
	clear(o.runs[:cap(o.runs)]) // no slice into the arena may outlive it
	o.parts, o.n = o.parts[:0], 0
	o.mem.free()
	if cap(o.refs) > 1<<16 {
		o.refs, o.sorted = nil, nil
	}
}

// each hands o's net effect, in key order: first dropSlots with each run
// of consecutive slots to empty, [lo, hi), in order (the slots of the
// shards flushed, slotsOf), then point with each key that has a put or a
// delete left, once, with the last. k and v alias o's buffers. It stops
// at the first error either returns, and returns it.
//
// Each part is sorted by key, and so by slot; a slot's keys are in the
// parts of its shard (slotsOf), so each walks the slots in order and
// takes each slot's run from each of its shard's parts. Those runs are
// one in the common case (a shard's one take since the last snapshot),
// handed as they are; several are merged.
func (o *ops) each(slotsOf func(shard int) []int, dropSlots func(lo, hi int) error, point func(op byte, k, v []byte) error) error {
	// The parts of each shard still in force: from its last flush on.
	var dropped [engine.SlotCount]bool
	shardOf := make([]int32, engine.SlotCount)
	byShard := o.byShard[:0]
	for i, p := range o.parts {
		for p.shard >= len(byShard) {
			byShard = append(byShard, nil)
		}
		if p.flushed {
			byShard[p.shard] = byShard[p.shard][:0]
			for _, slot := range slotsOf(p.shard) {
				dropped[slot] = true
			}
		}
		byShard[p.shard] = append(byShard[p.shard], i)
	}
	for shard := range byShard {
		for _, slot := range slotsOf(shard) {
			shardOf[slot] = int32(shard)
		}
	}
	defer func() {
		for i := range byShard {
			byShard[i] = byShard[i][:0]
		}
		o.byShard = byShard[:0]
	}()
	for lo := 0; lo < engine.SlotCount; {
		if !dropped[lo] {
			lo++
			continue
		}
		hi := lo + 1
		for hi < engine.SlotCount && dropped[hi] {
			hi++
		}
		if err := dropSlots(lo, hi); err != nil {
			return err
		}
		lo = hi
	}

	cursor := make([]int, len(o.parts)) // where each part's next slot starts
	for slot := range engine.SlotCount {
		shard := int(shardOf[slot])
		if shard >= len(byShard) || len(byShard[shard]) == 0 {
			continue
		}
		if in := byShard[shard]; len(in) == 1 { // the common case: hand the run as it is
			p := &o.parts[in[0]]
			at := cursor[in[0]]
			for at < len(p.buf) {
				r, next := opAt(p.buf, at)
				if int(r.slot) != slot {
					break
				}
				if err := point(r.op, p.buf[r.key:r.key+r.klen], p.buf[r.val:r.val+r.vlen]); err != nil {
					return err
				}
				at = next
			}
			cursor[in[0]] = at
			continue
		}
		runs := o.runs[:0]
		for _, i := range byShard[shard] {
			p := &o.parts[i]
			at := cursor[i]
			end := at
			for end < len(p.buf) {
				r, next := opAt(p.buf, end)
				if int(r.slot) != slot {
					break
				}
				end = next
			}
			if end > at {
				runs = append(runs, run{p.buf, at, end})
				cursor[i] = end
			}
		}
		o.runs = runs[:0]
		if err := o.merge(runs, point); err != nil {
			return err
		}
	}
	for _, in := range byShard {
		for _, i := range in {
			if p := &o.parts[i]; cursor[i] != len(p.buf) {
				return fmt.Errorf("a change of shard %d is outside its slots", p.shard)
			}
		}
	}
	return nil
}

// merge hands point the ops of runs, the runs of one slot in the order of
// their parts, in key order, the last of each key only.
func (o *ops) merge(runs []run, point func(op byte, k, v []byte) error) error {
	type ref struct {
		r   opRef
		buf []byte
	}
	var refs []ref
	for _, rn := range runs {
		for at := rn.at; at < rn.end; {
			r, next := opAt(rn.buf, at)
			refs = append(refs, ref{r, rn.buf})
			at = next
		}
	}
	key := func(x ref) []byte { return x.buf[x.r.key : x.r.key+x.r.klen] }
	slices.SortStableFunc(refs, func(a, b ref) int { return bytes.Compare(key(a), key(b)) })
	for i, x := range refs {
		if i+1 < len(refs) && bytes.Equal(key(x), key(refs[i+1])) {
			continue
		}
		if err := point(x.r.op, key(x), x.buf[x.r.val:x.r.val+x.r.vlen]); err != nil {
			return err
		}
	}
	return nil
}

// keyWords returns the bytes of k after its 2-byte slot, the first 16 as
// two big-endian integers, zero-padded: keys whose words differ compare as
// their words do, and keys whose words are equal must be compared whole.
func keyWords(k []byte) (w1, w2 uint64) {
	var b [16]byte
	if len(k) > 2 {
		copy(b[:], k[2:])
	}
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// opAt decodes the op at offset at of buf, and returns where the next
// starts.
func opAt(buf []byte, at int) (r opRef, next int) {
	r.op = buf[at]
	at++
	kn, w := binary.Uvarint(buf[at:])
	at += w
	r.key, r.klen = uint32(at), uint32(kn)
	if kn >= 2 {
		r.slot = binary.BigEndian.Uint16(buf[at:]) % engine.SlotCount
	}
	at += int(kn)
	vn, w := binary.Uvarint(buf[at:])
	at += w
	r.val, r.vlen = uint32(at), uint32(vn)
	return r, at + int(vn)
}
