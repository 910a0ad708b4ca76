package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/manual"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// now0 is the engines' frozen time in these tests, a whole second.
const now0 = int64(1_700_000_040_000_000_000)

var saveTime = time.Unix(1_800_000_000, 0)

func newEngine(t testing.TB, now int64) (*engine.Engine, *engine.ManualClock) {
	t.Helper()
	clock := engine.NewManualClock(now)
	e, err := engine.New(engine.Config{Shards: 4, Clock: clock, TrackChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, clock
}

func openStore(t testing.TB, fs vfs.FS) *Store {
	t.Helper()
	s, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s.ingestFrom = testIngestFrom
	t.Cleanup(func() { s.Close() })
	return s
}

// failingWrites returns an injector, off until turned on, that fails
// every write.
func failingWrites() *errorfs.Toggle {
	return &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return errorfs.ErrInjected
		}
		return nil
	})}
}

// saveAllButLongExpiring fills e with keys that expire within 1000 s and
// one, "long", that lives an hour, and snapshots them into s.
func saveAllButLongExpiring(t *testing.T, s *Store, e *engine.Engine) {
	t.Helper()
	fill(t, e, 3)
	if _, err := e.FixedWindow([]byte("long"), limiter.FixedWindowRequest{Limit: 10, Window: 3600, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
}

// testIngestFrom is the ingestFrom of the stores openStore opens.
var testIngestFrom = ingestFrom

// bothWays runs f twice: with every snapshot committed as a batch, and
// with every snapshot ingested as a table.
func bothWays(t *testing.T, f func(t *testing.T)) {
	defer func(v int) { testIngestFrom = v }(testIngestFrom)
	testIngestFrom = math.MaxInt
	t.Run("batch", f)
	testIngestFrom = 0
	t.Run("table", f)
}

// fill puts one key of every kind into e, plus n CL.THROTTLE keys.
func fill(t testing.TB, e *engine.Engine, n int) {
	t.Helper()
	p, err := limiter.GCRARequest{MaxBurst: 4, Count: 1, Period: 60, Quantity: 1}.Params()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := e.Throttle([]byte(fmt.Sprintf("user:%012d", i)), p); err != nil {
			t.Fatal(err)
		}
	}
	must := func(_ limiter.Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.TokenBucket([]byte("tb"), limiter.TokenBucketRequest{Capacity: 10, Refill: 1, Period: 60, Cost: 3}))
	must(e.SlidingWindow([]byte("sw"), limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 2}))
	must(e.SlidingWindow([]byte("log"), limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 2, Exact: true}))
	must(e.SlidingWindow([]byte("log"), limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 1, Exact: true}))
	must(e.FixedWindow([]byte("fw"), limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 4}))
}

// saved returns a store on a memory filesystem and an engine of n keys
// of fill's, all saved by one snapshot at saveTime.
func saved(t *testing.T, n int) (vfs.FS, *Store, *engine.Engine) {
	t.Helper()
	fs := vfs.NewMem()
	s := openStore(t, fs)
	e, _ := newEngine(t, now0)
	fill(t, e, n)
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	return fs, s, e
}

// dump returns every live key of e with its state, sorted.
func dump(e *engine.Engine) []string {
	var out []string
	for slot := range engine.SlotCount {
		for _, r := range e.ExportSlot(slot) {
			out = append(out, fmt.Sprintf("%s %d %d %d %d %d %v", r.Key, r.Kind, r.ExpireMs, r.A, r.B, r.C, r.Hits))
		}
	}
	sort.Strings(out)
	return out
}

func restored(t testing.TB, fs vfs.FS, now int64) (*engine.Engine, RestoreStats) {
	t.Helper()
	s := openStore(t, fs)
	e, _ := newEngine(t, now)
	st, err := s.Restore(e)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return e, st
}

// restoredAs is restored, failing unless the new engine holds exactly
// want's keys.
func restoredAs(t testing.TB, fs vfs.FS, now int64, want *engine.Engine) (*engine.Engine, RestoreStats) {
	t.Helper()
	e2, rst := restored(t, fs, now)
	if got, want := dump(e2), dump(want); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored keys differ:\n got %q\nwant %q", got, want)
	}
	return e2, rst
}

func TestSnapshotRestoreEveryKind(t *testing.T) { bothWays(t, testSnapshotRestoreEveryKind) }

func testSnapshotRestoreEveryKind(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs)
	e, _ := newEngine(t, now0)
	fill(t, e, 100)
	st, err := s.Snapshot(e, saveTime)
	if err != nil {
		t.Fatal(err)
	}
	if want := (SnapshotStats{Generation: 1, Written: 104}); st.Generation != want.Generation || st.Written != want.Written || st.Deleted != 0 {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
	if gen, at := s.LastSave(); gen != 1 || !at.Equal(saveTime) {
		t.Fatalf("LastSave = %d, %v", gen, at)
	}
	s.Close()
	e2, rst := restoredAs(t, fs, now0, e)
	if rst.Loaded != 104 || rst.Expired != 0 {
		t.Fatalf("restore stats = %+v, want 104 loaded", rst)
	}
	if e2.Changes() != 0 {
		t.Fatalf("Changes after restore = %d, want 0", e2.Changes())
	}
}

func TestSnapshotIsIncremental(t *testing.T) { bothWays(t, testSnapshotIsIncremental) }

func testSnapshotIsIncremental(t *testing.T) {
	fs, s, e := saved(t, 10)
	e.Del([]byte("user:000000000003"))
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
	if _, err := e.FixedWindow([]byte("after"), limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 1}); err != nil {
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
	if _, err := after.FixedWindow([]byte("after"), limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(midFlush{e, after}, saveTime); err != nil {
		t.Fatal(err)
	}
	s.Close()
	restoredAs(t, fs, now0, after)
}

func TestRestoreDropsAndDeletesExpired(t *testing.T) { bothWays(t, testRestoreDropsAndDeletesExpired) }

func testRestoreDropsAndDeletesExpired(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs)
	e, _ := newEngine(t, now0)
	saveAllButLongExpiring(t, s, e)
	s.Close()
	later := now0 + 1000*1e9 // every key but "long" has expired
	e2, rst := restored(t, fs, later)
	if rst.Loaded != 1 || rst.Expired != 7 {
		t.Fatalf("restore = %+v, want 1 loaded, 7 expired", rst)
	}
	if got := dump(e2); len(got) != 1 {
		t.Fatalf("keys = %q, want only long", got)
	}
	// The expired records are gone from the store.
	_, rst = restored(t, fs, later)
	if rst.Loaded != 1 || rst.Expired != 0 {
		t.Fatalf("second restore = %+v, want 1 loaded, 0 expired", rst)
	}
}

// A restore on a disk that fails writes still returns, with the keys
// loaded (its deletions of the expired records may be lost), and the
// next snapshot, the disk recovered, succeeds.
func TestRestoreOnFailingDisk(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem)
	e, _ := newEngine(t, now0)
	saveAllButLongExpiring(t, s, e)
	s.Close()
	failing := failingWrites()
	s2 := openStore(t, errorfs.Wrap(mem, failing))
	e2, _ := newEngine(t, now0+1000*1e9) // every key but "long" has expired
	failing.On()
	done := make(chan RestoreStats, 1)
	go func() {
		st, err := s2.Restore(e2)
		if err != nil {
			t.Errorf("Restore: %v", err)
		}
		done <- st
	}()
	select {
	case st := <-done:
		if st.Loaded != 1 || st.Expired != 7 {
			t.Fatalf("restore = %+v, want 1 loaded, 7 expired", st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Restore on a failing disk did not return within 30 s")
	}
	failing.Off()
	if _, err := e2.FixedWindow([]byte("new"), limiter.FixedWindowRequest{Limit: 10, Window: 3600, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	// The restore's deletions are written to Pebble's log in the
	// background: their failure may be noted during the first snapshot,
	// which then fails and leaves its changes to the next.
	if _, err := s2.Snapshot(e2, saveTime.Add(time.Hour)); err != nil {
		if _, err := s2.Snapshot(e2, saveTime.Add(time.Hour+time.Second)); err != nil {
			t.Fatalf("second snapshot after the disk recovered: %v", err)
		}
	}
	s2.Close()
	e3, _ := restored(t, mem, now0+1000*1e9)
	if got, want := dump(e3), dump(e2); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored keys differ:\n got %q\nwant %q", got, want)
	}
}

func TestStoreKeysBySlot(t *testing.T) { bothWays(t, testStoreKeysBySlot) }

func testStoreKeysBySlot(t *testing.T) {
	_, s, _ := saved(t, 0)
	slot := engine.Slot([]byte("fw"))
	lo, hi := SlotRange(slot)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, string(it.Key()))
	}
	it.Close()
	want := string(binary.BigEndian.AppendUint16(nil, uint16(slot))) + "fw"
	if !reflect.DeepEqual(keys, []string{want}) {
		t.Fatalf("keys of slot %d = %q, want %q", slot, keys, want)
	}
}

func TestOpenChecksFormat(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	db.Set(formatKey, binary.BigEndian.AppendUint32(nil, 99), pebble.Sync)
	db.Close()
	_, err = Open("db", Options{FS: fs})
	if !errors.Is(err, ErrUnknownFormat) || err.Error() != "persist: unknown store format version: db has version 99, this build reads version 1" {
		t.Fatalf("Open = %v, want ErrUnknownFormat naming version 99", err)
	}

	fs = vfs.NewMem()
	db, _ = pebble.Open("db", &pebble.Options{FS: fs})
	db.Set([]byte("\x00\x01x"), []byte("y"), pebble.Sync)
	db.Close()
	if _, err := Open("db", Options{FS: fs}); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("Open of data without a version = %v, want ErrUnknownFormat", err)
	}
}

func TestRestoreRefusesCorruptRecord(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs)
	if err := s.db.Set([]byte("\x00\x01x"), []byte("not a record"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	e, _ := newEngine(t, now0)
	if _, err := s.Restore(e); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Restore = %v, want ErrCorrupt", err)
	}
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
	e.Del([]byte("user:000000000001"))
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

// TestCrashAtEveryWrite takes, at every write Pebble makes during a
// snapshot, the filesystem as a crash at that instant would leave it (what
// was synced, and, for a second copy, half of what was not), and checks
// that each opens on the previous snapshot or the new one, whole.
func TestCrashAtEveryWrite(t *testing.T) { bothWays(t, testCrashAtEveryWrite) }

func testCrashAtEveryWrite(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var clones []*vfs.MemFS
	var armed bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			clones = append(clones,
				mem.CrashClone(vfs.CrashCloneCfg{}),
				mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: newRand(len(clones))}))
		}
		return nil
	})
	s := openStore(t, errorfs.Wrap(mem, inj))
	e, _ := newEngine(t, now0)
	fill(t, e, 200)
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	before := dump(e)
	for i := range 200 {
		if i%2 == 0 {
			e.Del([]byte(fmt.Sprintf("user:%012d", i)))
		}
	}
	fill(t, e, 300)
	after := dump(e)
	armed = true
	if _, err := s.Snapshot(e, saveTime.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	armed = false
	clones = append(clones, mem.CrashClone(vfs.CrashCloneCfg{}))
	if len(clones) < 3 {
		t.Fatalf("only %d crash points", len(clones))
	}
	var sawBefore, sawAfter int
	for i, fs := range clones {
		e2, _ := restored(t, fs, now0)
		switch got := dump(e2); {
		case reflect.DeepEqual(got, before):
			sawBefore++
		case reflect.DeepEqual(got, after):
			sawAfter++
		default:
			t.Fatalf("crash point %d: the store holds %d keys, neither snapshot (%d or %d)", i, len(got), len(before), len(after))
		}
	}
	if sawBefore == 0 || sawAfter == 0 {
		t.Fatalf("crash points: %d on the previous snapshot, %d on the new one; want both", sawBefore, sawAfter)
	}
	t.Logf("%d crash points: %d previous, %d new", len(clones), sawBefore, sawAfter)
}

func newRand(seed int) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 1)) }

// DiskUsage counts a snapshot once Pebble has it in a level: a large
// snapshot's table, ingested over a memtable that holds a small one's
// batch, is queued behind the memtable and flushed in the background.
func TestDiskUsageCountsSnapshot(t *testing.T) {
	// On disk, where the table is queued (in memory it was not).
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, _ := newEngine(t, now0)
	fill(t, e, 10)
	if _, err := s.Snapshot(e, saveTime); err != nil { // a batch, in the memtable
		t.Fatal(err)
	}
	fill(t, e, 80000)
	if s.ingestFrom > 80000*20 {
		t.Fatalf("ingestFrom %d: 80000 keys would not be ingested", s.ingestFrom)
	}
	if _, err := s.Snapshot(e, saveTime.Add(time.Second)); err != nil { // a table
		t.Fatal(err)
	}
	// Wait for the background flush the way Pebble offers: a flush of its
	// own, which comes after the queued one.
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, least := s.DiskUsage(), uint64(80000*20); got < least {
		t.Fatalf("DiskUsage = %d after a snapshot of 80000 keys, want at least %d", got, least)
	}
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

// When Pebble gave up a write in the background (logger.Fatalf on one of
// its own goroutines, as a flush's manifest write on a failing disk does),
// the next snapshot does not use that instance, which may wait forever
// for the ended goroutine: it closes it and opens the store again.
func TestBackgroundFailureReopens(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem)
	e, _ := newEngine(t, now0)
	fill(t, e, 10)
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	before := s.db
	done := make(chan struct{})
	go func() { // as a background goroutine of Pebble's would
		defer close(done)
		logger{func(string, ...any) {}, s.fatal}.Fatalf("MANIFEST sync failed: %s", "injected")
	}()
	<-done
	fill(t, e, 20)
	st, err := s.Snapshot(e, saveTime.Add(time.Second))
	if err != nil {
		t.Fatalf("Snapshot after a background failure: %v", err)
	}
	if s.db == before || st.Generation != 2 {
		t.Fatalf("the snapshot used the failed instance (generation %d)", st.Generation)
	}
	s.Close()
	restoredAs(t, mem, now0, e)
}

// When Pebble gave up a write in the background and its instance cannot
// be closed (a flush ended halfway by logger.Fatalf leaves it waiting for
// that flush forever), the snapshot gives up closing it after closeWait,
// and this and every later snapshot fail with errWedged rather than wait.
func TestWedgedStoreFailsSnapshots(t *testing.T) {
	defer func(d time.Duration) { closeWait = d }(closeWait)
	closeWait = 100 * time.Millisecond
	mem := vfs.NewMem()
	var manifest atomic.Bool // fail the writes of Pebble's manifest
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if manifest.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.Contains(op.Path, "MANIFEST") {
			return errorfs.ErrInjected
		}
		return nil
	})
	s, err := Open("db", Options{FS: errorfs.Wrap(mem, inj)})
	if err != nil {
		t.Fatal(err)
	}
	s.ingestFrom = math.MaxInt // a batch, in the memtable
	e, _ := newEngine(t, now0)
	fill(t, e, 10)
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	manifest.Store(true)
	if _, err := s.db.AsyncFlush(); err != nil { // its manifest write fails: Fatalf
		t.Fatal(err)
	}
	testkit.Recv(t, s.fatal.ch, "the flush's failure to be noted")
	fill(t, e, 20)
	for i := range 2 {
		if _, err := s.Snapshot(e, saveTime.Add(time.Duration(i+1)*time.Second)); !errors.Is(err, errWedged) {
			t.Fatalf("snapshot %d on a wedged store = %v, want errWedged", i+1, err)
		}
	}
	if !s.wedged {
		t.Fatal("the store is not marked wedged")
	}
}
