package persist

import (
	"encoding/binary"

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

func (o *ops) reset() {
	if cap(o.buf) > 1<<20 {
		o.buf = nil // memory follows the churn: a large snapshot's buffer does not stay
	}
	o.buf, o.n = o.buf[:0], 0
}

// each calls fn with every op in order; k and v alias the buffer.
func (o *ops) each(fn func(op byte, shard int, k, v []byte)) {
	b := o.buf
	for len(b) > 0 {
		op := b[0]
		shard, w := binary.Uvarint(b[1:])
		b = b[1+w:]
		kn, w := binary.Uvarint(b)
		k := b[w : w+int(kn)]
		b = b[w+int(kn):]
		vn, w := binary.Uvarint(b)
		v := b[w : w+int(vn)]
		b = b[w+int(vn):]
		fn(op, int(shard), k, v)
	}
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
