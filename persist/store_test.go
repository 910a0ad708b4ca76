package persist

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
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

// saveAllButLongExpiring saves in a store on fs an engine of keys that
// expire within 1000 s and one, "long", that lives an hour, and closes the
// store.
func saveAllButLongExpiring(t *testing.T, fs vfs.FS) {
	t.Helper()
	s := openStore(t, fs)
	e, _ := newEngine(t, now0)
	fill(t, e, 3)
	if _, err := e.Apply([]byte("long"), limiter.FixedWindowRequest{Limit: 10, Window: 3600, Cost: 1}.Request(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	s.Close()
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
		if _, err := e.Apply([]byte(fmt.Sprintf("user:%012d", i)), p.Request(), nil); err != nil {
			t.Fatal(err)
		}
	}
	must := func(_ limiter.Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.Apply([]byte("tb"), limiter.TokenBucketRequest{Capacity: 10, Refill: 1, Period: 60, Cost: 3}.Request(), nil))
	must(e.Apply([]byte("sw"), limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 2}.Request(), nil))
	must(e.Apply([]byte("log"), limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 2, Exact: true}.Request(), nil))
	must(e.Apply([]byte("log"), limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 1, Exact: true}.Request(), nil))
	must(e.Apply([]byte("fw"), limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 4}.Request(), nil))
}

// saved returns a store on a memory filesystem and an engine of n keys
// of fill's, all saved by one snapshot at saveTime.
func saved(t *testing.T, n int) (vfs.FS, *Store, *engine.Engine) {
	t.Helper()
	fs := vfs.NewMem()
	s, e := savedOn(t, fs, n)
	return fs, s, e
}

// savedOn is saved on the filesystem fs.
func savedOn(t *testing.T, fs vfs.FS, n int) (*Store, *engine.Engine) {
	t.Helper()
	s := openStore(t, fs)
	e, _ := newEngine(t, now0)
	fill(t, e, n)
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	return s, e
}

// dump returns every live key of e with its state, sorted.
func dump(e *engine.Engine) []string {
	var out []string
	for slot := range engine.SlotCount {
		for _, r := range e.ExportSlot(slot) {
			out = append(out, fmt.Sprintf("%s %d %d %d %d %d %v", r.Key, r.Kind, r.ExpireMs, r.Words[0], r.Words[1], r.Words[2], r.Hits))
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
	s, e := savedOn(t, errorfs.Wrap(mem, inj), 200)
	before := dump(e)
	for i := range 200 {
		if i%2 == 0 {
			e.Del([]byte(fmt.Sprintf("user:%012d", i)), nil)
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
		logger{func(string, string, ...any) {}, s.fatal}.Fatalf("MANIFEST sync failed: %s", "injected")
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
