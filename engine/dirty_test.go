package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

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
		e.TakeDirty(i, func(r Record, c Change) {
			switch c {
			case Flushed:
				part = []string{"flush"} // voids what came before
			case Removed:
				part = append(part, "del "+string(r.Key))
			default:
				part = append(part, fmt.Sprintf("put %s %d %d %d %d %d %v", r.Key, r.Kind, r.ExpireMs, r.Words[0], r.Words[1], r.Words[2], r.Hits))
			}
		})
		sort.Strings(part)
		out = append(out, part...)
	}
	return out
}

func TestTakeDirtyReportsWritesOnce(t *testing.T) {
	e, _ := newTrackingEngine(t, 1)
	p := gcraParams(t)
	for _, k := range []string{"a", "b"} {
		if _, err := e.throttle([]byte(k), p); err != nil {
			t.Fatal(err)
		}
	}
	tat := now0 + 10*1e9
	want := []string{
		fmt.Sprintf("put a %d %d %d 0 0 []", limiter.KindGCRA, tat/1e6, tat),
		fmt.Sprintf("put b %d %d %d 0 0 []", limiter.KindGCRA, tat/1e6, tat),
	}
	if got := takeAll(e); !reflect.DeepEqual(got, want) {
		t.Fatalf("first take = %q, want %q", got, want)
	}
	if got := takeAll(e); got != nil {
		t.Fatalf("second take = %q, want nothing", got)
	}
	if _, err := e.throttle([]byte("a"), p); err != nil {
		t.Fatal(err)
	}
	want = []string{fmt.Sprintf("put a %d %d %d 0 0 []", limiter.KindGCRA, (tat+10*1e9)/1e6, tat+10*1e9)}
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
		if _, err := e.throttle([]byte(k), p); err != nil {
			t.Fatal(err)
		}
	}
	takeAll(e)
	if !e.Del([]byte("a"), nil) {
		t.Fatal("Del(a) = false")
	}
	if got, want := e.Changes(), int64(1); got != want {
		t.Fatalf("Changes = %d, want %d", got, want)
	}
	// b and c expire; the lazy lookup removes b, the sweep c.
	clock.Advance(11 * 1e9)
	if e.Exists([]byte("b"), nil) {
		t.Fatal("b exists after expiry")
	}
	for e.Sweep(1<<20) > 0 {
	}
	want := []string{"del a", "del b", "del c"}
	if got := takeAll(e); !reflect.DeepEqual(got, want) {
		t.Fatalf("take = %q, want %q", got, want)
	}
}

func TestTakeDirtyDeleteThenWrite(t *testing.T) {
	e, _ := newTrackingEngine(t, 1)
	p := gcraParams(t)
	e.throttle([]byte("a"), p)
	takeAll(e)
	e.Del([]byte("a"), nil)
	e.throttle([]byte("a"), p)
	var order []string
	e.TakeDirty(0, func(r Record, c Change) {
		order = append(order, fmt.Sprint(c == Removed))
	})
	if want := []string{"true", "false"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("order = %q, want %q (the delete first)", order, want)
	}
}

func TestTakeDirtyFlush(t *testing.T) {
	e, _ := newTrackingEngine(t, 2)
	p := gcraParams(t)
	e.throttle([]byte("a"), p)
	takeAll(e)
	e.Del([]byte("a"), nil)
	e.Flush()
	e.throttle([]byte("a"), p)
	tat := now0 + 10*1e9
	want := []string{"flush", "flush", fmt.Sprintf("put a %d %d %d 0 0 []", limiter.KindGCRA, tat/1e6, tat)}
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
	if _, err := e.slidingWindow([]byte("log"), r); err != nil {
		t.Fatal(err)
	}
	var recs []Record
	e.TakeDirty(0, func(r Record, c Change) {
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
	e.throttle([]byte("a"), gcraParams(t))
	e.Del([]byte("a"), nil)
	e.throttle([]byte("b"), gcraParams(t))
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
		off.throttle(k, p)
		on.throttle(k, p)
	}
	if a, b := off.Stats().TableBytes, on.Stats().TableBytes; a != b {
		t.Fatalf("table bytes: %d with tracking, %d without", b, a)
	}
}

func TestTrackedThrottleDoesNotAllocate(t *testing.T) {
	e, _ := newTrackingEngine(t, 1)
	p := gcraParams(t)
	key := []byte("user:000000000001")
	e.throttle(key, p)
	if n := testing.AllocsPerRun(100, func() { e.throttle(key, p) }); n != 0 {
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
		if _, err := e.slidingWindow([]byte("log"), r); err != nil {
			t.Fatal(err)
		}
		clock.Advance(1e6)
	}
	takeAll(e)
	if _, err := e.slidingWindow([]byte("log"), limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: -1, Exact: true}); err != nil {
		t.Fatal(err) // a refund: drops the newest hit, in place
	}
	if got := e.Changes(); got != 1 {
		t.Fatalf("Changes = %d after an in-place edit, want 1", got)
	}
	got := takeAll(e)
	if len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("put log %d ", limiter.KindSlidingLog)) {
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
		if _, err := e.throttle(keys[i], p); err != nil {
			b.Fatal(err)
		}
	}
	take := func() int {
		got := 0
		for i := range e.Shards() {
			e.TakeDirty(i, func(Record, Change) { got++ })
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
					if _, err := e.throttle(keys[x%n], p); err != nil {
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

// TestTakeDirtyInChunks takes a shard a few records at a time while
// other callers write, remove and flush keys between the chunks (which
// would deadlock if the take held the lock there). Applied in order, one
// take then another brings a copy to exactly the engine's state; and
// after the first take alone, every key nothing touched during it is
// already right: no change made before a take is left for the next.
func TestTakeDirtyInChunks(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("flush=%v", flush), func(t *testing.T) {
			defer func(n int) { takeChunk, takeBetween = n, nil }(takeChunk)
			takeChunk = 4
			e, _ := newTrackingEngine(t, 1)
			p, err := limiter.GCRARequest{MaxBurst: 1 << 20, Count: 1, Period: 10, Quantity: 1}.Params()
			if err != nil {
				t.Fatal(err)
			}
			hit := func(k string) {
				if _, err := e.throttle([]byte(k), p); err != nil {
					t.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			key := func() string { return fmt.Sprintf("k%d", rng.IntN(2500)) }
			for i := range 2000 {
				hit(fmt.Sprintf("k%d", i))
			}
			copyOf := map[string]string{}
			// take applies a take to copyOf, between running between its chunks.
			take := func(between func(int)) {
				takeBetween = between
				e.TakeDirty(0, func(r Record, c Change) {
					switch c {
					case Flushed:
						clear(copyOf)
					case Removed:
						delete(copyOf, string(r.Key))
					default:
						copyOf[string(r.Key)] = fmt.Sprint(r.Kind, r.ExpireMs, r.Words[0], r.Words[1], r.Words[2], r.Hits)
					}
				})
			}
			take(nil)
			for range 1500 {
				hit(key())
			}
			touched := map[string]bool{}
			calls := 0
			take(func(int) {
				calls++
				for range 3 {
					k := key()
					touched[k] = true
					if rng.IntN(3) == 0 {
						e.Del([]byte(k), nil)
					} else {
						hit(k) // new keys too: the table grows
					}
				}
				if calls == 30 {
					if flush {
						e.Flush()
					} else {
						for i := range 2500 { // the table shrinks
							if i%10 != 0 {
								touched[fmt.Sprintf("k%d", i)] = true
								e.Del(fmt.Appendf(nil, "k%d", i), nil)
							}
						}
					}
				}
			})
			if calls < 30 {
				t.Fatalf("the take ran %d chunks, want more than 30", calls+1)
			}
			state := func() map[string]string {
				m := map[string]string{}
				for slot := range SlotCount {
					for _, r := range e.ExportSlot(slot) {
						m[string(r.Key)] = fmt.Sprint(r.Kind, r.ExpireMs, r.Words[0], r.Words[1], r.Words[2], r.Hits)
					}
				}
				return m
			}
			if !flush {
				for k, v := range state() {
					if !touched[k] && copyOf[k] != v {
						t.Errorf("after the first take, untouched %s = %q, want %q", k, copyOf[k], v)
					}
				}
			}
			take(nil)
			if got, want := copyOf, state(); !reflect.DeepEqual(got, want) {
				t.Fatalf("after two takes the copy has %d keys, the engine %d; they differ", len(got), len(want))
			}
		})
	}
}

// BenchmarkTakeDirtyWait: what a take costs the requests served while it
// runs. One goroutine takes every shard of an engine of 256 shards
// holding n CL.THROTTLE keys (1M, then 4M), half of them changed, while
// another throttles keys at random until the take is done; each op is
// one take.
// wait-p99-µs, wait-p999-µs and wait-max-µs are the percentiles of the
// requests' times (over all ops), which a shard's lock held by the take
// stretches. Run at GOMAXPROCS 2 (-cpu 2), so that each has a processor.
// BENCH_TAKE_CHUNK sets takeChunk (a figure of 1<<30 takes a shard
// whole, as TakeDirty did before it took chunks).
func BenchmarkTakeDirtyWait(b *testing.B) {
	if v := os.Getenv("BENCH_TAKE_CHUNK"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		defer func(c int) { takeChunk = c }(takeChunk)
		takeChunk = n
	}
	for _, n := range []int{1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			e, err := New(Config{Shards: 256, Clock: NewManualClock(now0), TrackChanges: true})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			p, err := limiter.GCRARequest{MaxBurst: 1 << 20, Count: 30, Period: 86400, Quantity: 1}.Params()
			if err != nil {
				b.Fatal(err)
			}
			// Keys are made on the fly: a million keys on the heap would
			// have the collector's assists in the figures.
			var kb []byte
			key := func(i int) []byte {
				kb = append(kb[:0], "user:000000000000"...)
				for j := len(kb) - 1; i > 0; j, i = j-1, i/10 {
					kb[j] = byte('0' + i%10)
				}
				return kb
			}
			for i := range n {
				if _, err := e.throttle(key(i), p); err != nil {
					b.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(3, 4))
			var waits [100_000]int // by µs; the last: 100 ms or more
			total := 0
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for range n / 2 {
					if _, err := e.throttle(key(rng.IntN(n)), p); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				done := make(chan struct{})
				go func() {
					defer close(done)
					for i := range e.Shards() {
						e.TakeDirty(i, func(Record, Change) {})
					}
				}()
			serve:
				for {
					select {
					case <-done:
						break serve
					default:
					}
					k := key(rng.IntN(n))
					start := time.Now()
					if _, err := e.throttle(k, p); err != nil {
						b.Fatal(err)
					}
					waits[min(int(time.Since(start).Microseconds()), len(waits)-1)]++
					total++
				}
			}
			b.StopTimer()
			at := func(q float64) float64 {
				seen := 0
				for us, c := range waits {
					if seen += c; float64(seen) >= q*float64(total) {
						return float64(us)
					}
				}
				return float64(len(waits))
			}
			b.ReportMetric(at(0.99), "wait-p99-µs")
			b.ReportMetric(at(0.999), "wait-p999-µs")
			b.ReportMetric(at(1), "wait-max-µs")
		})
	}
}

// TestTrackedQueueDoesNotAllocate: LB.QUEUE, admitted and refused, with
// tracking, allocates nothing per call either.
func TestTrackedQueueDoesNotAllocate(t *testing.T) {
	e, clock := newTrackingEngine(t, 1)
	admitted := limiter.LeakyQueueRequest{Capacity: 100, Rate: 10, Period: 1, Cost: 1}.Request()
	refused := limiter.LeakyQueueRequest{Capacity: 1, Rate: 1, Period: 60, Cost: 1}.Request()
	for _, c := range []struct {
		key  []byte
		r    *limiter.Request
		step int64
	}{{[]byte("user:000000000001"), admitted, 1e8}, {[]byte("user:000000000002"), refused, 1e6}} {
		call := func() {
			clock.Advance(c.step)
			if _, err := e.Apply(c.key, c.r, nil); err != nil {
				t.Fatal(err)
			}
		}
		call()
		if n := testing.AllocsPerRun(100, call); n != 0 {
			t.Fatalf("LB.QUEUE allocates %v times per call with tracking", n)
		}
	}
}
