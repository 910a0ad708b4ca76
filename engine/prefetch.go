package engine

import (
	"github.com/cellserver/cellserver/internal/ahead"
	"github.com/cellserver/cellserver/internal/prefetch"
)

// The engine's side of reading ahead (see package internal/ahead): a
// locator that works out where a key lives and prefetches its index slot
// and record, and a View that takes the located key instead of hashing it
// again. Prefetch and PrefetchRecords take the shard's lock for a few
// instructions, so they are race-free; a prefetch does not wait for its
// line (nor does the lock wait for it), and it never faults.

// Ahead returns the engine's locator for a server that reads requests
// ahead. It is machinery for the server (its types are internal to this
// module), not API for users.
func (e *Engine) Ahead() ahead.Locator { return locator{e} }

type locator struct{ e *Engine }

var _ ahead.Locator = locator{}

func (l locator) Locate(key []byte) ahead.Hint {
	slot := Slot(key)
	return ahead.New(l.e.id, slot&(len(l.e.shards)-1), l.e.hash(key), key)
}

// shardOfHint returns h's shard, or nil when h is the zero Hint or
// another engine's.
func (e *Engine) shardOfHint(h *ahead.Hint) *shard {
	if h.Owner != e.id {
		return nil
	}
	return &e.shards[h.Shard]
}

func (l locator) Prefetch(hs []ahead.Hint) { l.prefetch(hs, false) }

func (l locator) PrefetchRecords(hs []ahead.Hint) { l.prefetch(hs, true) }

// prefetch starts loading, for each of hs, the index slot where its key
// would be found, or with records its record.
func (l locator) prefetch(hs []ahead.Hint, records bool) {
	for i := range hs {
		h := &hs[i]
		s := l.e.shardOfHint(h)
		if s == nil {
			continue
		}
		s.lock()
		switch t := &s.t; {
		case records:
			t.prefetchRecord(slotTag(h.Hash))
		case len(t.slots) > 0:
			prefetch.Load(&t.slots[t.home(slotTag(h.Hash))])
		}
		s.mu.Unlock()
	}
}

// prefetchRecord starts loading the record of the key whose slot tag is
// tag, when its home slot or the next holds it: most probes end there.
// The table's lock is held.
func (t *table) prefetchRecord(tag uint64) {
	if len(t.slots) == 0 {
		return
	}
	i := t.home(tag)
	for range 2 {
		sl := t.slots[i]
		if sl == 0 {
			return
		}
		if sl&^refMask == tag {
			if ref := int(uint32(sl)); ref < len(t.arena) {
				prefetch.Load(&t.arena[ref])
				// A short key's record may cross into the next line.
				prefetch.Load(&t.arena[min(ref+31, len(t.arena)-1)])
			}
			return
		}
		i = t.next(i)
	}
}

// prefetchRecordAt starts loading the record of slot i, if i is a full
// slot. The table's lock is held.
func (t *table) prefetchRecordAt(i int) {
	if i < len(t.slots) {
		if sl := t.slots[i]; sl != 0 && int(uint32(sl)) < len(t.arena) {
			prefetch.Load(&t.arena[uint32(sl)])
		}
	}
}
