package engine

import "sync/atomic"

// Policy is what the engine does when a new key would take memory past
// its limit (SetMemoryLimit). Keys already there keep working under every
// policy: only a new key is refused or makes room.
type Policy uint32

// The policies, by their maxmemory-policy names.
const (
	// NoEviction refuses the new key with ErrOOM (noeviction).
	NoEviction Policy = iota
	// EvictNearestExpiry evicts, of a sample of keys, the one that
	// expires first: the key with the least information left
	// (volatile-ttl).
	EvictNearestExpiry
	// EvictLRU evicts a key not used since the clock hand last passed it
	// (allkeys-lru; see evictLocked).
	EvictLRU
	// EvictRandom evicts a sampled key (allkeys-random).
	EvictRandom
)

// evictSample is how many keys one eviction samples, as Redis's
// maxmemory-samples default.
const evictSample = 5

// memoryLimit is the engine's memory ceiling, changeable at run time.
type memoryLimit struct {
	max    atomic.Int64  // bytes; 0: none
	policy atomic.Uint32 // a Policy
	other  atomic.Int64  // memory outside the tables' mapped arrays, as last reported
}

// SetMemoryLimit sets the most memory the engine lets new keys take, in
// bytes (0: no limit), counted as its tables' mapped arrays plus what
// SetOtherMemory last reported, and what it does at the limit.
func (e *Engine) SetMemoryLimit(max int64, p Policy) {
	e.limit.policy.Store(uint32(p))
	e.limit.max.Store(max)
}

// SetOtherMemory reports the memory the process holds outside the
// tables' mapped arrays (the Go heap, which holds the small tables), for
// the memory limit. The server reports it a few times a second.
func (e *Engine) SetOtherMemory(n int64) { e.limit.other.Store(n) }

// UsedMemory returns the memory the limit is checked against: the
// tables' mapped arrays plus the last SetOtherMemory.
func (e *Engine) UsedMemory() int64 { return e.mem.Mapped() + e.limit.other.Load() }

// overLimit reports whether the engine is at or past its memory limit.
func (e *Engine) overLimit() bool {
	max := e.limit.max.Load()
	return max > 0 && e.UsedMemory() >= max
}

// makeRoomLocked is called before a new record of need bytes is stored in
// s while the engine is past its memory limit: under NoEviction it
// returns ErrOOM; otherwise it evicts keys of s, chosen by the policy,
// until they held need bytes, and returns ErrOOM, evicting nothing, if all
// of s's keys (and its credit) hold fewer. What the last victim held beyond need is kept as
// credit for the next new key (s.evictCredit), so that at the limit the
// live bytes stay level rather than drifting down a victim at a time.
// Eviction works in the new key's shard, whose lock is held: keys are
// spread evenly over the shards by their hash slots, so that keeps every
// shard near its share, and no other lock is taken.
//
// The new key must not make the table map more memory either, or every
// shard would grow a step past the limit (its arena by an eighth: new keys
// seldom fit the victims' dead records, whose sizes differ). So it also
// evicts until the slots take one more key without a rehash, and when the
// arena has no room left it compacts the arena within its capacity, which
// turns the dead bytes into room; so that it compacts seldom, it first
// evicts until that room (dead bytes and the unused end) is a sixteenth of
// the live bytes or more, room for that many new keys to come. An empty
// shard (no arrays) takes no new key at the limit.
func (s *shard) makeRoomLocked(p Policy, need int) error {
	if p == NoEviction {
		return ErrOOM
	}
	// Credit counts only while the bytes it stands for are still the
	// arena's room: a table emptied (reset) or compacted smaller since
	// gave them back, and a key taken on such credit would map new memory.
	freed := min(s.evictCredit, cap(s.t.arena)-s.t.live())
	if freed+s.t.live() < need {
		return ErrOOM // evicting every key of s would not make room: evict none
	}
	for freed < need || !s.t.slotFree() {
		if s.t.count == 0 { // not reached: the keys and credit held need bytes
			s.evictCredit = 0
			return ErrOOM
		}
		freed += s.evictOneLocked(p)
	}
	if !s.t.arenaRoom(need) {
		// Compacting within the capacity leaves cap - live bytes of room:
		// the dead bytes and the unused end.
		for s.t.count > 0 && cap(s.t.arena)-s.t.live() < max(need, s.t.live()/16) {
			freed += s.evictOneLocked(p)
		}
		if s.t.count > 0 { // else the table gave its arrays back (reset)
			s.t.compactInto(cap(s.t.arena))
		}
	}
	s.evictCredit = freed - need
	return nil
}

// evictOneLocked evicts a key of s (not empty) chosen by p and returns the
// bytes its record held.
func (s *shard) evictOneLocked(p Policy) int {
	i := s.victimLocked(p)
	n := s.t.recordSize(uint32(s.t.slots[i]))
	s.removeLocked(i)
	s.evicted++
	return n
}

// victimLocked samples evictSample keys of s (not empty) and returns the
// slot of the one to evict by policy p:
//
//   - EvictNearestExpiry: the one that expires first (an expired one
//     first of all).
//   - EvictLRU: an approximation of least recently used that costs no
//     memory per key (per-key access times would cost 4 to 8 bytes, a
//     tenth to a fifth of a key): a 2-bit use count in the record's head
//     byte (headUse), as in generalized CLOCK. A use sets it to 3 (while
//     the policy is EvictLRU: under the others it is not kept), a new
//     key starts at 0, and each time the sampler passes a key without
//     evicting it, its count drops by one. Of the sample, the key with the
//     lowest count goes (ties: the one that expires first), so a key in
//     use survives as long as it is used more often than the sampler
//     passes it three times, and a key used once goes first.
//   - EvictRandom: the first sampled.
func (s *shard) victimLocked(p Policy) int {
	var sample [evictSample]int
	best, bestUse, bestExp := -1, 0, int64(0)
	for k := range sample {
		i := s.randomSlotLocked()
		if p == EvictRandom {
			return i
		}
		sample[k] = i
		use := 0
		if p == EvictLRU {
			use = s.t.use(i)
		}
		exp := s.t.entryAt(i).expireMs
		if best < 0 || use < bestUse || use == bestUse && exp < bestExp {
			best, bestUse, bestExp = i, use, exp
		}
	}
	if p == EvictLRU {
		for _, i := range sample {
			if i != best {
				s.t.age(i)
			}
		}
	}
	return best
}

// randomSlotLocked returns a random full slot of s, which is not empty.
// It draws slot indexes until one is full (the load is at least an
// eighth, so a few draws do), rather than taking the next full slot
// after one draw, which would favour the keys that follow empty runs.
func (s *shard) randomSlotLocked() int {
	for {
		s.rng ^= s.rng << 13
		s.rng ^= s.rng >> 7
		s.rng ^= s.rng << 17
		if i := int(s.rng % uint64(len(s.t.slots))); s.t.slots[i] != 0 {
			return i
		}
	}
}
