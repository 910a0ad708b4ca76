package engine

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/manual"
	"github.com/cellserver/cellserver/limiter"
)

func skipWithoutMmap(t *testing.T) {
	t.Helper()
	if !manual.Enabled {
		t.Skip("no off-heap arrays on " + runtime.GOOS)
	}
}

// Whichever way every key goes, the tables' mapped arrays go with them.
func TestOffHeapReturnsToZero(t *testing.T) {
	skipWithoutMmap(t)
	const n, tags = 20000, 64 // about 1 MB of tables in 4 shards: both arrays mapped
	key := func(i int) []byte { return fmt.Appendf(nil, "{%d}user:%012d", i%tags, i) }
	fill := func(t *testing.T) (*Engine, *ManualClock) {
		e, clock := newTestEngine(t, 4)
		for i := range n {
			key := key(i)
			switch i % 4 {
			case 0:
				e.throttle(key, readmeParams)
			case 1:
				e.tokenBucket(key, limiter.TokenBucketRequest{Capacity: 10, Refill: 1, Period: 1, Cost: 1})
			case 2:
				e.slidingWindow(key, limiter.SlidingWindowRequest{Limit: 10, Window: 1, Cost: 1, Exact: i%8 == 2})
			case 3:
				e.fixedWindow(key, limiter.FixedWindowRequest{Limit: 10, Window: 1, Cost: 1})
			}
		}
		if e.OffHeapBytes() < n*16 {
			t.Fatalf("%d keys: only %d bytes off the Go heap", n, e.OffHeapBytes())
		}
		return e, clock
	}
	for _, c := range []struct {
		name   string
		remove func(e *Engine, clock *ManualClock)
	}{
		{"sweep", func(e *Engine, clock *ManualClock) {
			clock.Advance(1e12)
			for e.Sweep(1<<20) > 0 {
			}
		}},
		{"lazy expiry", func(e *Engine, clock *ManualClock) {
			clock.Advance(1e12)
			for i := range n {
				e.Exists(key(i), nil)
			}
		}},
		{"DEL", func(e *Engine, _ *ManualClock) {
			for i := range n {
				e.Del(key(i), nil)
			}
		}},
		{"DeleteSlot", func(e *Engine, _ *ManualClock) {
			for i := range tags {
				e.DeleteSlot(Slot(key(i)))
			}
		}},
		{"FLUSHALL", func(e *Engine, _ *ManualClock) { e.Flush() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, clock := fill(t)
			c.remove(e, clock)
			if st := e.Stats(); st.Keys != 0 || st.TableBytes != 0 || e.OffHeapBytes() != 0 || e.KeyspaceBytes() != 0 {
				t.Fatalf("%d keys, %d table bytes, %d off-heap bytes, %d keyspace bytes left", st.Keys, st.TableBytes, e.OffHeapBytes(), e.KeyspaceBytes())
			}
		})
	}
}

// Keys handed out of the engine are copies: they stay readable once the
// arena they came from is unmapped (an alias would be a SIGSEGV).
func TestKeysOutliveTheirTable(t *testing.T) {
	skipWithoutMmap(t)
	e, _ := newTestEngine(t, 1)
	for i := range 5000 {
		e.throttle(fmt.Appendf(nil, "{a}%d", i), readmeParams)
	}
	var keys [][]byte
	e.Keys(nil, limiter.KindNone, func(k []byte) { keys = append(keys, k) })
	_, scanned := e.Scan(0, 10000, nil, limiter.KindNone) // COUNT above the keys: one call returns them all
	var exported [][]byte
	for _, r := range e.ExportSlot(Slot([]byte("a"))) {
		exported = append(exported, r.Key)
	}
	if e.OffHeapBytes() == 0 {
		t.Fatal("the table is not off the Go heap: nothing to test")
	}
	e.Flush()
	if e.OffHeapBytes() != 0 {
		t.Fatalf("%d bytes mapped after FLUSHALL", e.OffHeapBytes())
	}
	for name, got := range map[string][][]byte{"Keys": keys, "Scan": scanned, "ExportSlot": exported} {
		slices.SortFunc(got, bytes.Compare)
		if len(got) != 5000 || string(got[0]) != "{a}0" || string(got[4999]) != "{a}999" {
			t.Fatalf("%s after FLUSHALL: %d keys, %q … %q", name, len(got), got[0], got[len(got)-1])
		}
	}
}

// An engine dropped without emptying it gives its mapped arrays back once
// it is collected.
func TestOffHeapFreedWithTheEngine(t *testing.T) {
	skipWithoutMmap(t)
	e, err := New(Config{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		e.throttle(fmt.Appendf(nil, "k%d", i), readmeParams)
	}
	mem := e.mem
	if mem.Mapped() == 0 {
		t.Fatal("the table is not off the Go heap: nothing to test")
	}
	e = nil
	for range 100 {
		runtime.GC()
		if mem.Mapped() == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond) // the cleanup runs on its own goroutine
	}
	t.Fatalf("%d bytes still mapped after the engine was collected", mem.Mapped())
}
