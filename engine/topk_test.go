package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// limitN makes n requests for key that CL.THROTTLE 0 1 60 limits (the
// first request, which is allowed, made beforehand when the key is new).
func limitN(t *testing.T, e *Engine, key string, n int) {
	t.Helper()
	p, err := limiter.GCRARequest{MaxBurst: 0, Count: 1, Period: 60, Quantity: 1}.Params()
	if err != nil {
		t.Fatal(err)
	}
	if !e.Exists([]byte(key), nil) {
		if r, _ := e.throttle([]byte(key), p); r.Limited {
			t.Fatal("first request limited")
		}
	}
	for range n {
		if r, _ := e.throttle([]byte(key), p); !r.Limited {
			t.Fatalf("%s: not limited", key)
		}
	}
}

func topString(top []LimitedKey) string {
	var parts []string
	for _, k := range top {
		s := fmt.Sprintf("%s=%d", k.Key, k.Count)
		if k.Error != 0 {
			s += fmt.Sprintf("±%d", k.Error)
		}
		if k.Truncated {
			s += "…"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// TopLimited counts limited requests exactly while a shard tracks few keys,
// ranks them, and halves the counts every TopHalfLife.
func TestTopLimitedCountsAndDecays(t *testing.T) {
	e, clock := newTestEngine(t, 4)
	if got := e.TopLimited(10); len(got) != 0 {
		t.Fatalf("nothing limited yet: %v", got)
	}
	limitN(t, e, "a", 5)
	limitN(t, e, "b", 3)
	limitN(t, e, "c", 1)
	if got := topString(e.TopLimited(10)); got != "a=5 b=3 c=1" {
		t.Fatalf("got %q", got)
	}
	if got := topString(e.TopLimited(2)); got != "a=5 b=3" {
		t.Fatalf("top 2: %q", got)
	}
	clock.Advance(TopHalfLife - 1)
	if got := topString(e.TopLimited(10)); got != "a=5 b=3 c=1" {
		t.Fatalf("before a half-life: %q", got)
	}
	clock.Advance(1)
	if got := topString(e.TopLimited(10)); got != "a=2 b=1" {
		t.Fatalf("after a half-life: %q", got)
	}
	limitN(t, e, "b", 4)
	if got := topString(e.TopLimited(10)); got != "b=5 a=2" {
		t.Fatalf("b again: %q", got)
	}
	clock.Advance(3 * TopHalfLife)
	if got := topString(e.TopLimited(10)); got != "" {
		t.Fatalf("after three half-lives: %q", got)
	}
}

// A shard tracks at most TopPerShard keys whatever the traffic; a key
// limited more than 1/TopPerShard of the time keeps its exact count, and a
// newcomer inherits the evicted count as its error bound.
func TestTopLimitedIsBounded(t *testing.T) {
	e, _ := newTestEngine(t, 1)
	limitN(t, e, "heavy", 1000)
	for i := range 1000 {
		limitN(t, e, fmt.Sprintf("k%04d", i), 1)
	}
	top := e.TopLimited(100)
	if len(top) != TopPerShard {
		t.Fatalf("%d keys tracked, want %d", len(top), TopPerShard)
	}
	if string(top[0].Key) != "heavy" || top[0].Count != 1000 || top[0].Error != 0 {
		t.Fatalf("top: %+v", top[0])
	}
	for _, k := range top[1:] {
		if k.Count-k.Error < 1 || k.Count-k.Error > 1 {
			t.Errorf("%s: count %d error %d, want a guaranteed count of 1", k.Key, k.Count, k.Error)
		}
	}
}

// A key longer than TopKeyLen is kept and reported by its prefix.
func TestTopLimitedLongKey(t *testing.T) {
	e, _ := newTestEngine(t, 1)
	long := strings.Repeat("x", TopKeyLen+10)
	limitN(t, e, long, 2)
	top := e.TopLimited(1)
	if len(top) != 1 || string(top[0].Key) != long[:TopKeyLen] || !top[0].Truncated || top[0].Count != 2 || top[0].Kind != limiter.KindGCRA {
		t.Fatalf("got %+v", top)
	}
}
