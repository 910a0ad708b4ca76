package engine

import (
	"encoding/binary"
	"errors"

	"github.com/cellserver/cellserver/limiter"
)

// Record is one key's state in a form that can leave the engine: exported
// slot by slot, encoded with AppendBinary, decoded with DecodeRecord and
// imported elsewhere. Snapshots and cluster hand-off both move keys this way.
type Record struct {
	Key      []byte
	Kind     limiter.Kind
	ExpireMs int64         // Unix ms
	Words    [3]int64      // the kind's state words (limiter.State)
	Hits     []limiter.Hit // limiter.KindSlidingLog only
}

// ErrBadRecord reports an encoded record that cannot be decoded.
var ErrBadRecord = errors.New("engine: malformed record")

const recordVersion = 1

// AppendBinary appends r's encoding to buf: a version byte, the kind, the
// key's length and bytes, then the expiry, the three words and the hits as varints.
func (r Record) AppendBinary(buf []byte) []byte {
	buf = append(buf, recordVersion, byte(r.Kind))
	buf = binary.AppendUvarint(buf, uint64(len(r.Key)))
	buf = append(buf, r.Key...)
	for _, x := range [...]int64{r.ExpireMs, r.Words[0], r.Words[1], r.Words[2]} {
		buf = binary.AppendVarint(buf, x)
	}
	buf = binary.AppendUvarint(buf, uint64(len(r.Hits)))
	for _, h := range r.Hits {
		buf = binary.AppendVarint(buf, h.At)
		buf = binary.AppendVarint(buf, h.N)
	}
	return buf
}

// DecodeRecord decodes one record from the front of b and returns it with
// the number of bytes it used. The record's Key and Hits do not alias b.
func DecodeRecord(b []byte) (Record, int, error) { return decodeRecord(b, true) }

// DecodeRecordAliased is DecodeRecord, but the record's Key aliases b:
// for a record passed straight to Import, which copies it, so that
// decoding allocates nothing but a sliding log's hits (a replica applies
// hundreds of thousands a second).
func DecodeRecordAliased(b []byte) (Record, int, error) { return decodeRecord(b, false) }

func decodeRecord(b []byte, copyKey bool) (Record, int, error) {
	d := decoder{b: b}
	var r Record
	if d.byte() != recordVersion {
		return Record{}, 0, ErrBadRecord
	}
	r.Kind = limiter.Kind(d.byte())
	if !r.Kind.Valid() {
		return Record{}, 0, ErrBadRecord
	}
	n := d.uvarint()
	if n > uint64(len(d.b)-d.i) {
		return Record{}, 0, ErrBadRecord
	}
	r.Key = d.b[d.i : d.i+int(n) : d.i+int(n)]
	if copyKey {
		r.Key = append([]byte{}, r.Key...)
	}
	d.i += int(n)
	r.ExpireMs, r.Words[0], r.Words[1], r.Words[2] = d.varint(), d.varint(), d.varint(), d.varint()
	hits := d.uvarint()
	if hits > uint64(len(d.b)-d.i)/2 { // each hit takes at least two bytes
		return Record{}, 0, ErrBadRecord
	}
	if hits > 0 {
		r.Hits = make([]limiter.Hit, hits)
		for i := range r.Hits {
			r.Hits[i] = limiter.Hit{At: d.varint(), N: d.varint()}
		}
	}
	if d.bad {
		return Record{}, 0, ErrBadRecord
	}
	return r, d.i, nil
}

type decoder struct {
	b   []byte
	i   int
	bad bool
}

func (d *decoder) byte() byte {
	if d.i >= len(d.b) {
		d.bad = true
		return 0
	}
	d.i++
	return d.b[d.i-1]
}

func (d *decoder) uvarint() uint64 { return readVarint(d, binary.Uvarint) }

func (d *decoder) varint() int64 { return readVarint(d, binary.Varint) }

// readVarint decodes one varint at d.i with decode (binary.Uvarint or
// Varint), marking d bad when it cannot.
func readVarint[T int64 | uint64](d *decoder, decode func([]byte) (T, int)) T {
	x, n := decode(d.b[min(d.i, len(d.b)):])
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.i += n
	return x
}

func (e entry) record(key []byte) Record {
	r := Record{Key: append([]byte(nil), key...), Kind: e.kind, ExpireMs: e.expireMs, Words: e.Words}
	if e.kind == limiter.KindSlidingLog {
		r.Hits = append([]limiter.Hit(nil), e.Log...) // e.Log is the table's scratch
	}
	return r
}

// ExportSlot returns a copy of every live key in hash slot slot. It walks
// the slot's shard a chunk at a time (keysChunk records under one hold of
// its lock), so other slots of the shard are served meanwhile; a key of
// slot written or removed during the walk may or may not be in the copy,
// which is exact for a slot nobody writes (one being handed over).
func (v *View) ExportSlot(slot int) []Record {
	if slot < 0 || slot >= SlotCount {
		return nil
	}
	var out []Record
	v.walkSlot(slot, func(sh *shard, j int, key []byte, nowMs int64) {
		e := sh.t.entryAt(j)
		if nowMs > e.expireMs {
			return
		}
		if e.kind == limiter.KindSlidingLog {
			e.Log = sh.t.logAt(j)
		}
		out = append(out, e.record(key))
	}, nil)
	return out
}

// walkSlot calls fn, under the lock of slot's shard, for each record of
// slot (live or expired) with its slot index j in the shard's table and
// its key (which aliases the table), a chunk at a time; after each
// chunk, still under the lock, it calls after (if not nil), which may
// change the table. fn must not change the table.
func (v *View) walkSlot(slot int, fn func(sh *shard, j int, key []byte, nowMs int64), after func(sh *shard, nowMs int64)) {
	sh := v.e.shardOf(slot)
	for from := uint64(0); from < tagEnd; {
		v.lock(sh)
		nowMs := unixMs(v.now(nil))
		from, _ = sh.t.scanFrom(from, keysChunk, false, func(j int) {
			if k := sh.t.keyOf(uint32(sh.t.slots[j])); Slot(k) == slot {
				fn(sh, j, k, nowMs)
			}
		})
		if after != nil {
			after(sh, nowMs)
		}
		v.unlock(sh)
		if walkBetween != nil {
			walkBetween()
		}
	}
}

// walkBetween, when set, runs between two of walkSlot's chunks, the lock
// not held (tests set it).
var walkBetween func()

// CountKeysInSlot returns the number of live keys in hash slot slot. It
// walks the slot's shard a chunk at a time (SlotKeys), copying no record.
func (v *View) CountKeysInSlot(slot int) int {
	return v.SlotKeys(slot, -1, func([]byte) {})
}

// DeleteSlot removes every key in hash slot slot and returns how many of
// them were live (the expired ones count as expired). It walks the slot's
// shard a chunk at a time, as ExportSlot does, removing each chunk's keys
// of slot before it lets go of the lock.
func (v *View) DeleteSlot(slot int) int {
	if slot < 0 || slot >= SlotCount {
		return 0
	}
	n := 0
	var keys [][]byte
	v.walkSlot(slot, func(_ *shard, _ int, key []byte, _ int64) {
		keys = append(keys, append([]byte(nil), key...))
	}, func(sh *shard, nowMs int64) {
		for _, k := range keys {
			i := sh.t.find(k, v.e.hash(k))
			if i < 0 {
				continue
			}
			if nowMs > sh.t.entryAt(i).expireMs {
				sh.expired++
			} else {
				n++
			}
			sh.removeLocked(i)
		}
		keys = keys[:0]
	})
	return n
}

// Import stores r, replacing whatever key r.Key held. A record that has
// already expired is dropped. It reports whether the key was stored.
// With Config.TrackChanges the key counts as changed (TakeDirty reports it).
func (v *View) Import(r Record) (bool, error) { return v.importRecord(r, true, false) }

// ImportIfAbsent stores r as Import does, unless r.Key holds a live key,
// which it leaves as it is: for a copy of a key that is older than any
// live one (a restored snapshot's). It reports whether r was stored.
func (v *View) ImportIfAbsent(r Record) (bool, error) { return v.importRecord(r, true, true) }

// importRecord is Import; dirty false stores the record as unchanged since
// the last snapshot (Engine.Load); ifAbsent keeps a live key as it is.
func (v *View) importRecord(r Record, dirty, ifAbsent bool) (bool, error) {
	if !r.Kind.Valid() || limiter.Kinds[r.Kind].Log != (len(r.Hits) > 0) {
		return false, ErrBadRecord
	}
	sh := v.e.shardFor(r.Key)
	v.lock(sh)
	defer v.unlock(sh)
	nowMs := unixMs(v.e.clock.Now())
	h := v.e.hash(r.Key)
	var cur entry
	i, found := sh.getLocked(r.Key, h, nowMs, &cur)
	if nowMs > r.ExpireMs || found && ifAbsent {
		return false, nil
	}
	// The table copies the hits into its arena: e may use r's.
	e := entry{kind: r.Kind, expireMs: r.ExpireMs, State: limiter.State{Words: r.Words, Log: r.Hits}}
	if !dirty {
		bit := sh.t.dirtyBit
		sh.t.dirtyBit = 0
		defer func() { sh.t.dirtyBit = bit }()
	}
	if err := sh.putLocked(r.Key, h, i, &e); err != nil {
		return false, err
	}
	if !dirty {
		sh.changes--
	}
	return true, nil
}
