package persist

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/manual"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func TestSnapshotIsIncremental(t *testing.T) { bothWays(t, testSnapshotIsIncremental) }

func testSnapshotIsIncremental(t *testing.T) {
	fs, s, e := saved(t, 10)
	e.Del([]byte("user:000000000003"), nil)
	fill(t, e, 1) // user:000000000000 and the other kinds change again
	st, err := s.Snapshot(e, saveTime.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st.Generation != 2 || st.Written != 5 || st.Deleted != 1 {
		t.Fatalf("stats = %+v, want generation 2, 5 written, 1 deleted", st)
	}
	st, err = s.Snapshot(e, saveTime.Add(2*time.Second))
	if err != nil || st.Written != 0 || st.Deleted != 0 {
		t.Fatalf("third snapshot = %+v, %v; want nothing written", st, err)
	}
	s.Close()
	restoredAs(t, fs, now0, e)
}

func TestSnapshotAfterFlush(t *testing.T) { bothWays(t, testSnapshotAfterFlush) }

func testSnapshotAfterFlush(t *testing.T) {
	fs, s, e := saved(t, 50)
	e.Flush()
	if _, err := e.Apply([]byte("after"), limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 1}.Request(), nil); err != nil {
		t.Fatal(err)
	}
	st, err := s.Snapshot(e, saveTime)
	if err != nil || st.Flushed != 4 || st.Written != 1 {
		t.Fatalf("snapshot = %+v, %v; want 4 shards flushed, 1 written", st, err)
	}
	s.Close()
	if _, rst := restoredAs(t, fs, now0, e); rst.Loaded != 1 {
		t.Fatalf("restore = %+v, want 1 key", rst)
	}
}

// midFlush is a Source whose every take meets a FLUSHALL halfway: it
// reports its engine's changes, then the flush, then after's changes.
type midFlush struct {
	*engine.Engine
	after *engine.Engine
}

func (m midFlush) TakeDirty(shard int, fn func(r engine.Record, c engine.Change)) {
	m.Engine.TakeDirty(shard, fn)
	fn(engine.Record{}, engine.Flushed)
	m.after.TakeDirty(shard, fn)
}

func TestSnapshotFlushMidTake(t *testing.T) { bothWays(t, testSnapshotFlushMidTake) }

// A FLUSHALL that a take meets halfway voids what the take brought before
// it, and what earlier snapshots stored: the store holds what came after.
func testSnapshotFlushMidTake(t *testing.T) {
	fs, s, e := saved(t, 50)
	fill(t, e, 50) // changed again: taken before the flush
	after, _ := newEngine(t, now0)
	if _, err := after.Apply([]byte("after"), limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 1}.Request(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(midFlush{e, after}, saveTime); err != nil {
		t.Fatal(err)
	}
	s.Close()
	restoredAs(t, fs, now0, after)
}

// TestSnapshotWriteErrorKeepsChanges injects write errors into one
// snapshot: it fails, the store keeps its previous snapshot, and the next
// snapshot writes the failed one's changes too.
func TestSnapshotWriteErrorKeepsChanges(t *testing.T) {
	bothWays(t, testSnapshotWriteErrorKeepsChanges)
}

func testSnapshotWriteErrorKeepsChanges(t *testing.T) {
	mem := vfs.NewMem()
	failing := failingWrites()
	s := openStore(t, errorfs.Wrap(mem, failing))
	e, _ := newEngine(t, now0)
	fill(t, e, 10)
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	// A table ingested over the memtable is flushed in the background:
	// wait for that flush, so that the failures below hit the snapshot
	// (a background flush that fails is TestBackgroundFailureReopens).
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	e.Del([]byte("user:000000000001"), nil)
	fill(t, e, 20)
	failing.On()
	if _, err := s.Snapshot(e, saveTime.Add(time.Second)); err == nil || !strings.Contains(err.Error(), "injected error") {
		t.Fatalf("Snapshot with failing writes = %v, want the injected error", err)
	}
	if got, want := s.Pending(), 24; got != want { // 20 keys and every kind's, the deleted key's delete and put one change
		t.Fatalf("Pending = %d, want %d", got, want)
	}
	if gen, _ := s.LastSave(); gen != 1 {
		t.Fatalf("generation after a failed snapshot = %d, want 1", gen)
	}
	if _, err := s.Snapshot(e, saveTime.Add(2*time.Second)); err == nil {
		t.Fatal("Snapshot still failing = nil error")
	}
	failing.Off()
	st, err := s.Snapshot(e, saveTime.Add(3*time.Second))
	if err != nil {
		t.Fatalf("Snapshot after the disk recovered: %v", err)
	}
	// The deleted key was written again: its put, the last op, is what
	// is written.
	if st.Generation != 2 || st.Written != 24 || st.Deleted != 0 {
		t.Fatalf("stats = %+v, want generation 2, 24 written, 0 deleted", st)
	}
	s.Close()
	restoredAs(t, mem, now0, e)
}

// A snapshot's changes wait for the commit outside the Go heap (arena):
// writing 100k changed keys allocates 1.8 bytes a key on the heap, where
// the sorted parts on the heap made it 66.
func TestSnapshotChangesOffHeap(t *testing.T) {
	if !manual.Enabled {
		t.Skip("this build keeps every array on the Go heap (internal/manual)")
	}
	if raceBuild {
		t.Skip("the race detector empties sync.Pool at random (race_test.go)")
	}
	s, err := Open(t.TempDir(), Options{}) // on disk: a memory filesystem's files are on the heap
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clock := engine.NewManualClock(now0)
	// The server's shard count: a take's scratch (part, refs) is reused
	// from shard to shard, and a few thousand changes a shard keep it small.
	e, err := engine.New(engine.Config{Shards: engine.DefaultShards, Clock: clock, TrackChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const n = 100_000
	fill(t, e, n)
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	_ = clock.Advance(int64(time.Second))
	fill(t, e, n) // every key changed again
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, err := s.Snapshot(e, saveTime.Add(time.Second))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if st.Written < n {
		t.Fatalf("%d keys written, want %d at least", st.Written, n)
	}
	if perKey := float64(after.TotalAlloc-before.TotalAlloc) / float64(st.Written); perKey > 8 {
		t.Fatalf("the snapshot allocated %.1f bytes a key on the Go heap, want 8 at most", perKey)
	}
}
