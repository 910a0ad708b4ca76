package engine

import (
	"bytes"
	"errors"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// call is one limit of an ApplyAll call: a key and its request.
type call struct {
	key string
	req limiter.Request
}

// applyAll runs ApplyAll on calls.
func applyAll(v *View, calls []call) ([]limiter.Result, int, error) {
	var keys [][]byte
	var reqs []limiter.Request
	for _, c := range calls {
		keys, reqs = append(keys, []byte(c.key)), append(reqs, c.req)
	}
	return v.ApplyAll(keys, reqs)
}

func fw(key string, limit, window int64) call {
	return call{key, limiter.Request{Kind: limiter.KindFixedWindow,
		FixedWindow: limiter.FixedWindowRequest{Limit: limit, Window: window, Cost: 1}}}
}

func res(limited bool, limit, remaining, retry, reset int64) limiter.Result {
	return limiter.Result{Limited: limited, Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

func TestApplyAllAllOrNothing(t *testing.T) {
	e, _ := newTestEngine(t, 16)
	v := e.NewView()
	// 3 per second (a GCRA with max_burst 2), 2 per day (a fixed window).
	p, err := limiter.GCRARequest{MaxBurst: 2, Count: 3, Period: 1, Quantity: 1}.Params()
	if err != nil {
		t.Fatal(err)
	}
	reqs := []call{{"sec", limiter.Request{Kind: limiter.KindGCRA, GCRA: p}}, fw("day", 2, 86400)}
	steps := []struct {
		first int
		want  []limiter.Result
	}{
		{0, []limiter.Result{res(false, 3, 2, -1, 1), res(false, 2, 1, -1, 6400)}},
		{0, []limiter.Result{res(false, 3, 1, -1, 1), res(false, 2, 0, -1, 6400)}},
		// Refused by the daily limit: the per-second limit reports a read.
		{2, []limiter.Result{res(false, 3, 1, -1, 1), res(true, 2, 0, 6400, 6400)}},
		{2, []limiter.Result{res(false, 3, 1, -1, 1), res(true, 2, 0, 6400, 6400)}},
	}
	for i, s := range steps {
		got, first, err := applyAll(v, reqs)
		if err != nil || first != s.first || !reflect.DeepEqual(got, s.want) {
			t.Fatalf("call %d: got %v, %d, %v; want %v, %d", i+1, got, first, err, s.want, s.first)
		}
	}
	// The per-second limit was charged twice only: one unit is left.
	if r, _ := v.throttle([]byte("sec"), p); r != res(false, 3, 0, -1, 1) {
		t.Fatalf("CL.THROTTLE after refusals: %v", r)
	}
}

func TestApplyAllErrorsChargeNothing(t *testing.T) {
	e, _ := newTestEngine(t, 4)
	v := e.NewView()
	if _, err := v.tokenBucket([]byte("tb"), limiter.TokenBucketRequest{Capacity: 5, Refill: 1, Period: 1, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		reqs []call
		err  error
	}{
		{[]call{fw("a", 5, 60), fw("tb", 5, 60)}, ErrWrongType},
		{[]call{fw("a", 5, 60), fw("a", 5, 60)}, ErrDuplicateKey},
		{[]call{fw("a", 5, 60), {key: "b"}}, ErrKind},
		{nil, ErrNoRequests},
	}
	for _, c := range cases {
		if _, _, err := applyAll(v, c.reqs); !errors.Is(err, c.err) {
			t.Errorf("got %v, want %v", err, c.err)
		}
	}
	if v.Exists([]byte("a"), nil) {
		t.Fatal("a refused call created key a")
	}
}

func TestApplyAllSlidingLogs(t *testing.T) {
	// Two exact sliding logs in one shard: each must keep its own hits
	// although the table decodes logs into one scratch slice.
	e, clock := newTestEngine(t, 1)
	v := e.NewView()
	sw := func(key string, limit int64) call {
		return call{key, limiter.Request{Kind: limiter.KindSlidingLog,
			SlidingWindow: limiter.SlidingWindowRequest{Limit: limit, Window: 10, Cost: 1, Exact: true}}}
	}
	reqs := []call{sw("x", 3), sw("y", 2)}
	want := [][]limiter.Result{
		{res(false, 3, 2, -1, 10), res(false, 2, 1, -1, 10)},
		{res(false, 3, 1, -1, 10), res(false, 2, 0, -1, 10)},
		{res(false, 3, 1, -1, 9), res(true, 2, 0, 8, 9)},
	}
	for i, w := range want {
		got, _, err := applyAll(v, reqs)
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Fatalf("call %d: got %v, %v; want %v", i+1, got, err, w)
		}
		clock.Advance(1e9)
	}
	if typ := v.Type([]byte("x"), nil); typ != limiter.KindSlidingLog {
		t.Fatalf("TYPE x = %v", typ)
	}
}

func TestApplyAllInsideAtomic(t *testing.T) {
	e, _ := newTestEngine(t, 4)
	e.Atomic(func(tx *View) {
		got, first, err := applyAll(tx, []call{fw("a", 1, 60), fw("b", 1, 60)})
		if err != nil || first != 0 || len(got) != 2 {
			t.Errorf("got %v, %d, %v", got, first, err)
		}
	})
}

// TestHasDuplicateComparisons checks that the duplicate check of a large
// ApplyAll call is O(n log n) comparisons, not n(n-1)/2: 80,000 keys
// took 3.2e9 comparisons (10 s of a core) when every pair was compared.
func TestHasDuplicateComparisons(t *testing.T) {
	const n = 80_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte("user:" + strconv.Itoa(i*7919%n))
	}
	count := 0
	cmp := func(a, b []byte) int { count++; return bytes.Compare(a, b) }
	if hasDuplicate(keys, cmp) {
		t.Fatal("distinct keys reported as a duplicate")
	}
	// n log2 n is 1.3e6 for n = 80,000; allow a sort's constant factor.
	if limit := 4 * n * bits.Len(n); count > limit {
		t.Fatalf("%d comparisons for %d keys, want at most %d", count, n, limit)
	}
	for _, dup := range [][2]int{{0, n - 1}, {n / 2, n/2 + 1}, {17, 3}} {
		keys2 := slices.Clone(keys)
		keys2[dup[1]] = keys2[dup[0]]
		if !hasDuplicate(keys2, bytes.Compare) {
			t.Errorf("keys %d and %d equal: no duplicate found", dup[0], dup[1])
		}
	}
	for m := range smallDuplicates + 2 { // the pairwise path and the sorting one
		small := keys[:m]
		if hasDuplicate(small, bytes.Compare) {
			t.Errorf("%d distinct keys reported as a duplicate", m)
		}
		if m >= 2 {
			withDup := append(slices.Clone(small), small[m/2])
			if !hasDuplicate(withDup, bytes.Compare) {
				t.Errorf("%d keys with one twice: no duplicate found", m+1)
			}
		}
	}
}

// TestApplyAllManyKeys applies one call of 80,000 limits: it completes
// (the duplicate check above is what made it take 10 s) and charges each.
func TestApplyAllManyKeys(t *testing.T) {
	e, _ := newTestEngine(t, 16)
	v := e.NewView()
	calls := make([]call, 80_000)
	for i := range calls {
		calls[i] = fw("k"+strconv.Itoa(i), 5, 60)
	}
	got, first, err := applyAll(v, calls)
	if err != nil || first != 0 || len(got) != len(calls) {
		t.Fatalf("got %d results, first %d, %v", len(got), first, err)
	}
	if got[len(got)-1].Remaining != 4 {
		t.Fatalf("last limit: %+v", got[len(got)-1])
	}
}
