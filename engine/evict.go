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
	max     atomic.Int64  // bytes; 0: none
	policy  atomic.Uint32 // a Policy
	buffers atomic.Int64  // the server's buffers (AddBufferMemory)
	backlog atomic.Int64  // the replication backlog (AddBacklogMemory)
}

// SetMemoryLimit sets the most memory the engine lets new keys take, in
// bytes (0: no limit), counted as UsedMemory counts it, and what it does
// at the limit.
func (e *Engine) SetMemoryLimit(max int64, p Policy) {
	e.limit.policy.Store(uint32(p))
	e.limit.max.Store(max)
}

// AddBufferMemory adds n (negative: subtracts) to the bytes the server
// holds in buffers whose size its settings bound (connections' read and
// reply buffers, MULTI queues), for the memory limit. A connection adds
// the change whenever its buffers change size, which a steady one's do
// not: the count is current, at no cost per request.
func (e *Engine) AddBufferMemory(n int64) { e.limit.buffers.Add(n) }

// BufferMemory returns the bytes AddBufferMemory has added in all.
func (e *Engine) BufferMemory() int64 { return e.limit.buffers.Load() }

// AddBacklogMemory adds n (negative: subtracts) to the bytes the
// replication backlog holds, for the memory limit: package replication
// adds its ring when it allocates it and takes it off when it frees it.
func (e *Engine) AddBacklogMemory(n int64) { e.limit.backlog.Add(n) }

// BacklogMemory returns the bytes AddBacklogMemory has added in all (INFO
// memory's mem_replication_backlog).
func (e *Engine) BacklogMemory() int64 { return e.limit.backlog.Load() }

// KeyspaceBytes returns the bytes the keyspace holds: every shard's table
// arrays (index slots, record arenas, on the Go heap or mapped outside
// it), the sliding-log scratch, and the lists of removed keys kept for
// the next snapshot (dirty.go). It counts what the tables hold, never
// the Go heap's garbage, and takes no lock: the count moves when a table
// grows, shrinks or compacts, not on every request.
func (e *Engine) KeyspaceBytes() int64 { return e.mem.Held() }

// UsedMemory returns the memory the limit is checked against, which INFO
// reports as used_memory: KeyspaceBytes plus BufferMemory plus
// BacklogMemory.
func (e *Engine) UsedMemory() int64 {
	return e.mem.Held() + e.limit.buffers.Load() + e.limit.backlog.Load()
}

// overLimit reports whether the engine is at or past its memory limit.
func (e *Engine) overLimit() bool {
	max := e.limit.max.Load()
	return max > 0 && e.UsedMemory() >= max
}

// makeRoomLocked is called before a new record of need bytes is stored in
// s while the engine is past its memory limit. It makes the record fit s's
// table without the table mapping more memory: under NoEviction it
// returns ErrOOM; otherwise it evicts keys of s, chosen by the policy,
// until the arena's room (its capacity less its live records) takes need
// bytes and the slots one more key without a rehash, and returns ErrOOM,
// evicting nothing, if even the whole arena could not hold the record.
// So at the limit new keys fill the room the shard's arrays have left,
// then each takes the place of victims. Eviction works in the new key's
// shard, whose lock is held: keys are spread evenly over the shards by
// their hash slots, so that keeps every shard near its share, and no
// other lock is taken.
//
// When the arena's room is not in one piece at its end (new keys seldom
// fit the victims' dead records exactly, their sizes differ), it compacts
// the arena within its capacity; so that it compacts seldom, it first
// evicts until the room is a sixteenth of the live bytes or more, room for
// that many new keys to come. Should the evictions empty s, its table
// gives its arrays back (reset), and the record goes into new ones of
// about its size.
func (s *shard) makeRoomLocked(p Policy, need int) error {
	if p == NoEviction {
		return ErrOOM
	}
	if cap(s.t.arena) < need {
		return ErrOOM // evicting every key of s would not make room: evict none
	}
	room := func() int { return cap(s.t.arena) - s.t.live() }
	for room() < need || !s.t.slotFree() {
		if s.t.count == 0 {
			return nil // reset: the arrays went back
		}
		s.evictOneLocked(p)
	}
	if !s.t.arenaRoom(need) {
		for s.t.count > 0 && room() < max(need, s.t.live()/16) {
			s.evictOneLocked(p)
		}
		if s.t.count > 0 {
			s.t.compactInto(cap(s.t.arena))
		}
	}
	return nil
}

// evictOneLocked evicts a key of s (not empty) chosen by p.
func (s *shard) evictOneLocked(p Policy) {
	s.removeLocked(s.victimLocked(p))
	s.evicted++
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
