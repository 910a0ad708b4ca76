package engine

import "unsafe"

// Locating a key ahead of use, and prefetching. A limiter command on a
// random key among millions spends most of its time in two cache misses:
// the key's index slot, then its record in the arena. A server that has
// several requests of a pipeline in hand can work out where each key lives
// and ask for both lines ahead of time, so that the misses of the next
// requests overlap with the work of this one:
//
//	h := e.Locate(key)     // the key's shard and hash; touches no table
//	e.Prefetch(h)          // a group of requests ahead: the slot's line
//	e.PrefetchRecord(h)    // then the record's line
//	v.Expect(h)            // the command's View takes h instead of
//	v.Throttle(key, p)     // hashing key again
//
// Prefetch and PrefetchRecord take the shard's lock for a few instructions,
// so they are race-free; a prefetch instruction does not wait for its line
// (nor does the lock wait for it), and it never faults. They change
// nothing: a hint that has gone stale (the key was moved or removed
// meanwhile) only wastes the fetch.

// A Hint is a key located ahead of use: its shard and hash, and which
// bytes it was made for (their address and length, so that it holds no
// reference to them). The zero Hint locates nothing.
type Hint struct {
	e   *Engine
	s   *shard
	h   uint64
	key uintptr
	n   int
}

// Locate works out key's shard and hash.
func (e *Engine) Locate(key []byte) Hint {
	return Hint{e, e.shardFor(key), e.hash(key), uintptr(unsafe.Pointer(unsafe.SliceData(key))), len(key)}
}

// of reports whether h was made for key: the same bytes, not merely equal
// ones. The caller must not have changed them since.
func (h Hint) of(key []byte) bool {
	return h.s != nil && h.key == uintptr(unsafe.Pointer(unsafe.SliceData(key))) && h.n == len(key)
}

// Prefetch starts loading the index slot where h's key would be found.
// The zero Hint does nothing.
func (e *Engine) Prefetch(h Hint) {
	s := h.s
	if s == nil {
		return
	}
	s.mu.Lock()
	if t := &s.t; len(t.slots) > 0 {
		prefetch(uintptr(unsafe.Pointer(&t.slots[t.home(slotTag(h.h))])))
	}
	s.mu.Unlock()
}

// PrefetchRecord starts loading the record of h's key, when its home slot
// (the one Prefetch loads) or the next holds its tag. The zero Hint does
// nothing.
func (e *Engine) PrefetchRecord(h Hint) {
	s := h.s
	if s == nil {
		return
	}
	s.mu.Lock()
	t := &s.t
	if len(t.slots) > 0 {
		tag := slotTag(h.h)
		i := t.home(tag)
		for range 2 { // the home slot and the next: most probes end there
			sl := t.slots[i]
			if sl == 0 {
				break
			}
			if sl&^refMask == tag {
				if ref := uint32(sl); int(ref) < len(t.arena) {
					p := uintptr(unsafe.Pointer(&t.arena[ref]))
					prefetch(p)
					prefetch(p + 31) // a short key's record may cross into the next line
				}
				break
			}
			i = t.next(i)
		}
	}
	s.mu.Unlock()
}

// prefetchRecordAt starts loading the record of slot i, if i is a full
// slot. The table's lock is held.
func (t *table) prefetchRecordAt(i int) {
	if i < len(t.slots) {
		if sl := t.slots[i]; sl != 0 && int(uint32(sl)) < len(t.arena) {
			prefetch(uintptr(unsafe.Pointer(&t.arena[uint32(sl)])))
		}
	}
}
