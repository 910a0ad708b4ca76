package engine

import "sync"

// entry is one key's state. Which fields mean what depends on kind:
//
//	KindGCRA           a = TAT (ns)
//	KindTokenBucket    a = FullAt, b = Rem
//	KindSlidingWindow  a = Start, b = Prev, c = Curr
//	KindSlidingLog     log
//	KindFixedWindow    a = Start, b = Count
type entry struct {
	kind     Kind
	expireMs int64 // Unix ms; the key is gone once now_ms > expireMs
	a, b, c  int64
	log      []Hit
}

// shard is one lock's worth of keys. Every method ending in Locked needs
// mu held.
type shard struct {
	mu   sync.Mutex
	m    map[string]entry
	peak int // the largest len(m) since m was last rebuilt

	expired int64
	allowed [KindFixedWindow + 1]int64
	limited [KindFixedWindow + 1]int64
	kinds   [KindFixedWindow + 1]int64 // live keys by kind

	_ [64]byte // keep neighbouring shards' locks off one cache line
}

// getLocked returns key's entry if it exists and has not expired at nowMs,
// removing it if it has.
func (s *shard) getLocked(key []byte, nowMs int64) (entry, bool) {
	e, ok := s.m[string(key)]
	if !ok {
		return entry{}, false
	}
	if nowMs > e.expireMs {
		s.removeLocked(string(key), e.kind)
		s.expired++
		return entry{}, false
	}
	return e, true
}

// putLocked stores e under key; existed says whether key was live before
// (so that kind counts stay right when a key changes kind via import).
func (s *shard) putLocked(key []byte, e entry, old Kind) {
	if old != KindNone {
		s.kinds[old]--
	}
	s.m[string(key)] = e
	s.kinds[e.kind]++
	if n := len(s.m); n > s.peak {
		s.peak = n
	}
}

// removeLocked deletes key, which holds kind, and shrinks the map when it
// has become mostly empty: Go maps never give memory back on delete, so a
// map that fell below a quarter of its peak is rebuilt at its live size.
// The rebuild copies only live entries, at most a quarter of the peak. It
// reports whether it rebuilt the map.
func (s *shard) removeLocked(key string, kind Kind) (rebuilt bool) {
	delete(s.m, key)
	s.kinds[kind]--
	if s.peak >= 64 && len(s.m) < s.peak/4 {
		m := make(map[string]entry, len(s.m))
		for k, v := range s.m {
			m[k] = v
		}
		s.m = m
		s.peak = len(m)
		return true
	}
	return false
}

// clearLocked drops every key.
func (s *shard) clearLocked() {
	s.m = make(map[string]entry)
	s.peak = 0
	s.kinds = [KindFixedWindow + 1]int64{}
}

// reapLocked removes every expired key of the shard.
func (s *shard) reapLocked(nowMs int64) {
	for k, e := range s.m { // removeLocked may swap s.m; range keeps the old map
		if nowMs > e.expireMs {
			s.removeLocked(k, e.kind)
			s.expired++
		}
	}
}

// sweepLocked examines up to budget entries from a random place in the
// map and removes the expired ones; it returns how many it examined and
// removed. Go's map iteration starts at a random position, so successive
// calls sample the shard like Redis's active expiry does.
func (s *shard) sweepLocked(nowMs int64, budget int) (examined, removed int) {
	for k, e := range s.m {
		if examined == budget {
			break
		}
		examined++
		if nowMs > e.expireMs {
			rebuilt := s.removeLocked(k, e.kind)
			s.expired++
			removed++
			if rebuilt {
				break // continue on the new map in the next step
			}
		}
	}
	return examined, removed
}
