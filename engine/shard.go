package engine

import (
	"sync"
	"sync/atomic"

	"github.com/cellserver/cellserver/limiter"
)

// entry is one key's state, decoded from its table record: its kind, its
// expiry, and its algorithm's state (limiter.State: as many words as its
// kind's row of limiter.Kinds says, or a sliding log).
//
// A sliding log's hits are decoded only on demand (table.logAt), into
// memory the table reuses: Log must not be kept past the shard's lock.
type entry struct {
	kind     limiter.Kind
	expireMs int64 // Unix ms; the key is gone once now_ms > expireMs
	limiter.State
}

// shard is one lock's worth of keys. Every method ending in Locked needs
// mu held. Slot indexes returned by a method are valid until the next
// change to the shard.
type shard struct {
	mu  sync.Mutex
	t   table
	idx int // the shard's index in Engine.shards

	sweepPos int    // where the background sweep continues
	rng      uint64 // xorshift state for eviction's samples; never 0

	expired int64
	hits    int64 // commands' lookups that found their key
	misses  int64 // and that did not
	avgTTL  int64 // ms: an estimate from the keys the sweep examines
	evicted int64
	allowed [limiter.NumKinds]int64
	limited [limiter.NumKinds]int64
	kinds   [limiter.NumKinds]int64 // live keys by kind
	top     *topK                   // the most-limited keys; nil until a request is limited

	changes int64 // keys written or removed since the last TakeDirty
	// With Config.TrackChanges: the keys removed since the last TakeDirty,
	// each as its length (uvarint) then its bytes, and whether the shard
	// was emptied whole (clearLocked) since then (dirty.go).
	track   bool
	deleted []byte
	flushed bool
	// waited is set when a request found mu taken (lock), so that
	// TakeDirty, between its chunks, lets it run (dirty.go).
	waited atomic.Bool
	// feed lists the keys changed since the change feed's last drain, and
	// spare is the list the next drain swaps in; both nil with the feed
	// off (feed.go).
	feed, spare *feed
	// fed is set, under mu, when feed gets its first key (or a flush)
	// since the last drain, so that a drain of a shard with nothing listed
	// needs no lock: a drain every millisecond of 256 idle shards would
	// otherwise take 256 locks for nothing.
	fed atomic.Bool

	_ [64]byte // keep neighbouring shards' locks off one cache line
}

// getLocked returns the slot of key (hash h) and reads its entry into e
// if it exists and has not expired at nowMs, removing it if it has; slot
// -1 and a zero e: no key. (The entry is read through a pointer: copied
// out by value, it cost a visible share of a request.)
func (s *shard) getLocked(key []byte, h uint64, nowMs int64, e *entry) (int, bool) {
	i := s.t.find(key, h)
	if i < 0 {
		*e = entry{}
		return -1, false
	}
	s.t.entryInto(i, e)
	if nowMs > e.expireMs {
		s.removeLocked(i)
		s.expired++
		*e = entry{}
		return -1, false
	}
	return i, true
}

// countLookup counts a command's lookup of a key as a hit or a miss.
func (s *shard) countLookup(found bool) {
	if found {
		s.hits++
	} else {
		s.misses++
	}
}

// putLocked stores e under key (hash h). i is the key's slot from
// getLocked, or -1 when it had none. When the shard cannot take the
// record it returns ErrShardFull and changes nothing.
func (s *shard) putLocked(key []byte, h uint64, i int, e *entry) error {
	was := limiter.KindNone
	if i >= 0 {
		was = s.t.kindAt(i) // another kind than e's only when Import replaces it
	}
	if !s.t.put(i, key, h, e) {
		return ErrShardFull
	}
	s.changes++
	s.feedLocked(key, uint32(slotTag(h)>>32))
	if was != e.kind {
		if was != limiter.KindNone {
			s.kinds[was]--
		}
		s.kinds[e.kind]++
	}
	return nil
}

// removeLocked deletes the key in slot i. It reports whether the slots
// were rearranged beyond i (a shrink), so that a caller walking them must
// start again.
func (s *shard) removeLocked(i int) (reshaped bool) {
	s.kinds[s.t.kindAt(i)]--
	s.changes++
	if s.track {
		s.noteDeletedLocked(s.t.keyOf(uint32(s.t.slots[i])))
	}
	s.feedLocked(s.t.keyOf(uint32(s.t.slots[i])), uint32(s.t.slots[i]>>32))
	n := len(s.t.slots)
	s.t.removeAt(i)
	return len(s.t.slots) != n
}

// clearLocked drops every key and frees the table's arrays.
func (s *shard) clearLocked() {
	s.changes += int64(s.t.count)
	s.t.reset()
	s.sweepPos = 0
	s.kinds = [limiter.NumKinds]int64{}
	if s.track {
		s.flushed, s.deleted = true, s.deleted[:0]
	}
	if f := s.feed; f != nil {
		f.flushed, f.keys = true, f.keys[:0]
		clear(f.at)
		s.fed.Store(true)
	}
}

// lock takes s's lock for a request, noting when the request has to wait
// for it (waited). TryLock is what Lock itself tries first: a free lock
// costs nothing more.
func (s *shard) lock() {
	if !s.mu.TryLock() {
		s.waited.Store(true)
		s.mu.Lock()
	}
}

// sweepAhead is how many slots ahead of the one it examines the sweep
// starts loading a record: each key it examines is a cache miss on its
// record (for its expiry), and misses asked for ahead overlap instead of
// being waited for one by one (bench/RESULTS.md has the measurement).
const sweepAhead = 8

// sweepLocked examines up to budget keys from where the last call left
// off, removing the expired ones, and returns how many it examined and
// removed. Successive calls walk the whole table round and round. It
// examines fewer than budget keys only when it walked every slot of the
// table without finding that many: a removal that shrinks the table starts
// the walk again at the new slots' first, with all of them still to walk
// (the steps taken in the larger table would otherwise count against the
// smaller one, and end the walk before it reached the keys left). It also
// drops a large scratch log (table.releaseScratch).
func (s *shard) sweepLocked(nowMs int64, budget int) (examined, removed int) {
	s.t.releaseScratch()
	if s.t.count == 0 {
		s.sweepPos = 0
		s.avgTTL = 0
		return 0, 0
	}
	var ttlSum, live int64
	defer func() { s.sampleTTL(ttlSum, live) }()
	for steps := 0; examined < budget && steps < len(s.t.slots); {
		i := s.sweepPos % len(s.t.slots)
		s.t.prefetchRecordAt((i + sweepAhead) % len(s.t.slots))
		if s.t.slots[i] == 0 {
			s.sweepPos = i + 1
			steps++
			continue
		}
		examined++
		if exp := s.t.entryAt(i).expireMs; nowMs <= exp {
			ttlSum += exp - nowMs
			live++
			s.sweepPos = i + 1
			steps++
			continue
		}
		s.expired++
		removed++
		if s.removeLocked(i) || s.t.count == 0 {
			s.sweepPos, steps = 0, 0
			if s.t.count == 0 {
				break
			}
		}
	}
	return examined, removed
}

// sampleTTL folds the remaining lives of live keys the sweep examined
// (sum ms over n keys) into the shard's average, as Redis estimates
// avg_ttl: the first sample sets it, each later one weighs 1/50.
func (s *shard) sampleTTL(sum, n int64) {
	if n == 0 {
		return
	}
	avg := sum / n
	if s.avgTTL == 0 {
		s.avgTTL = avg
	} else {
		s.avgTTL = s.avgTTL/50*49 + avg/50
	}
}
