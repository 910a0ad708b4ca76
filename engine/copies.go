package engine

import (
	"github.com/cellserver/cellserver/internal/prefetch"
	"github.com/cellserver/cellserver/limiter"
)

// Copies of another node's keys (package cluster's replicas): a cluster
// member holds, beside the slots it serves, copies of slots other members
// serve, streamed to it a batch at a time. It does not stream those on
// itself, so storing them lists nothing in its change feed, and a batch
// takes each shard's lock once for a run of records in that shard rather
// than once per record.

// CopyChange is one change of a copy: a record to store, or, with Gone,
// a key to remove (only the Record's Key set).
type CopyChange struct {
	Record
	Gone bool
}

// ApplyCopies applies changes in order, as Import and Del would, without
// listing them in the change feed. A record that has expired is dropped,
// as Import drops it. It stops at the first record Import would refuse
// (ErrBadRecord, ErrShardFull), the changes before it applied.
//
// The keys of a copy are cold (nothing has read them lately, unlike a
// client's, which the server reads ahead of its calls), so within a run
// of changes in one shard it prefetches each key's index slot copyAhead
// changes ahead, and its record half as far ahead, as the server's
// read-ahead does (prefetch.go): a lookup then mostly finds its lines
// loaded.
func (v *View) ApplyCopies(changes []CopyChange) error {
	hashes := make([]uint64, len(changes))
	for i := range changes {
		c := &changes[i]
		if !c.Gone && (!c.Kind.Valid() || limiter.Kinds[c.Kind].Log != (len(c.Hits) > 0)) {
			changes = changes[:i] // those before it apply
			hashes = hashes[:i]
			if err := v.applyCopies(changes, hashes); err != nil {
				return err
			}
			return ErrBadRecord
		}
		hashes[i] = v.e.hash(c.Key)
	}
	return v.applyCopies(changes, hashes)
}

// copyAhead is how many changes ahead ApplyCopies prefetches a key's
// index slot (and half as many its record).
const copyAhead = 8

func (v *View) applyCopies(changes []CopyChange, hashes []uint64) error {
	mask := len(v.e.shards) - 1
	for a := 0; a < len(changes); {
		si := Slot(changes[a].Key) & mask
		b := a + 1
		for b < len(changes) && Slot(changes[b].Key)&mask == si {
			b++
		}
		sh := &v.e.shards[si]
		v.lock(sh)
		feed := sh.feed
		sh.feed = nil
		nowMs := unixMs(v.e.clock.Now())
		t := &sh.t
		var err error
		for i := a; i < b+copyAhead && err == nil; i++ {
			if i < b && len(t.slots) > 0 {
				prefetch.Load(&t.slots[t.home(slotTag(hashes[i]))])
			}
			if k := i - copyAhead/2; k >= a && k < b {
				t.prefetchRecord(slotTag(hashes[k]))
			}
			if k := i - copyAhead; k >= a {
				err = sh.applyCopyLocked(&changes[k], hashes[k], nowMs)
			}
		}
		sh.feed = feed
		v.unlock(sh)
		if err != nil {
			return err
		}
		a = b
	}
	return nil
}

// applyCopyLocked is one change of ApplyCopies, under the shard's lock.
func (s *shard) applyCopyLocked(c *CopyChange, h uint64, nowMs int64) error {
	var cur entry
	i, found := s.getLocked(c.Key, h, nowMs, &cur)
	if c.Gone || nowMs > c.ExpireMs {
		if found {
			s.removeLocked(i)
		}
		return nil
	}
	e := entry{kind: c.Kind, expireMs: c.ExpireMs, State: limiter.State{Words: c.Words, Log: c.Hits}}
	return s.putLocked(c.Key, h, i, &e)
}
