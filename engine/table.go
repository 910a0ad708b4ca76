package engine

import (
	"encoding/binary"
	"slices"

	"github.com/cellserver/cellserver/internal/manual"
	"github.com/cellserver/cellserver/limiter"
)

// table is one shard's keys: an open-addressing index over records kept in
// one byte arena. It is built for memory and for the garbage collector:
//
//   - slots is an array of uint64, probed linearly. An empty slot is 0; a
//     full one holds the upper 32 bits of the key's hash (with the low bit
//     set, so it is never 0) and the record's arena offset. A key's home
//     slot is those 32 bits scaled to the array's length (multiply and
//     shift), so any length works and a table can be rehashed from the
//     slots alone. It grows by half when 3/4 full, so the load stays
//     between 1/2 and 3/4 as keys arrive; deletion shifts the following
//     slots back (no tombstones).
//   - arena holds the records back to back:
//     head (1 byte) | key length (uvarint) | key | [expiry ms (8)] | state (8 per word)
//     The head is the kind in its low bits, and headDirty when the record
//     changed since the last snapshot took it (dirty.go). A CL.THROTTLE record needs no
//     expiry field: redis-cell's expiry, floor(now_ms) + trunc(ttl_ms), is
//     always floor(TAT_ms) or one less, so a head bit says which (headImplicit,
//     headMinusOne). A 17-byte CL.THROTTLE key takes 27 bytes. A sliding
//     log's state is its hits, with room to grow (logrecord.go). A record is
//     rewritten in place when its key is updated, and written anew when
//     its new state does not fit in it (a sliding log that outgrew its
//     room, or shrank far below it). A removed or replaced record leaves
//     dead bytes: the next record of the same size takes them (holes), or
//     compaction reclaims them, once they are an eighth of the live bytes
//     when the arena is full, or twice them after a removal.
//
// Neither slots nor arena contains pointers, so the garbage collector never
// scans them however many keys there are, and mem keeps the large ones out
// of the Go heap altogether. An array is freed the moment it is replaced,
// so nothing may keep a slice of slots or arena across a change to the
// table (keyOf's result included), and a key passed in must not alias the
// arena. table is not safe for concurrent use: its shard's lock guards it.
type table struct {
	mem   *manual.Allocator // allocates and frees slots and arena
	slots []uint64
	count int
	arena []byte
	dead  int                 // bytes of removed records in arena
	holes [holeLists]holeList // dead records kept for reuse, by size

	scratch []limiter.Hit // the decoded log logAt returns, reused from call to call

	limit int // the most arena bytes; 0: maxArenaBytes (tests lower it)

	shrinkHold int // no shrink is tried until count is below it; 0: none held (shrink)

	// dirtyBit is ORed into the head of every record written or updated:
	// headDirty when the engine tracks changes (Config.TrackChanges), 0
	// otherwise, so that tracking costs no branch on the write path.
	dirtyBit byte
}

func (t *table) maxArena() int {
	if t.limit > 0 {
		return t.limit
	}
	return maxArenaBytes
}

const (
	minSlots     = 8
	arenaMinGrow = 256
	refMask      = uint64(1<<32 - 1) // a slot's arena offset
	// maxArenaBytes is the most bytes an arena holds: what a 32-bit offset
	// reaches, or what an int counts on a 32-bit platform.
	maxArenaBytes = int(min(refMask, uint64(^uint(0)>>1)))

	headKind     = 0x07 // the kind
	headDirty    = 0x08 // changed since the last TakeDirty (only with Config.TrackChanges)
	headUse      = 0x30 // a 2-bit use count for eviction (victimLocked)
	headUseShift = 4
	headImplicit = 0x80 // no expiry field: it is floor(a/1e6) − (headMinusOne ? 1 : 0)
	headMinusOne = 0x40
)

// implicitHead returns the head byte for e when its expiry can be left
// out of the record, and false when it must be stored.
func implicitHead(e *entry) (byte, bool) {
	if e.kind != limiter.KindGCRA {
		return 0, false
	}
	switch unixMs(e.Words[0]) - e.expireMs {
	case 0:
		return byte(e.kind) | headImplicit, true
	case 1:
		return byte(e.kind) | headImplicit | headMinusOne, true
	}
	return 0, false
}

func slotTag(h uint64) uint64 { return (h>>32 | 1) << 32 }

// home is the first slot to probe for a key whose slot tag is tag.
func (t *table) home(tag uint64) int {
	return int((tag >> 32) * uint64(len(t.slots)) >> 32)
}

// next is the slot after i, wrapping around.
func (t *table) next(i int) int {
	if i++; i == len(t.slots) {
		return 0
	}
	return i
}

// find returns the slot index holding key (hash h), or -1.
func (t *table) find(key []byte, h uint64) int {
	if t.count == 0 {
		return -1
	}
	tag := slotTag(h)
	for i := t.home(tag); ; i = t.next(i) {
		s := t.slots[i]
		if s == 0 {
			return -1
		}
		if s&^refMask == tag && string(t.keyOf(uint32(s))) == string(key) {
			return i
		}
	}
}

// keyOf returns the key of the record at ref. It aliases the arena: it is
// valid only until the next change to the table.
func (t *table) keyOf(ref uint32) []byte {
	n, w := binary.Uvarint(t.arena[ref+1:])
	start := int(ref) + 1 + w
	return t.arena[start : start+int(n)]
}

// stateAt returns the offset of the expiry field of the record at ref.
func (t *table) stateAt(ref uint32) int {
	n, w := binary.Uvarint(t.arena[ref+1:])
	return int(ref) + 1 + w + int(n)
}

// use returns the use count of the record in slot i, 0 to 3.
func (t *table) use(i int) int {
	return int(t.arena[uint32(t.slots[i])]&headUse) >> headUseShift
}

// touch records a use of the record in slot i: its use count goes to 3.
// A record already at 3 is not written, so that its cache line stays
// clean for a request that changes nothing (a limited one).
func (t *table) touch(i int) {
	if ref := uint32(t.slots[i]); t.arena[ref]&headUse != headUse {
		t.arena[ref] |= headUse
	}
}

// age lowers the use count of the record in slot i by one, if not 0.
func (t *table) age(i int) {
	ref := uint32(t.slots[i])
	if u := t.arena[ref] & headUse; u != 0 {
		t.arena[ref] = t.arena[ref]&^headUse | (u - 1<<headUseShift)
	}
}

// kindAt returns the kind of the record in slot i.
func (t *table) kindAt(i int) limiter.Kind {
	return limiter.Kind(t.arena[uint32(t.slots[i])] & headKind)
}

// entryAt decodes the record in slot i, but for a sliding log's hits: its
// log is nil (logAt decodes it), since most readers need only the expiry.
func (t *table) entryAt(i int) entry {
	var e entry
	t.entryInto(i, &e)
	return e
}

// entryInto reads the entry of slot i into e (its log left out).
func (t *table) entryInto(i int, e *entry) {
	ref := uint32(t.slots[i])
	head := t.arena[ref]
	p := t.stateAt(ref)
	if head&headImplicit != 0 {
		a := t.word(p)
		*e = entry{kind: limiter.Kind(head & headKind), expireMs: unixMs(a), State: limiter.State{Words: [3]int64{a}}}
		if head&headMinusOne != 0 {
			e.expireMs--
		}
		return
	}
	*e = entry{kind: limiter.Kind(head & headKind), expireMs: t.word(p)}
	k := limiter.Kinds[e.kind].Words
	if k > 0 {
		e.Words[0] = t.word(p + 8)
	}
	if k > 1 {
		e.Words[1] = t.word(p + 16)
	}
	if k > 2 {
		e.Words[2] = t.word(p + 24)
	}
}

func (t *table) word(p int) int64 { return int64(binary.LittleEndian.Uint64(t.arena[p:])) }

func (t *table) putWord(p int, v int64) { binary.LittleEndian.PutUint64(t.arena[p:], uint64(v)) }

// update rewrites the record in slot i, whose kind is e.kind, in place,
// and reports whether it could: a record whose expiry is implicit can hold
// only an entry whose expiry is implicit too, and a sliding log's record
// only as many hits as it has room for.
func (t *table) update(i int, e *entry) bool {
	ref := uint32(t.slots[i])
	p := t.stateAt(ref)
	if t.arena[ref]&headImplicit != 0 {
		head, ok := implicitHead(e)
		if !ok {
			return false
		}
		t.arena[ref] = head | t.dirtyBit | t.arena[ref]&headUse
		t.putWord(p, e.Words[0])
		return true
	}
	t.arena[ref] |= t.dirtyBit
	if e.kind == limiter.KindSlidingLog && !t.updateLog(p+8, e.Log) {
		return false
	}
	t.putWord(p, e.expireMs)
	words := [3]int64{e.Words[0], e.Words[1], e.Words[2]}
	for w := range limiter.Kinds[e.kind].Words {
		t.putWord(p+8+8*w, words[w])
	}
	return true
}

// put stores e under key (hash h), whose record is in slot i (-1: none):
// in place when the record can hold e, else as a new record. It reports
// false, and changes nothing, when the new record would not fit.
func (t *table) put(i int, key []byte, h uint64, e *entry) bool {
	n := len(e.Log) // room counts for sliding logs only
	if i < 0 {
		// Most keys of a large keyspace see few hits, the commonest second
		// one soon after the first: a new log has room for two.
		room := max(n, 2)
		if !t.fits(key, e, room) {
			return false
		}
		t.insert(key, h, e, room)
		return true
	}
	// A log that outgrew its record, or shrank far below it (so that memory
	// follows the live hits), moves to a record with room for half as many
	// hits again: growing or shrinking steadily, it moves O(log n) times.
	room := n + n/2
	if t.kindAt(i) == e.kind {
		// Where the arena has no place for it, a shrunk log stays put.
		shrink := e.kind == limiter.KindSlidingLog && t.shrunk(i, n) && t.fits(key, e, room)
		if !shrink && t.update(i, e) {
			return true
		}
	}
	if !t.fits(key, e, room) {
		return false
	}
	t.replace(i, key, e, room)
	return true
}

// fits reports whether a record for key and e (with room for room hits,
// if a sliding log) can be added: the arena's live bytes must stay
// addressable by a 32-bit offset. A record about to be replaced still
// counts, since compaction keeps it until the new one is written.
func (t *table) fits(key []byte, e *entry, room int) bool {
	return len(t.arena)-t.dead+recordLen(key, e, room) < t.maxArena()
}

func recordLen(key []byte, e *entry, room int) int {
	n := 1 + uvarintLen(uint64(len(key))) + len(key) + 8*limiter.Kinds[e.kind].Words
	if _, implicit := implicitHead(e); !implicit {
		n += 8
	}
	if e.kind == limiter.KindSlidingLog {
		n += logLen(room, compactLog(e.Log))
	}
	return n
}

// insert adds key (hash h, not present) with e, which must fit, in a
// record with room for room hits if e is a sliding log.
func (t *table) insert(key []byte, h uint64, e *entry, room int) {
	if !t.slotFree() {
		t.rehash(max(minSlots, len(t.slots)+len(t.slots)/2))
		t.shrinkHold = 0
	}
	ref := t.addRecord(key, e, room)
	tag := slotTag(h)
	i := t.home(tag)
	for t.slots[i] != 0 {
		i = t.next(i)
	}
	t.slots[i] = tag | uint64(ref)
	t.count++
}

// replace writes key (the key of slot i) with e, which must fit, as a new
// record and points slot i at it; the old record becomes dead bytes.
func (t *table) replace(i int, key []byte, e *entry, room int) {
	ref := t.addRecord(key, e, room) // may compact, which moves the old record: read its offset after
	t.free(uint32(t.slots[i]))
	t.slots[i] = t.slots[i]&^refMask | uint64(ref)
	t.reclaim()
}

// addRecord writes a new record for key and e, with room for room hits if
// a sliding log, and returns its offset: in a dead record of its size if
// there is one, else at the end of the arena, growing it by an eighth at a
// time (compacting instead when enough of it is dead).
func (t *table) addRecord(key []byte, e *entry, room int) uint32 {
	head, implicit := implicitHead(e)
	if !implicit {
		head = byte(e.kind)
	}
	size := recordLen(key, e, room)
	if ref, ok := t.reuse(size); ok {
		t.writeRecord(ref, head, implicit, key, e, room)
		return ref
	}
	if len(t.arena)+size >= t.maxArena() {
		t.compact(size) // offsets are 32 bits; fits guarantees the live bytes do fit
	}
	if len(t.arena)+size > cap(t.arena) {
		// Compacting copies the live bytes where growing copies them all:
		// compact once the dead bytes are worth an eighth of the live ones,
		// as much room as growth would add. Records that move (sliding logs
		// that grow) leave dead bytes all the time; growing past them
		// would let the arena reach twice the live bytes.
		if live := len(t.arena) - t.dead; t.dead > live/8 {
			t.compact(size)
		} else {
			grown := manual.Make[byte](t.mem, len(t.arena)+max(size, len(t.arena)/8, arenaMinGrow))[:len(t.arena)]
			copy(grown, t.arena)
			manual.Free(t.mem, t.arena)
			t.arena = grown
		}
	}
	// The record is written in place, within the capacity just ensured: a
	// reslice past it would panic, where append would silently move the
	// arena to the Go heap.
	ref := uint32(len(t.arena))
	t.arena = t.arena[:int(ref)+size]
	t.writeRecord(ref, head, implicit, key, e, room)
	return ref
}

// writeRecord writes the record for key and e at ref, whose bytes are
// free.
func (t *table) writeRecord(ref uint32, head byte, implicit bool, key []byte, e *entry, room int) {
	rec := t.arena[ref:]
	rec[0] = head | t.dirtyBit // not used again yet: see victimLocked
	p := 1 + binary.PutUvarint(rec[1:], uint64(len(key)))
	p += copy(rec[p:], key)
	if !implicit {
		binary.LittleEndian.PutUint64(rec[p:], uint64(e.expireMs))
		p += 8
	}
	words := [3]int64{e.Words[0], e.Words[1], e.Words[2]}
	for w := range limiter.Kinds[e.kind].Words {
		binary.LittleEndian.PutUint64(rec[p+8*w:], uint64(words[w]))
	}
	if e.kind == limiter.KindSlidingLog {
		putLog(rec[p:], room, e.Log, compactLog(e.Log))
	}
}

// holeList links the dead records of one size, kept for reuse: last is
// the offset + 1 of the last one freed (0: none), whose bytes after the
// head hold the one before.
type holeList struct{ size, last uint32 }

// holeLists is how many sizes have dead records kept for reuse at once, a
// prime: the sizes of one key length's records differ by multiples of 8
// (state words) or 16 (hits), and spread over all of them.
const holeLists = 31

// free makes the record at ref dead bytes, and keeps it for a record of
// the same size (reuse). Records of a few sizes come and go all the time
// (sliding logs that outgrow their room, keys that expire while others
// arrive): taken again, their bytes neither pile up for compaction nor
// make the arena grow. A size that takes the list of another drops it:
// those records stay dead bytes, for compaction.
func (t *table) free(ref uint32) {
	size := t.recordSize(ref)
	t.dead += size
	l := &t.holes[size%holeLists]
	if int(l.size) != size {
		*l = holeList{size: uint32(size)}
	}
	binary.LittleEndian.PutUint32(t.arena[ref+1:], l.last) // every record has 5 bytes or more
	l.last = ref + 1
}

// reuse takes a dead record of size bytes out of the dead ones and returns
// its offset, or false when there is none.
func (t *table) reuse(size int) (uint32, bool) {
	l := &t.holes[size%holeLists]
	if int(l.size) != size || l.last == 0 {
		return 0, false
	}
	ref := l.last - 1
	l.last = binary.LittleEndian.Uint32(t.arena[ref+1:])
	t.dead -= size
	return ref, true
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// recordSize returns the bytes of the record at ref.
func (t *table) recordSize(ref uint32) int {
	head := t.arena[ref]
	n := t.stateAt(ref) - int(ref) + 8*limiter.Kinds[head&headKind].Words
	if head&headImplicit == 0 {
		n += 8
	}
	if limiter.Kind(head&headKind) == limiter.KindSlidingLog {
		l := t.logHeadAt(int(ref) + n)
		n += logLen(l.room, l.compact)
	}
	return n
}

// removeAt deletes the record in slot i and shifts the slots after it
// back, so that no probe sequence is broken. The slot i may then hold a
// record that was further on; callers walking the slots revisit i.
func (t *table) removeAt(i int) {
	t.free(uint32(t.slots[i]))
	for j := t.next(i); t.slots[j] != 0; j = t.next(j) {
		// Move slot j back to i when its home is not in (i, j], cyclically.
		h := t.home(t.slots[j])
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	t.count--
	switch {
	case t.count == 0:
		t.reset() // everything goes back
	case len(t.slots) > minSlots && t.count*8 < len(t.slots) && (t.shrinkHold == 0 || t.count < t.shrinkHold):
		t.shrink()
	}
	t.reclaim()
}

// shrinkBuckets is how many equal parts of hash space shrink weighs the
// keys' spread over.
const shrinkBuckets = 64

// shrink rehashes the slots, an eighth full or less, into fewer: twice
// the keys, or more if the keys are not spread evenly over hash space, so
// that the densest 1/shrinkBuckets of it is at most half full. A walk that
// removes keys in slot order (the sweep, a slot's deletion) leaves the
// rest in one part of hash space: rehashed into twice their number of
// slots, they would all fall into a fraction of them, one run of full
// slots as long as that part, and every removal at its start would walk
// it all. When that leaves no worthwhile shrink (a quarter or more), the
// table keeps its slots until the keys have halved (shrinkHold), so that
// the weighing is not repeated on every removal.
func (t *table) shrink() {
	var hist [shrinkBuckets]int
	for _, s := range t.slots {
		if s != 0 {
			hist[s>>(64-6)]++ // the top 6 bits of the slot tag
		}
	}
	n := max(minSlots, 2*t.count, 2*shrinkBuckets*slices.Max(hist[:]))
	if n*4 > len(t.slots)*3 {
		t.shrinkHold = t.count / 2
		return
	}
	t.shrinkHold = 0
	t.rehash(n)
}

// reclaim compacts the arena once its dead bytes are many and twice the
// live ones, so that its memory follows the live records.
func (t *table) reclaim() {
	if t.dead > 4096 && t.dead > 2*(len(t.arena)-t.dead) {
		t.compact(0)
	}
}

// reset frees slots, arena and scratch and empties the table, keeping its
// allocator and limit.
func (t *table) reset() {
	manual.Free(t.mem, t.slots)
	manual.Free(t.mem, t.arena)
	t.mem.Account(-hitBytes * int64(cap(t.scratch)))
	*t = table{mem: t.mem, limit: t.limit, dirtyBit: t.dirtyBit}
}

// rehash moves every slot into a new array of n slots and frees the old one.
func (t *table) rehash(n int) {
	old := t.slots
	t.slots = manual.Make[uint64](t.mem, n)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := t.home(s)
		for t.slots[i] != 0 {
			i = t.next(i)
		}
		t.slots[i] = s
	}
	manual.Free(t.mem, old)
}

// compact copies the live records into a new arena sized for them (plus
// room for extra bytes), points the slots at their new offsets and frees
// the old arena.
func (t *table) compact(extra int) {
	live := t.live()
	t.compactInto(live + live/8 + extra + arenaMinGrow)
}

// compactInto is compact into an arena of size bytes, no fewer than the
// live records hold.
func (t *table) compactInto(size int) {
	arena := manual.Make[byte](t.mem, size)
	n := 0
	for i, s := range t.slots {
		if s == 0 {
			continue
		}
		ref := uint32(s)
		size := t.recordSize(ref)
		t.slots[i] = s&^refMask | uint64(n)
		n += copy(arena[n:], t.arena[ref:int(ref)+size])
	}
	manual.Free(t.mem, t.arena)
	t.arena, t.dead, t.holes = arena[:n], 0, [holeLists]holeList{}
}

// live returns the bytes of the live records.
func (t *table) live() int { return len(t.arena) - t.dead }

// slotFree reports whether one more key fits the slots without a rehash.
func (t *table) slotFree() bool { return (t.count+1)*4 <= len(t.slots)*3 }

// arenaRoom reports whether a record of size bytes fits the arena without
// growing it: a dead record of its size to reuse, or room left in its
// capacity.
func (t *table) arenaRoom(size int) bool {
	if l := &t.holes[size%holeLists]; int(l.size) == size && l.last != 0 {
		return true
	}
	return len(t.arena)+size <= cap(t.arena)
}

// memory returns the bytes the table holds (slots, arena, scratch), on
// the Go heap or not.
func (t *table) memory() int {
	return 8*cap(t.slots) + cap(t.arena) + hitBytes*cap(t.scratch)
}
