package engine

import "unsafe"

// Prefetching. A limiter command on a random key among millions spends
// most of its time in two cache misses: the key's index slot, then its
// record in the arena. A server that has several requests of a pipeline in
// hand can ask for both lines ahead of time, so that the misses of the
// next requests overlap with the work of this one:
//
//	h := e.Prefetch(key)     // two requests ahead: the slot's line
//	e.PrefetchRecord(h)      // one request ahead: the record's line
//
// Both take the shard's lock for a few instructions, so they are race-free;
// a prefetch instruction does not wait for its line (nor does the lock
// wait for it), and it never faults. They change nothing: a hint that has
// gone stale (the key was moved or removed meanwhile) only wastes the fetch.

// A Hint locates a key worked out ahead of use: its shard and hash.
type Hint struct {
	s *shard
	h uint64
}

// Prefetch starts loading the index slot where key would be found, and
// returns the hint for PrefetchRecord.
func (e *Engine) Prefetch(key []byte) Hint {
	s, h := e.shardFor(key), e.hash(key)
	s.mu.Lock()
	if t := &s.t; len(t.slots) > 0 {
		prefetch(uintptr(unsafe.Pointer(&t.slots[t.home(slotTag(h))])))
	}
	s.mu.Unlock()
	return Hint{s, h}
}

// PrefetchRecord starts loading the record of the key h was made for,
// when the slot read by Prefetch points at it. The zero Hint does nothing.
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
