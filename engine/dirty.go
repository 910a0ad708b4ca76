package engine

import "encoding/binary"

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
// that changed, under its lock; a shard with no change is skipped without
// a look at its records.
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
	s.deleted = binary.AppendUvarint(s.deleted, uint64(len(key)))
	s.deleted = append(s.deleted, key...)
}

// TakeDirty copies out what changed in shard since the previous call, and
// forgets it: the shard's lock is held for the copy only. It returns
// flushed true when the shard was emptied whole (FLUSHALL) in that time:
// a store must then drop every key of the shard's slots (ShardOf) before
// it applies the changes fn is given. fn is called, in this order, with
// each key removed since (deleted true, only r.Key set), then with the
// record of each key written since (deleted false), which may have
// expired by now. A key removed then written again comes in both, the
// record last. fn runs under the shard's lock: it must copy what it keeps
// (r.Key and r.Hits alias the engine's memory), must not call the engine,
// and must do no I/O. Without Config.TrackChanges it reports nothing.
func (e *Engine) TakeDirty(shard int, fn func(r Record, deleted bool)) (flushed bool) {
	sh := &e.shards[shard]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	changed := sh.changes != 0
	sh.changes = 0
	if !sh.track {
		return false
	}
	flushed, sh.flushed = sh.flushed, false
	for d := sh.deleted; len(d) > 0; {
		n, w := binary.Uvarint(d)
		fn(Record{Key: d[w : w+int(n)]}, true)
		d = d[w+int(n):]
	}
	if cap(sh.deleted) > 4096 {
		sh.deleted = nil // memory follows the churn: a burst of removals does not stay
	} else {
		sh.deleted = sh.deleted[:0]
	}
	if !changed {
		return flushed
	}
	t := &sh.t
	for i, slot := range t.slots {
		if slot == 0 {
			continue
		}
		ref := uint32(slot)
		if t.arena[ref]&headDirty == 0 {
			continue
		}
		t.arena[ref] &^= headDirty
		en := t.entryAt(i)
		r := Record{Key: t.keyOf(ref), Kind: en.kind, ExpireMs: en.expireMs, A: en.a, B: en.b, C: en.c}
		if en.kind == KindSlidingLog {
			r.Hits = t.logAt(i)
		}
		fn(r, false)
	}
	return flushed
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
