package persist

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/cellserver/cellserver/engine"
)

// The kinds of op a snapshot writes.
const (
	opPut    = 1 // set key to value (a record)
	opDelete = 2 // delete key
	opFlush  = 3 // drop every key of a shard's slots
)

// ops is a list of changes to write, in order, in one byte buffer: per op
// its kind, then a shard (uvarint), key and value (each a uvarint length
// then bytes). Order matters: a later op on a key wins, and a flush drops
// the puts before it only.
type ops struct {
	buf []byte
	n   int

	refs []opRef // eachSorted's scratch
	sort []opRef
}

// opRef locates one op in ops.buf: its start, and its key's.
type opRef struct {
	at, key, klen uint32
}

func (o *ops) add(op byte, shard int, k, v []byte) {
	o.buf = append(o.buf, op)
	o.buf = binary.AppendUvarint(o.buf, uint64(shard))
	o.buf = binary.AppendUvarint(o.buf, uint64(len(k)))
	o.buf = append(o.buf, k...)
	o.buf = binary.AppendUvarint(o.buf, uint64(len(v)))
	o.buf = append(o.buf, v...)
	o.n++
}

// addRecord adds a put of r's encoding under k, encoding it in place.
func (o *ops) addRecord(k []byte, r engine.Record) {
	o.buf = append(o.buf, opPut, 0)
	o.buf = binary.AppendUvarint(o.buf, uint64(len(k)))
	o.buf = append(o.buf, k...)
	// The value's length comes before it: encode after a one-byte guess,
	// and move the value when the length takes more.
	at := len(o.buf)
	o.buf = append(o.buf, 0)
	o.buf = r.AppendBinary(o.buf)
	vlen := len(o.buf) - at - 1
	if w := uvarintLen(uint64(vlen)); w > 1 {
		o.buf = append(o.buf, make([]byte, w-1)...)
		copy(o.buf[at+w:], o.buf[at+1:at+1+vlen])
	}
	binary.PutUvarint(o.buf[at:], uint64(vlen))
	o.n++
}

func (o *ops) append(p *ops) {
	o.buf = append(o.buf, p.buf...)
	o.n += p.n
}

// reset empties o. Past 1 MiB its buffers go, so that memory follows the
// churn: a large snapshot's buffers do not stay. (Keeping them for the
// next snapshot spares some garbage under heavy churn, but holds a
// snapshot's worth of changes on the heap between snapshots, tens of MB,
// for a gain no measurement here could separate from the noise.)
func (o *ops) reset() {
	if cap(o.buf) > 1<<20 {
		o.buf, o.refs, o.sort = nil, nil, nil
	}
	o.buf, o.n = o.buf[:0], 0
}

// eachSorted calls fn with every op (k and v alias the buffer): the puts
// and deletes between two flushes in the order of their keys (a later op
// on a key still after an earlier one), each flush where it stands,
// between the ops before and after it. Pebble
// sorts a large batch by key when it commits it (a flushable batch): given
// in order, its sort is a linear pass. Keys start with their 2-byte slot,
// so a counting sort by slot does most of the work; the few keys of one
// slot are then sorted among themselves.
func (o *ops) eachSorted(fn func(op byte, shard int, k, v []byte)) {
	refs := o.refs[:0]
	flushAt := func(at int) {
		o.emitSorted(refs, fn)
		refs = refs[:0]
		if at >= 0 {
			op, shard, k, v, _ := o.at(at)
			fn(op, shard, k, v)
		}
	}
	for at := 0; at < len(o.buf); {
		op, _, k, _, next := o.at(at)
		if op == opFlush {
			flushAt(at)
		} else {
			refs = append(refs, opRef{at: uint32(at), key: o.keyAt(at), klen: uint32(len(k))})
		}
		at = next
	}
	flushAt(-1)
	o.refs = refs[:0]
}

// emitSorted calls fn with the ops of refs in key order.
func (o *ops) emitSorted(refs []opRef, fn func(op byte, shard int, k, v []byte)) {
	if len(refs) == 0 {
		return
	}
	var counts [engine.SlotCount + 1]int32
	for _, r := range refs {
		counts[o.slotOf(r)+1]++
	}
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	sorted := slices.Grow(o.sort[:0], len(refs))[:len(refs)]
	for _, r := range refs {
		s := o.slotOf(r)
		sorted[counts[s]] = r
		counts[s]++
	}
	key := func(r opRef) []byte { return o.buf[r.key : r.key+r.klen] }
	for lo := 0; lo < len(sorted); {
		hi := lo + 1
		for hi < len(sorted) && o.slotOf(sorted[hi]) == o.slotOf(sorted[lo]) {
			hi++
		}
		if hi-lo > 1 {
			slices.SortStableFunc(sorted[lo:hi], func(a, b opRef) int { return bytes.Compare(key(a), key(b)) })
		}
		lo = hi
	}
	for _, r := range sorted {
		op, shard, k, v, _ := o.at(int(r.at))
		fn(op, shard, k, v)
	}
	o.sort = sorted[:0]
}

// slotOf returns the slot of the key of r: its first two bytes.
func (o *ops) slotOf(r opRef) int {
	if r.klen < 2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(o.buf[r.key:]))
}

// at decodes the op at offset at, and returns where the next starts.
func (o *ops) at(at int) (op byte, shard int, k, v []byte, next int) {
	b := o.buf[at:]
	op = b[0]
	sh, w := binary.Uvarint(b[1:])
	b = b[1+w:]
	kn, w := binary.Uvarint(b)
	k = b[w : w+int(kn)]
	b = b[w+int(kn):]
	vn, w := binary.Uvarint(b)
	v = b[w : w+int(vn)]
	b = b[w+int(vn):]
	return op, int(sh), k, v, len(o.buf) - len(b)
}

// keyAt returns the offset of the key of the op at offset at.
func (o *ops) keyAt(at int) uint32 {
	b := o.buf[at+1:]
	_, w := binary.Uvarint(b)
	_, w2 := binary.Uvarint(b[w:])
	return uint32(at + 1 + w + w2)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
