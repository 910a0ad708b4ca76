package engine

import (
	"slices"

	"github.com/cellserver/cellserver/limiter"
)

// The most-limited keys: each shard keeps a Space-Saving summary (Metwally,
// Agrawal and El Abbadi, 2005) of the keys its limited requests were for,
// in fixed arrays, so that its memory is bounded whatever the traffic and
// an update allocates nothing. Counts decay: every TopHalfLife they halve,
// so that the summary tells who is being limited now, not last week. A key
// lives in one shard only, so the shards' summaries merge by concatenation.

const (
	// TopPerShard is how many keys each shard's summary tracks.
	TopPerShard = 8
	// TopKeyLen is how many bytes of a key the summary keeps; a longer key
	// is reported by its first TopKeyLen bytes.
	TopKeyLen = 64
	// TopHalfLife is the time, in ns, over which a key's count halves.
	TopHalfLife = 10 * int64(1e9)
)

// topEntry is one tracked key.
type topEntry struct {
	hash  uint64 // the key's hash in its shard, compared before the bytes
	count int64  // limited requests, decayed; 0: the entry is free
	err   int64  // how much count may overstate (Space-Saving's error)
	kind  limiter.Kind
	n     uint8 // bytes of key used
	long  bool  // the key was longer than TopKeyLen
	key   [TopKeyLen]byte
}

// topK is one shard's summary. Its methods need the shard's lock.
type topK struct {
	epoch   int64 // now / TopHalfLife when the counts were last decayed
	entries [TopPerShard]topEntry
}

// decayLocked halves the counts once per TopHalfLife since the last decay.
func (t *topK) decayLocked(now int64) {
	ep := now / TopHalfLife
	if ep <= t.epoch {
		return
	}
	shift := ep - t.epoch
	t.epoch = ep
	for i := range t.entries {
		e := &t.entries[i]
		if shift >= 63 {
			*e = topEntry{}
			continue
		}
		e.count >>= shift
		e.err >>= shift
		if e.count == 0 {
			*e = topEntry{}
		}
	}
}

// addLocked counts one limited request for key (hash h, kind k) at now.
func (t *topK) addLocked(key []byte, h uint64, k limiter.Kind, now int64) {
	t.decayLocked(now)
	n := min(len(key), TopKeyLen)
	low := 0
	for i := range t.entries {
		e := &t.entries[i]
		if e.count != 0 && e.hash == h && int(e.n) == n && string(e.key[:n]) == string(key[:n]) {
			e.count++
			return
		}
		if e.count < t.entries[low].count {
			low = i
		}
	}
	// Not tracked: it takes the place of the least counted (a free entry
	// counts 0), inheriting that count as its possible overstatement.
	e := &t.entries[low]
	e.err = e.count
	e.count++
	e.hash, e.kind, e.n, e.long = h, k, uint8(n), len(key) > TopKeyLen
	copy(e.key[:], key[:n])
}

// LimitedKey is one of the keys most often answered "limited" lately.
type LimitedKey struct {
	// Key is the key, or its first TopKeyLen bytes when Truncated.
	Key       []byte
	Truncated bool
	Kind      limiter.Kind
	// Count is the limited requests for the key, each weighed by how
	// recent it is (halving every TopHalfLife); it may overstate the true
	// figure by at most Error.
	Count, Error int64
}

// TopLimited returns up to n keys with the highest decayed counts of
// limited requests, highest first (equal counts by key), one shard's lock
// at a time. A key shows when it was among a shard's TopPerShard
// most-limited keys.
func (v *View) TopLimited(n int) []LimitedKey {
	now := v.e.clock.Now()
	var out []LimitedKey
	for i := range v.e.shards {
		sh := &v.e.shards[i]
		v.lock(sh)
		if t := sh.top; t != nil {
			t.decayLocked(now)
			for j := range t.entries {
				e := &t.entries[j]
				if e.count > 0 {
					out = append(out, LimitedKey{Key: slices.Clone(e.key[:e.n]), Truncated: e.long,
						Kind: e.kind, Count: e.count, Error: e.err})
				}
			}
		}
		v.unlock(sh)
	}
	slices.SortFunc(out, func(a, b LimitedKey) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return slices.Compare(a.Key, b.Key)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
