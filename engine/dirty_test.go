package engine

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

func newTrackingEngine(t *testing.T, shards int) (*Engine, *ManualClock) {
	t.Helper()
	clock := NewManualClock(now0)
	e, err := New(Config{Shards: shards, Clock: clock, TrackChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, clock
}

func gcraParams(t testing.TB) limiter.GCRAParams {
	p, err := limiter.GCRARequest{MaxBurst: 4, Count: 1, Period: 10, Quantity: 1}.Params()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// takeAll returns every shard's changes as "flush", "del key" and
// "put key kind expire a b c hits" lines, sorted within each shard's part.
func takeAll(e *Engine) []string {
	var out []string
	for i := range e.Shards() {
		var part []string
		if e.TakeDirty(i, func(r Record, deleted bool) {
			if deleted {
				part = append(part, "del "+string(r.Key))
				return
			}
			part = append(part, fmt.Sprintf("put %s %d %d %d %d %d %v", r.Key, r.Kind, r.ExpireMs, r.A, r.B, r.C, r.Hits))
		}) {
			out = append(out, "flush")
		}
		sort.Strings(part)
		out = append(out, part...)
	}
	return out
}

func TestTakeDirtyReportsWritesOnce(t *testing.T) {
	e, _ := newTrackingEngine(t, 1)
	p := gcraParams(t)
	for _, k := range []string{"a", "b"} {
		if _, err := e.Throttle([]byte(k), p); err != nil {
			t.Fatal(err)
		}
	}
	tat := now0 + 10*1e9
	want := []string{
		fmt.Sprintf("put a %d %d %d 0 0 []", KindGCRA, tat/1e6, tat),
		fmt.Sprintf("put b %d %d %d 0 0 []", KindGCRA, tat/1e6, tat),
	}
	if got := takeAll(e); !reflect.DeepEqual(got, want) {
		t.Fatalf("first take = %q, want %q", got, want)
	}
	if got := takeAll(e); got != nil {
		t.Fatalf("second take = %q, want nothing", got)
	}
	if _, err := e.Throttle([]byte("a"), p); err != nil {
		t.Fatal(err)
	}
	want = []string{fmt.Sprintf("put a %d %d %d 0 0 []", KindGCRA, (tat+10*1e9)/1e6, tat+10*1e9)}
	if got := takeAll(e); !reflect.DeepEqual(got, want) {
		t.Fatalf("after one update = %q, want %q", got, want)
	}
	if e.Changes() != 0 {
		t.Fatalf("Changes = %d after a take, want 0", e.Changes())
	}
}

func TestTakeDirtyReportsRemovals(t *testing.T) {
	e, clock := newTrackingEngine(t, 1)
	p := gcraParams(t)
	for _, k := range []string{"a", "b", "c"} {
		if _, err := e.Throttle([]byte(k), p); err != nil {
			t.Fatal(err)
		}
	}
	takeAll(e)
	if !e.Del([]byte("a")) {
		t.Fatal("Del(a) = false")
	}
	if got, want := e.Changes(), int64(1); got != want {
		t.Fatalf("Changes = %d, want %d", got, want)
	}
	// b and c expire; the lazy lookup removes b, the sweep c.
	clock.Advance(11 * 1e9)
	if e.Exists([]byte("b")) {
		t.Fatal("b exists after expiry")
	}
	e.DBSize()
	want := []string{"del a", "del b", "del c"}
	if got := takeAll(e); !reflect.DeepEqual(got, want) {
		t.Fatalf("take = %q, want %q", got, want)
	}
}

func TestTakeDirtyDeleteThenWrite(t *testing.T) {
	e, _ := newTrackingEngine(t, 1)
	p := gcraParams(t)
	e.Throttle([]byte("a"), p)
	takeAll(e)
	e.Del([]byte("a"))
	e.Throttle([]byte("a"), p)
	var order []string
	e.TakeDirty(0, func(r Record, deleted bool) {
		order = append(order, fmt.Sprint(deleted))
	})
	if want := []string{"true", "false"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("order = %q, want %q (the delete first)", order, want)
	}
}

func TestTakeDirtyFlush(t *testing.T) {
	e, _ := newTrackingEngine(t, 2)
	p := gcraParams(t)
	e.Throttle([]byte("a"), p)
	takeAll(e)
	e.Del([]byte("a"))
	e.Flush()
	e.Throttle([]byte("a"), p)
	tat := now0 + 10*1e9
	want := []string{"flush", "flush", fmt.Sprintf("put a %d %d %d 0 0 []", KindGCRA, tat/1e6, tat)}
	got := takeAll(e)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("take = %q, want %q", got, want)
	}
}

func TestTakeDirtySlidingLogAndLoad(t *testing.T) {
	e, _ := newTrackingEngine(t, 1)
	r := limiter.SlidingWindowRequest{Limit: 5, Window: 10, Cost: 2, Exact: true}
	if _, err := e.SlidingWindow([]byte("log"), r); err != nil {
		t.Fatal(err)
	}
	var recs []Record
	e.TakeDirty(0, func(r Record, deleted bool) {
		r.Key = append([]byte(nil), r.Key...)
		r.Hits = append([]limiter.Hit(nil), r.Hits...)
		recs = append(recs, r)
	})
	if len(recs) != 1 || len(recs[0].Hits) != 1 || recs[0].Hits[0] != (limiter.Hit{At: now0, N: 2}) {
		t.Fatalf("records = %+v, want one log with one hit of 2 at now0", recs)
	}
	// Loaded into another engine, the record is not a change there.
	e2, _ := newTrackingEngine(t, 1)
	if ok, err := e2.Load(recs[0]); !ok || err != nil {
		t.Fatalf("Load = %v, %v", ok, err)
	}
	if got := takeAll(e2); got != nil {
		t.Fatalf("take after Load = %q, want nothing", got)
	}
	if e2.Changes() != 0 {
		t.Fatalf("Changes after Load = %d, want 0", e2.Changes())
	}
	// Imported, it is.
	if ok, err := e2.Import(recs[0]); !ok || err != nil {
		t.Fatalf("Import = %v, %v", ok, err)
	}
	if got := takeAll(e2); len(got) != 1 {
		t.Fatalf("take after Import = %q, want one put", got)
	}
}

func TestTakeDirtyWithoutTracking(t *testing.T) {
	e, _ := newTestEngine(t, 1)
	e.Throttle([]byte("a"), gcraParams(t))
	e.Del([]byte("a"))
	e.Throttle([]byte("b"), gcraParams(t))
	e.Flush()
	if got := takeAll(e); got != nil {
		t.Fatalf("take = %q, want nothing", got)
	}
}

// TestTrackingCostsNoTableMemory checks that tracking changes adds no byte
// to the tables: the mark is a bit of the record's head.
func TestTrackingCostsNoTableMemory(t *testing.T) {
	off, _ := newTestEngine(t, 4)
	on, _ := newTrackingEngine(t, 4)
	p := gcraParams(t)
	for i := range 10000 {
		k := []byte(fmt.Sprintf("user:%012d", i)) // 17 bytes
		off.Throttle(k, p)
		on.Throttle(k, p)
	}
	if a, b := off.Stats().TableBytes, on.Stats().TableBytes; a != b {
		t.Fatalf("table bytes: %d with tracking, %d without", b, a)
	}
}

func TestTrackedThrottleDoesNotAllocate(t *testing.T) {
	e, _ := newTrackingEngine(t, 1)
	p := gcraParams(t)
	key := []byte("user:000000000001")
	e.Throttle(key, p)
	if n := testing.AllocsPerRun(100, func() { e.Throttle(key, p) }); n != 0 {
		t.Fatalf("Throttle allocates %v times per call with tracking", n)
	}
}

// TestTakeDirtySlidingLogInPlace: an SW.HIT EXACT hit that edits its log
// inside the record (logrecord.go, inPlaceLocked) is a change like any
// other: the next take reports the key with its new hits, and Changes
// counts it.
func TestTakeDirtySlidingLogInPlace(t *testing.T) {
	e, clock := newTrackingEngine(t, 1)
	r := limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 1, Exact: true}
	for range 3 { // the first writes the record; the next ones fit in its room or grow it
		if _, err := e.SlidingWindow([]byte("log"), r); err != nil {
			t.Fatal(err)
		}
		clock.Advance(1e6)
	}
	takeAll(e)
	if _, err := e.SlidingWindow([]byte("log"), limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: -1, Exact: true}); err != nil {
		t.Fatal(err) // a refund: drops the newest hit, in place
	}
	if got := e.Changes(); got != 1 {
		t.Fatalf("Changes = %d after an in-place edit, want 1", got)
	}
	got := takeAll(e)
	if len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("put log %d ", KindSlidingLog)) {
		t.Fatalf("take after an in-place edit = %q, want the log", got)
	}
}

// BenchmarkTakeDirty: one snapshot's take of the changes, as persist's
// Store.Snapshot takes them: TakeDirty over every shard of an engine of
// 256 shards holding 1M CL.THROTTLE keys of 17 bytes, of which dirty keys
// chosen at random changed since the last take (the changing is not
// timed). One op is one take of all shards; keys/op is how many it
// returned.
//
//	go test ./engine -run XXX -bench TakeDirty -benchtime 20x
func BenchmarkTakeDirty(b *testing.B) {
	const n = 1 << 20
	clock := NewManualClock(now0)
	e, err := New(Config{Shards: 256, Clock: clock, TrackChanges: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	p, err := limiter.GCRARequest{MaxBurst: 15, Count: 30, Period: 86400, Quantity: 1}.Params()
	if err != nil {
		b.Fatal(err)
	}
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:%012d", i)
		if _, err := e.Throttle(keys[i], p); err != nil {
			b.Fatal(err)
		}
	}
	take := func() int {
		got := 0
		for i := range e.Shards() {
			e.TakeDirty(i, func(Record, bool) { got++ })
		}
		return got
	}
	take()
	for _, dirty := range []int{65_000, 450_000} {
		b.Run(fmt.Sprintf("dirty=%d", dirty), func(b *testing.B) {
			x := uint64(88172645463325252)
			got := 0
			for range b.N {
				b.StopTimer()
				for range dirty {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					if _, err := e.Throttle(keys[x%n], p); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				got += take()
			}
			b.ReportMetric(float64(got)/float64(b.N), "keys/op")
		})
	}
}
