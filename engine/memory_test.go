package engine

import (
	"fmt"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// KeyspaceBytes, what the memory limit counts of the keyspace, is what the
// tables hold, counted as they change (not by a walk, and not the heap's
// garbage): it agrees with the tables' own sizes after inserts, a sliding
// log's scratch, removals noted for a snapshot, and a flush.
func TestKeyspaceBytesFollowsTheTables(t *testing.T) {
	clock := NewManualClock(now0)
	e, err := New(Config{Shards: 4, Clock: clock, TrackChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	check := func(what string) {
		t.Helper()
		var deleted int64 // the lists of removed keys, kept with their capacity
		for i := range e.shards {
			deleted += int64(cap(e.shards[i].deleted))
		}
		if got, want := e.KeyspaceBytes(), e.Stats().TableBytes+deleted; got != want {
			t.Fatalf("%s: KeyspaceBytes %d, tables %d + removed keys %d", what, got, want-deleted, deleted)
		}
		if e.UsedMemory() != e.KeyspaceBytes()+e.BufferMemory() {
			t.Fatalf("%s: UsedMemory %d is not KeyspaceBytes %d + BufferMemory %d", what, e.UsedMemory(), e.KeyspaceBytes(), e.BufferMemory())
		}
	}
	check("empty")
	for i := range 20000 {
		e.throttle(fmt.Appendf(nil, "key:%d", i), readmeParams)
	}
	for range 1000 { // a long sliding log: its scratch grows past what the sweep keeps
		e.slidingWindow([]byte("log"), limiter.SlidingWindowRequest{Limit: 5000, Window: 60, Cost: 1, Exact: true})
		clock.Advance(1e6)
	}
	check("20000 keys and a log")
	e.AddBufferMemory(1 << 20)
	check("with buffers")
	e.AddBufferMemory(-1 << 20)
	var deleted int64
	for i := range 100 {
		k := fmt.Appendf(nil, "key:%d", i)
		e.Del(k, nil)
		deleted += int64(1 + len(k))
	}
	if got := e.KeyspaceBytes() - e.Stats().TableBytes; got < deleted {
		t.Fatalf("the removed keys' list (%d bytes of names) counts %d bytes", deleted, got)
	}
	takeAll := func() {
		for i := range e.Shards() {
			e.TakeDirty(i, func(Record, Change) {})
		}
	}
	check("after removals")
	takeAll()
	check("after a snapshot took the changes")
	e.Flush()
	takeAll()
	check("after FLUSHALL")
	if st := e.Stats(); st.TableBytes != 0 || e.KeyspaceBytes() > 4*4096 {
		t.Fatalf("after FLUSHALL: tables %d, keyspace %d bytes", st.TableBytes, e.KeyspaceBytes())
	}
}
