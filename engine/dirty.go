package engine

import (
	"encoding/binary"
	"runtime"

	"github.com/cellserver/cellserver/limiter"
)

// Change tracking for incremental snapshots (Config.TrackChanges).
//
// A changed key is marked by a bit of its record's head (headDirty), not
// kept in a set beside the table: the mark costs no memory at all, where
// a set of changed keys costs a map entry and a copy of the key for every
// key changed between two snapshots, which under churn of the whole
// keyspace is more than the 7 bytes per key the budget leaves (48 B per
// 17-byte CL.THROTTLE key with tracking, against 41 without). The table
// ORs the bit into every head it writes (table.dirtyBit, 0 without
// tracking), so the write path gains no branch. The price is on the
// snapshot's side: TakeDirty reads the head of every record of a shard
// that changed, a few hundred at a time under its lock; a shard with no
// change is skipped without a look at its records.
//
// A removed key leaves no record to mark, so the shard notes its name in
// a list (shard.deleted) whose memory follows the removals between two
// snapshots, not the keyspace: DEL, an over-refund that deletes a key,
// DeleteSlot, and expiry (lazy or by the sweep) all go through
// removeLocked, which notes them. Expired keys are thus removed from the
// store by the next snapshot; a restore also drops any record that has
// expired by then. Emptying a whole shard (FLUSHALL) notes one flag
// instead of every key.

// noteDeletedLocked adds key to the shard's list of removed keys.
func (s *shard) noteDeletedLocked(key []byte) {
	c := cap(s.deleted)
	s.deleted = binary.AppendUvarint(s.deleted, uint64(len(key)))
	s.deleted = append(s.deleted, key...)
	if d := cap(s.deleted) - c; d != 0 {
		s.t.mem.Account(int64(d)) // the list is keyspace memory too, for the memory limit
	}
}

// A Change is what TakeDirty reports.
type Change uint8

const (
	// Written: the key was written; the Record is its record, which may
	// have expired by now.
	Written Change = iota
	// Removed: the key was removed; only the Record's Key is set.
	Removed
	// Flushed: the shard was emptied whole (FLUSHALL). Every key of its
	// slots (ShardOf) is gone, and so is every change the same TakeDirty
	// reported before this one; the Record is empty.
	Flushed
)

// takeChunk is how many records TakeDirty looks at under the shard's lock
// before it lets go of it for a moment (tests lower it).
var takeChunk = 256

// takeBetween, when set, runs between two of TakeDirty's chunks, the lock
// not held (tests set it).
var takeBetween func(shard int)

// TakeDirty reports what changed in shard since the previous call, and
// forgets it: first, when the shard was emptied whole (FLUSHALL), that
// (Flushed); then each key removed since (Removed), then the record of
// each key written since (Written). A key removed then written again
// comes in both, the record last.
//
// The shard's lock is held for takeChunk records at a time, not for the
// whole shard: serving goes on between chunks, and a request that falls
// on the shard waits for one chunk (tens of microseconds) rather than for
// the whole take (a millisecond for 16k records; BenchmarkTakeDirtyWait
// measures it). The records are visited as SCAN visits them (scanFrom),
// so every key that is in the shard for the whole take is visited
// exactly once, however the table grows, shrinks or moves records
// between chunks. What changes between
// chunks is reported as it comes: each chunk first reports the removals
// (and a FLUSHALL) since the one before, so a key removed after its
// record was reported is reported again as removed; a key written after
// its record was visited stays marked for the next call. So each key's
// last report is its state at some instant of the take, and nothing
// changed before the take began is left out.
//
// fn runs under the shard's lock: it must copy what it keeps (r.Key and
// r.Hits alias the engine's memory), must not call the engine, and must
// do no I/O. Without Config.TrackChanges it reports nothing.
func (e *Engine) TakeDirty(shard int, fn func(r Record, c Change)) {
	sh := &e.shards[shard]
	visit := func(i int) {
		t := &sh.t
		ref := uint32(t.slots[i])
		t.arena[ref] &^= headDirty
		en := t.entryAt(i)
		r := Record{Key: t.keyOf(ref), Kind: en.kind, ExpireMs: en.expireMs, Words: en.Words}
		if en.kind == limiter.KindSlidingLog {
			r.Hits = t.logAt(i)
		}
		fn(r, Written)
	}
	sh.mu.Lock()
	changed := sh.changes != 0
	sh.changes = 0
	for from := uint64(0); sh.track; {
		sh.takeRemovedLocked(fn)
		if !changed {
			break
		}
		from, _ = sh.t.scanFrom(from, takeChunk, true, visit)
		if from >= tagEnd {
			break
		}
		sh.mu.Unlock()
		if takeBetween != nil {
			takeBetween(shard)
		}
		// A request that found the lock taken sleeps, and Unlock readies
		// it on this goroutine's processor, where it would wait for the
		// take to end, or for the lock to hand itself over (after 1 ms).
		// So yield when one waited (shard.lock notes it), and only then:
		// a yield also lets other connections onto the take's thread,
		// which on a machine with few cores costs them more than it
		// saves (bench/RESULTS.md).
		if sh.waited.Load() {
			sh.waited.Store(false)
			runtime.Gosched()
		}
		sh.mu.Lock()
	}
	sh.mu.Unlock()
}

// takeRemovedLocked reports the shard's FLUSHALL and removals noted since
// they were last taken, and forgets them. The shard's lock is held.
func (s *shard) takeRemovedLocked(fn func(r Record, c Change)) {
	if s.flushed {
		s.flushed = false
		fn(Record{}, Flushed)
	}
	for d := s.deleted; len(d) > 0; {
		n, w := binary.Uvarint(d)
		fn(Record{Key: d[w : w+int(n)]}, Removed)
		d = d[w+int(n):]
	}
	if cap(s.deleted) > 4096 {
		s.t.mem.Account(-int64(cap(s.deleted)))
		s.deleted = nil // memory follows the churn: a burst of removals does not stay
	} else {
		s.deleted = s.deleted[:0]
	}
}

// Changes returns the number of keys written or removed since the last
// TakeDirty of their shard (INFO's rdb_changes_since_last_save). It takes
// each shard's lock in turn, O(shards), unless v holds them all (Atomic).
func (v *View) Changes() int64 {
	var n int64
	for i := range v.e.shards {
		sh := &v.e.shards[i]
		v.lock(sh)
		n += sh.changes
		v.unlock(sh)
	}
	return n
}

// ShardOf returns the index of the shard that holds hash slot slot: the
// shards own the slots round-robin (slot mod Shards).
func (e *Engine) ShardOf(slot int) int { return slot & (len(e.shards) - 1) }

// Load stores r as Import does, but as unchanged since the last snapshot:
// for a restore from the store that TakeDirty feeds, so that restored keys
// are not written back.
func (e *Engine) Load(r Record) (bool, error) { return e.importRecord(r, false, false) }
