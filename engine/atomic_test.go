package engine

import "testing"

// AtomicKeys holds the shards of its keys, in order, and only those: a
// call through tx on a key of another shard takes that shard's lock for
// the call.
func TestAtomicKeysLocksOnlyTheKeysShards(t *testing.T) {
	e, _ := newTestEngine(t, 16)
	a, b := []byte("a"), []byte("b")
	if e.shardFor(a) == e.shardFor(b) {
		t.Fatal("pick keys of two shards")
	}
	e.AtomicKeys([][]byte{a, a}, false, func(tx *View) {
		if e.shardFor(a).mu.TryLock() {
			t.Error("the key's shard is not held")
		}
		if !e.shardFor(b).mu.TryLock() {
			t.Error("another shard is held")
		} else {
			e.shardFor(b).mu.Unlock()
		}
		if _, err := tx.fixedWindow(a, fwReq(60)); err != nil {
			t.Error(err)
		}
		if _, err := tx.fixedWindow(b, fwReq(60)); err != nil { // takes b's lock for the call
			t.Error(err)
		}
	})
	for i := range e.shards {
		if !e.shards[i].mu.TryLock() {
			t.Fatalf("shard %d still held", i)
		}
		e.shards[i].mu.Unlock()
	}
	e.AtomicKeys(nil, true, func(*View) {
		if e.shardFor(b).mu.TryLock() {
			t.Error("all: a shard is not held")
		}
	})
}
