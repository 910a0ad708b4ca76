package engine

import (
	"encoding/binary"
	"runtime"

	"github.com/cellserver/cellserver/internal/prefetch"
	"github.com/cellserver/cellserver/limiter"
)

// The change feed: a second consumer of changes, beside TakeDirty's, for
// replication (package replication).
//
// TakeDirty finds changed keys by reading the head of every record of a
// changed shard: right for a snapshot a second or more apart, too dear
// for a consumer that drains every millisecond (a million keys read a
// thousand times a second is a core). The feed instead lists the keys
// changed since its last drain, per shard, so a drain costs what changed,
// not the keyspace. A key goes on the list when it changes and is not on
// it already: a small map from the key's slot tag (the top 32 bits of its
// hash, which the table keeps anyway) to where the key sits in the list
// says so, the key's bytes compared to rule out a collision of tags (a
// colliding key is simply listed too: listing a key twice ships it twice,
// which is harmless). That is the coalescing: a key hit a thousand times
// between two drains is listed, and shipped, once. A removal is listed
// the same way: the drain reads each listed key's current state, which
// says whether it is there or gone. Emptying the whole shard (FLUSHALL)
// sets a flag and drops the list.
//
// With no consumer (the feed off, the default) a shard's feed is nil and
// the write path pays one predictable branch. With one, a write pays a
// map lookup on a 4-byte key, and an insertion once per key per drain;
// the map and the list are reused from drain to drain (two of each,
// swapped), so the steady state allocates nothing.

// feed is one shard's list of keys changed since the last drain.
type feed struct {
	keys    []byte           // each listed key: its length (uvarint), then its bytes
	at      map[uint32]int32 // slot tag → offset in keys of the key listed last with that tag
	flushed bool             // the shard was emptied whole since the last drain

	// DrainFeed's scratch: a chunk's keys (aliasing keys) and hashes.
	scratchKeys [][]byte
	scratchHash []uint64
}

func newFeed() *feed { return &feed{at: make(map[uint32]int32)} }

// noteLocked lists key (slot tag tag) as changed unless it is already.
func (f *feed) noteLocked(key []byte, tag uint32) {
	if off, ok := f.at[tag]; ok {
		n, w := binary.Uvarint(f.keys[off:])
		if start := int(off) + w; string(f.keys[start:start+int(n)]) == string(key) {
			return
		}
	}
	f.at[tag] = int32(len(f.keys))
	f.keys = binary.AppendUvarint(f.keys, uint64(len(key)))
	f.keys = append(f.keys, key...)
}

// feedLocked notes key, whose slot tag is tag (the top half of its table
// slot, slotTag), as changed in the shard's feed, if on.
func (s *shard) feedLocked(key []byte, tag uint32) {
	if s.feed != nil {
		if len(s.feed.keys) == 0 {
			s.fed.Store(true)
		}
		s.feed.noteLocked(key, tag)
	}
}

// SetFeed turns the change feed on or off. Turned on, every key written
// or removed from then on is listed until a DrainFeed of its shard
// reports it; turned off, the lists are dropped. It takes each shard's
// lock in turn.
func (e *Engine) SetFeed(on bool) {
	for i := range e.shards {
		sh := &e.shards[i]
		sh.mu.Lock()
		switch {
		case on && sh.feed == nil:
			sh.feed, sh.spare = newFeed(), newFeed()
		case !on:
			sh.feed, sh.spare = nil, nil
		}
		sh.mu.Unlock()
	}
}

// FeedOn reports whether the change feed is on (SetFeed). It reads the
// last shard, which SetFeed reaches last: true only once every shard
// lists its writes. (It read the first, so a key written as soon as it
// said true could land in a shard not yet on, and never be listed.)
func (e *Engine) FeedOn() bool {
	sh := &e.shards[len(e.shards)-1]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.feed != nil
}

// feedChunk is how many listed keys DrainFeed reads under one hold of the
// shard's lock.
const feedChunk = 256

// feedAhead is how many keys ahead DrainFeed prefetches a key's index
// slot (and half as many its record).
const feedAhead = 8

// DrainFeed reports what changed in shard since its previous drain and
// forgets it: first Flushed, when the shard was emptied whole; then, for
// each key listed, its current record (Written) or, when it is gone or
// has expired, its removal (Removed, only the Record's Key set). Each
// report is the key's state at the instant the drain read it, after the
// change that listed it; a key changed again after its listing was taken
// is listed anew, for the next drain. The lock is held for the swap of
// the lists, then for feedChunk keys at a time.
//
// fn runs under the shard's lock: it must copy what it keeps (the
// Record aliases the engine's memory), must not call the engine, and must
// do no I/O. Drains of one shard must not overlap (one goroutine drains).
// With the feed off it reports nothing.
func (e *Engine) DrainFeed(shard int, fn func(r Record, c Change)) {
	sh := &e.shards[shard]
	if !sh.fed.Load() {
		return // nothing listed (set under the lock with the first key)
	}
	sh.mu.Lock()
	sh.fed.Store(false)
	f := sh.feed
	if f == nil || len(f.keys) == 0 && !f.flushed {
		sh.mu.Unlock()
		return
	}
	sh.feed, sh.spare = sh.spare, f // writes from now on go to the other list
	if f.flushed {
		fn(Record{}, Flushed)
	}
	nowMs := unixMs(e.clock.Now())
	keys := f.keys
	// The listed keys are read a chunk at a time; within a chunk each
	// key's index slot is prefetched feedAhead keys ahead and its record
	// half as far, as the server's read-ahead does (prefetch.go): a key
	// written a millisecond ago may be out of the cache by now.
	ks, hs := f.scratchKeys[:0], f.scratchHash[:0]
	for len(keys) > 0 {
		ks, hs = ks[:0], hs[:0]
		for len(keys) > 0 && len(ks) < feedChunk {
			l, w := binary.Uvarint(keys)
			key := keys[w : w+int(l)]
			keys = keys[w+int(l):]
			ks = append(ks, key)
			hs = append(hs, e.hash(key))
		}
		t := &sh.t
		for i := 0; i < len(ks)+feedAhead; i++ {
			if i < len(ks) && len(t.slots) > 0 {
				prefetch.Load(&t.slots[t.home(slotTag(hs[i]))])
			}
			if k := i - feedAhead/2; k >= 0 && k < len(ks) {
				t.prefetchRecord(slotTag(hs[k]))
			}
			k := i - feedAhead
			if k < 0 {
				continue
			}
			key := ks[k]
			j := t.find(key, hs[k])
			if j < 0 {
				fn(Record{Key: key}, Removed)
				continue
			}
			en := t.entryAt(j)
			if nowMs > en.expireMs {
				fn(Record{Key: key}, Removed)
				continue
			}
			r := Record{Key: key, Kind: en.kind, ExpireMs: en.expireMs, Words: en.Words}
			if r.Kind == limiter.KindSlidingLog {
				r.Hits = t.logAt(j)
			}
			fn(r, Written)
		}
		if len(keys) > 0 {
			sh.mu.Unlock()
			if sh.waited.Load() {
				sh.waited.Store(false)
				runtime.Gosched()
			}
			sh.mu.Lock()
			nowMs = unixMs(e.clock.Now())
		}
	}
	clear(ks[:cap(ks)]) // no hold on a list dropped below
	f.scratchKeys, f.scratchHash = ks[:0], hs[:0]
	// The drained list becomes the spare, emptied; one grown large by a
	// burst is dropped, so that memory follows the churn.
	if f == sh.spare {
		f.flushed = false
		if cap(f.keys) > 1<<20 {
			f.keys, f.at = nil, make(map[uint32]int32)
		} else {
			f.keys = f.keys[:0]
			clear(f.at)
		}
	}
	sh.mu.Unlock()
}

// CopyShard calls fn with the record of each live key of shard, a chunk
// of takeChunk records at a time under the shard's lock, letting go of
// it between chunks (so a request waits for one chunk at most); after
// each chunk, the lock not held, it calls between, which may do I/O and
// return false to stop. A key in the shard for the whole copy is passed
// exactly once (SCAN's cursor); one written or removed meanwhile may or
// may not be. fn runs under the lock: it must copy what it keeps and must
// not call the engine.
func (e *Engine) CopyShard(shard int, fn func(r Record), between func() bool) {
	sh := &e.shards[shard]
	for from := uint64(0); from < tagEnd; {
		sh.mu.Lock()
		nowMs := unixMs(e.clock.Now())
		from, _ = sh.t.scanFrom(from, takeChunk, false, func(i int) {
			en := sh.t.entryAt(i)
			if nowMs > en.expireMs {
				return
			}
			r := Record{Key: sh.t.keyOf(uint32(sh.t.slots[i])), Kind: en.kind, ExpireMs: en.expireMs, Words: en.Words}
			if en.kind == limiter.KindSlidingLog {
				r.Hits = sh.t.logAt(i)
			}
			fn(r)
		})
		sh.mu.Unlock()
		if between != nil && !between() {
			return
		}
	}
}

// FlushShard removes every key of shard i of an engine of n shards: this
// engine's shard when it has n shards, else every key whose hash slot
// maps to that shard there (slot mod n = i), a slot at a time. It is how
// a replica applies a primary's FLUSHALL of one shard.
func (v *View) FlushShard(i, n int) {
	if n == len(v.e.shards) && i >= 0 && i < n {
		sh := &v.e.shards[i]
		v.lock(sh)
		sh.clearLocked()
		v.unlock(sh)
		return
	}
	if n <= 0 || i < 0 || i >= n {
		return
	}
	for slot := i; slot < SlotCount; slot += n {
		v.DeleteSlot(slot)
	}
}
