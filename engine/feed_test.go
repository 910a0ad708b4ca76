package engine

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// drainAll returns every shard's feed as "flush", "del key" and "put key
// kind expire" lines, sorted within each shard's part.
func drainAll(e *Engine) []string {
	var out []string
	for i := range e.Shards() {
		var part []string
		e.DrainFeed(i, func(r Record, c Change) {
			switch c {
			case Flushed:
				part = append(part, "flush")
			case Removed:
				part = append(part, "del "+string(r.Key))
			default:
				part = append(part, fmt.Sprintf("put %s %d %d", r.Key, r.Kind, r.ExpireMs))
			}
		})
		sort.Strings(part)
		out = append(out, part...)
	}
	return out
}

func newFeedEngine(t *testing.T, shards int) (*Engine, *ManualClock) {
	t.Helper()
	clock := NewManualClock(now0)
	e, err := New(Config{Shards: shards, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, clock
}

// TestFeedCoalesces: a key hit many times between two drains is reported
// once, with its state at the drain.
func TestFeedCoalesces(t *testing.T) {
	e, _ := newFeedEngine(t, 4)
	p := gcraParams(t)
	e.throttle([]byte("before"), p) // the feed is off: not listed
	e.SetFeed(true)
	for range 1000 {
		e.throttle([]byte("a"), p)
	}
	e.throttle([]byte("b"), p)
	var a []string
	e.DrainFeed(e.ShardOf(Slot([]byte("a"))), func(r Record, c Change) {
		a = append(a, fmt.Sprintf("%s %d %d", r.Key, c, r.Words[0]))
	})
	st, _, _ := e.lookup([]byte("a"), nil)
	if want := []string{fmt.Sprintf("a %d %d", Written, st.Words[0])}; !reflect.DeepEqual(a, want) {
		t.Fatalf("drain of a's shard = %q, want %q", a, want)
	}
	rest := drainAll(e)
	if len(rest) != 1 || rest[0] != fmt.Sprintf("put b %d %d", limiter.KindGCRA, (now0+10*1e9)/1e6) {
		t.Fatalf("rest = %q, want b alone", rest)
	}
	if got := drainAll(e); got != nil {
		t.Fatalf("second drain = %q, want nothing", got)
	}
}

// TestFeedRemovalsAndFlush: a deleted or expired key is reported removed;
// FLUSHALL is reported as a flush of each shard, before what came after.
func TestFeedRemovalsAndFlush(t *testing.T) {
	e, clock := newFeedEngine(t, 1)
	p := gcraParams(t)
	e.SetFeed(true)
	for _, k := range []string{"a", "b", "c"} {
		e.throttle([]byte(k), p)
	}
	drainAll(e)
	e.Del([]byte("a"), nil)
	e.throttle([]byte("b"), p)
	e.Del([]byte("b"), nil)
	clock.Advance(11 * 1e9)
	for e.Sweep(1<<20) > 0 {
	}
	if got, want := drainAll(e), []string{"del a", "del b", "del c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("drain = %q, want %q", got, want)
	}
	e.throttle([]byte("x"), p)
	e.Flush()
	e.throttle([]byte("y"), p)
	got := drainAll(e)
	if len(got) != 2 || got[0] != "flush" || got[1][:5] != "put y" {
		t.Fatalf("drain after FLUSHALL = %q, want flush then y", got)
	}
	e.SetFeed(false)
	e.throttle([]byte("z"), p)
	if got := drainAll(e); got != nil {
		t.Fatalf("drain with the feed off = %q", got)
	}
}

// TestFeedCollidingTags: two keys whose slot tags collide are both listed.
func TestFeedCollidingTags(t *testing.T) {
	f := newFeed()
	f.noteLocked([]byte("one"), 7)
	f.noteLocked([]byte("two"), 7)
	f.noteLocked([]byte("two"), 7)
	f.noteLocked([]byte("one"), 7) // listed again: harmless, shipped twice
	if got, want := string(f.keys), "\x03one\x03two\x03one"; got != want {
		t.Fatalf("keys = %q, want %q", got, want)
	}
}

// TestFeedThrottleDoesNotAllocate: with the feed on, a write allocates
// nothing in the steady state (the lists are reused across drains).
func TestFeedThrottleDoesNotAllocate(t *testing.T) {
	e, _ := newFeedEngine(t, 1)
	e.SetFeed(true)
	p := gcraParams(t)
	key := []byte("user:000000000001")
	call := func() {
		e.throttle(key, p)
		e.DrainFeed(0, func(Record, Change) {})
	}
	call()
	call()
	if n := testing.AllocsPerRun(100, call); n != 0 {
		t.Fatalf("Throttle and drain allocate %v times per call with the feed on", n)
	}
}

// TestCopyShardPassesEveryKey: CopyShard passes each live key once, with
// chunks between which requests run.
func TestCopyShardPassesEveryKey(t *testing.T) {
	e, _ := newFeedEngine(t, 2)
	p := gcraParams(t)
	for i := range 2000 {
		e.throttle(fmt.Appendf(nil, "k%d", i), p)
	}
	seen := map[string]int{}
	chunks := 0
	for s := range e.Shards() {
		e.CopyShard(s, func(r Record) { seen[string(r.Key)]++ }, func() bool { chunks++; return true })
	}
	if len(seen) != 2000 || chunks < 4 {
		t.Fatalf("copied %d keys in %d chunks, want 2000 in several", len(seen), chunks)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s copied %d times", k, n)
		}
	}
}

// BenchmarkFeedWrite measures a write's cost with the feed off and on.
func BenchmarkFeedWrite(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("feed=%v", on), func(b *testing.B) {
			e, err := New(Config{Shards: 1, Clock: NewManualClock(now0)})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			e.SetFeed(on)
			p := gcraParams(b)
			keys := make([][]byte, 1024)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "user:%012d", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.throttle(keys[i&1023], p)
				if i&1023 == 1023 {
					e.DrainFeed(0, func(Record, Change) {})
				}
			}
		})
	}
}
