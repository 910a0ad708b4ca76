package limiter

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func swExactMS(limit, window, cost int64) SlidingWindowRequest {
	r := swExact(limit, window, cost)
	r.Millis = true
	return r
}

func TestSlidingLog(t *testing.T) {
	// Limit 5 per 10 s unless said otherwise; at now = tBase a hit counts if
	// it is in (tBase−10s, tBase].
	const sec = nsPerSec
	full := []Hit{{tBase - 9*sec, 2}, {tBase - 5*sec, 2}, {tBase - sec, 1}} // 5 counted at tBase
	tests := []struct {
		name     string
		hits     []Hit
		now      int64
		req      SlidingWindowRequest
		wantHits []Hit
		want     Outcome
	}{
		{
			name: "fresh key", now: tBase, req: swExact(5, 10, 1),
			wantHits: []Hit{{tBase, 1}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 10},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			name: "same instant merges", hits: []Hit{{tBase, 1}}, now: tBase, req: swExact(5, 10, 2),
			wantHits: []Hit{{tBase, 3}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 2, RetryAfter: -1, ResetAfter: 10},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			// tBase−10s is at the window's open end: pruned.
			name: "prunes what left the window", hits: []Hit{{tBase - 10*sec, 2}, {tBase - 5*sec, 1}},
			now: tBase, req: swExact(5, 10, 1), wantHits: []Hit{{tBase - 5*sec, 1}, {tBase, 1}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 10},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			// 5 + 1 > 5: the oldest 2 leave at tBase−9s+10s, 1 s away; the
			// newest at tBase−1s+10s, 9 s away.
			name: "limited", hits: full, now: tBase, req: swExact(5, 10, 1), wantHits: full,
			want: Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 1, ResetAfter: 9}},
		},
		{
			// Cost 2 needs exactly the 2 at tBase−9s gone: at tBase+1s.
			name: "limited, exactly the oldest must leave", hits: full, now: tBase, req: swExact(5, 10, 2),
			wantHits: full,
			want:     Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 1, ResetAfter: 9}},
		},
		{
			// Cost 3 needs 3 gone: the 2 at tBase−9s and the 2 at tBase−5s, at tBase+5s.
			name: "limited, several hits must leave", hits: full, now: tBase, req: swExact(5, 10, 3), wantHits: full,
			want: Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 5, ResetAfter: 9}},
		},
		{
			// (tBase−9s+1, tBase+1s−1]: the oldest still counts, 1 ns to go.
			name: "1 ns before the allow instant", hits: full, now: tBase + sec - 1, req: swExact(5, 10, 1),
			wantHits: full,
			want:     Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 1, ResetAfter: 9}},
		},
		{
			name: "exactly at the allow instant", hits: full, now: tBase + sec, req: swExact(5, 10, 1),
			wantHits: []Hit{{tBase - 5*sec, 2}, {tBase - sec, 1}, {tBase + sec, 1}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 1, RetryAfter: -1, ResetAfter: 10},
				Write: WriteStore, ExpireMs: tBaseMs + 11000},
		},
		{
			// Leaves at tBase+1s+123ns: 1000000123 ns → 1001 ms.
			name: "sub-ms retry, MS", hits: []Hit{{tBase - 9*sec + 123, 5}}, now: tBase,
			req: swExactMS(5, 10_000, 1), wantHits: []Hit{{tBase - 9*sec + 123, 5}},
			want: Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 1001,
				ResetAfter: 1001}},
		},
		{
			name: "sub-second retry", hits: []Hit{{tBase - 9*sec + 123, 5}}, now: tBase,
			req: swExact(5, 10, 1), wantHits: []Hit{{tBase - 9*sec + 123, 5}},
			want: Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 2, ResetAfter: 2}},
		},
		{
			name: "cost above the limit", hits: []Hit{{tBase - sec, 1}}, now: tBase, req: swExact(5, 10, 6),
			wantHits: []Hit{{tBase - sec, 1}},
			want:     Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 9}},
		},
		{
			name: "cost 0 reads", hits: full, now: tBase, req: swExact(5, 10, 0), wantHits: full,
			want: Outcome{Result: Result{Limit: 5, Remaining: 0, RetryAfter: -1, ResetAfter: 9}},
		},
		{
			// Nothing left in the window: idle, but a read writes nothing.
			name: "cost 0 on an old log", hits: []Hit{{tBase - 20*sec, 3}}, now: tBase, req: swExact(5, 10, 0),
			wantHits: []Hit{{tBase - 20*sec, 3}},
			want:     Outcome{Result: Result{Limit: 5, Remaining: 5, RetryAfter: -1}},
		},
		{
			// Drops the 1 at tBase−1s, the 2 at tBase−5s, then 1 of the tBase−9s 2.
			name: "refund drops the newest", hits: full, now: tBase, req: swExact(5, 10, -4),
			wantHits: []Hit{{tBase - 9*sec, 1}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 1},
				Write: WriteStore, ExpireMs: tBaseMs + 1000},
		},
		{
			name: "over-refund empties", hits: full, now: tBase, req: swExact(5, 10, math.MinInt64),
			want: Outcome{Result: Result{Limit: 5, Remaining: 5, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			name: "refund on a fresh key", now: tBase, req: swExact(5, 10, -1),
			want: Outcome{Result: Result{Limit: 5, Remaining: 5, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			// The hit at tBase+5s is in the future: not counted, kept, and not
			// refunded. Idle when it leaves, at tBase+15s.
			name: "refund with a later hit", hits: []Hit{{tBase - sec, 2}, {tBase + 5*sec, 1}}, now: tBase,
			req: swExact(5, 10, -1), wantHits: []Hit{{tBase - sec, 1}, {tBase + 5*sec, 1}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 15},
				Write: WriteStore, ExpireMs: tBaseMs + 15000},
		},
		{
			name: "clock went backwards", hits: []Hit{{tBase + 5*sec, 3}}, now: tBase, req: swExact(5, 10, 1),
			wantHits: []Hit{{tBase, 1}, {tBase + 5*sec, 3}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 15},
				Write: WriteStore, ExpireMs: tBaseMs + 15000},
		},
		{
			name: "clock went back by more than MaxInt64 ns", hits: []Hit{{9_223_372_020 * sec, 1}},
			now: -9_000_000_000 * sec, req: swExact(5, 10, 1),
			wantHits: []Hit{{-9_000_000_000 * sec, 1}, {9_223_372_020 * sec, 1}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 9_223_372_037},
				Write: WriteStore, ExpireMs: 9_223_372_030_000},
		},
		{
			name: "clock went backwards, read", hits: []Hit{{tBase + 5*sec, 3}}, now: tBase, req: swExact(5, 10, 0),
			wantHits: []Hit{{tBase + 5*sec, 3}},
			want:     Outcome{Result: Result{Limit: 5, Remaining: 5, RetryAfter: -1, ResetAfter: 15}},
		},
		{
			name: "limit lowered", hits: full, now: tBase, req: swExact(3, 10, 0), wantHits: full,
			want: Outcome{Result: Result{Limit: 3, Remaining: 0, RetryAfter: -1, ResetAfter: 9}},
		},
		{
			// A 5 s window counts only (tBase−5s, tBase]: the 1 at tBase−1s.
			name: "window shortened", hits: full, now: tBase, req: swExact(5, 5, 1),
			wantHits: []Hit{{tBase - sec, 1}, {tBase, 1}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 5},
				Write: WriteStore, ExpireMs: tBaseMs + 5000},
		},
		{
			// now−window is below MinInt64: nothing has left the window.
			// Idle at MinInt64+5+1e10 = −9223372026854775803 ns → ms
			// ⌈−9223372026854.775803⌉ = −9223372026854.
			name: "clock near MinInt64", hits: []Hit{{math.MinInt64, 1}}, now: math.MinInt64 + 5,
			req: swExact(5, 10, 1), wantHits: []Hit{{math.MinInt64, 1}, {math.MinInt64 + 5, 1}},
			want: Outcome{Result: Result{Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 10},
				Write: WriteStore, ExpireMs: -9223372026854},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.hits)
			hits, out, err := SlidingLog(in, tt.now, tt.req)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !slices.Equal(hits, tt.wantHits) || out != tt.want {
				t.Errorf("got  %v %+v\nwant %v %+v", hits, out, tt.wantHits, tt.want)
			}
			if out.Write == WriteNone && !slices.Equal(in, tt.hits) {
				t.Errorf("WriteNone changed the input: %v, was %v", in, tt.hits)
			}
		})
	}
}

// TestSlidingLogKeepsInputOnWriteNone checks that a limited request or a
// read leaves the caller's slice alone even when it has spare capacity and
// hits that left the window.
func TestSlidingLogKeepsInputOnWriteNone(t *testing.T) {
	in := make([]Hit, 3, 8)
	copy(in, []Hit{{tBase - 20*nsPerSec, 1}, {tBase - 5*nsPerSec, 4}, {tBase, 1}})
	spare := in[:8]
	want := slices.Clone(spare)
	for _, cost := range []int64{1, 0, 6} {
		hits, out, err := SlidingLog(in, tBase, swExact(5, 10, cost))
		if err != nil || out.Write != WriteNone || &hits[0] != &in[0] || len(hits) != 3 {
			t.Fatalf("cost %d: %v %+v %v", cost, hits, out, err)
		}
		if !slices.Equal(spare, want) {
			t.Fatalf("cost %d changed the backing array: %v", cost, spare)
		}
	}
}

// TestSlidingLogSteadyState runs a full log at its limit for a while: the
// log never holds more than the instants within the window.
func TestSlidingLogSteadyState(t *testing.T) {
	// 5 per 10 s, one hit per 2 s: every request is allowed, and once
	// warmed up the log holds exactly the last 5 instants.
	var hits []Hit
	for i := range int64(100) {
		now := tBase + i*2*nsPerSec
		var out Outcome
		var err error
		hits, out, err = SlidingLog(hits, now, swExact(5, 10, 1))
		if err != nil || out.Result.Limited || out.Write != WriteStore {
			t.Fatalf("i=%d: %+v %v", i, out, err)
		}
		if n := min(i+1, 5); int64(len(hits)) != n || out.Result.Remaining != 5-n {
			t.Fatalf("i=%d: %d hits, remaining %d", i, len(hits), out.Result.Remaining)
		}
	}
}

func TestSlidingLogRangeErrors(t *testing.T) {
	tests := []struct {
		name string
		hits []Hit
		now  int64
		req  SlidingWindowRequest
		want error
	}{
		{"new hit's expiry overflows", nil, math.MaxInt64 - 1, swExact(5, 10, 1), ErrWindowRange},
		// A future hit near MaxInt64 (the clock went back): a refund would
		// store a log that expires past MaxInt64.
		{"stored hit's expiry overflows", []Hit{{tBase, 1}, {math.MaxInt64 - 5, 1}}, tBase, swExact(5, 10, -1),
			ErrWindowRange},
		{"read of a hit whose expiry overflows", []Hit{{math.MaxInt64 - 5, 1}}, math.MaxInt64 - 5,
			swExact(5, 10, 0), ErrWindowRange},
		{"invalid request", nil, tBase, swExact(100_001, 10, 1), ErrExactLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.hits)
			hits, out, err := SlidingLog(in, tt.now, tt.req)
			if !errors.Is(err, tt.want) || !slices.Equal(hits, tt.hits) || !slices.Equal(in, tt.hits) ||
				out != (Outcome{}) {
				t.Errorf("got %v %+v %v, want %v", hits, out, err, tt.want)
			}
		})
	}
}

// TestSlidingLogRobust runs random requests, valid but extreme, on random
// sorted logs and clocks: no panic, only the documented error, sane
// replies, the input untouched unless the log is written, and a written
// log kept in the input's array, whatever its spare capacity, when it has
// room for one more hit (the table's scratch does: SW.HIT EXACT must not
// allocate).
func TestSlidingLogRobust(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100_000 {
		r := SlidingWindowRequest{Limit: pickInt64(rng), Window: pickInt64(rng), Cost: pickInt64(rng), Exact: true,
			Millis: rng.IntN(2) == 0}
		if r.Validate() != nil {
			continue
		}
		now := pickInt64(rng)
		n := rng.IntN(6)
		hits := make([]Hit, n, n+1+20*rng.IntN(3)) // the scratch may be larger than the log
		for k := range hits {
			hits[k] = Hit{At: pickInt64(rng), N: pickInt64(rng)}
			if rng.IntN(2) == 0 { // near now, so that some count
				hits[k].At = now - rng.Int64N(3*nsPerSec) + nsPerSec
			}
		}
		slices.SortFunc(hits, func(a, b Hit) int { return cmp.Compare(a.At, b.At) })
		was := slices.Clone(hits[:cap(hits)])
		got, out, err := SlidingLog(hits, now, r)
		if err != nil {
			if !errors.Is(err, ErrWindowRange) || !slices.Equal(got, hits) || out != (Outcome{}) ||
				!slices.Equal(hits[:cap(hits)], was) {
				t.Fatalf("%+v %v at %d: %v", r, was, now, err)
			}
			continue
		}
		checkLimiterResult(t, out, r.Limit, r.Cost)
		switch out.Write {
		case WriteNone:
			if !slices.Equal(hits[:cap(hits)], was) || len(got) != len(hits) {
				t.Fatalf("%+v %v at %d: changed to %v", r, was, now, hits)
			}
		case WriteStore:
			if len(got) == 0 || !slices.IsSortedFunc(got, func(a, b Hit) int { return cmp.Compare(a.At, b.At) }) {
				t.Fatalf("%+v %v at %d: stores %v", r, was, now, got)
			}
			if &got[:1][0] != &hits[:1][0] {
				t.Fatalf("%+v %v at %d: stores a new array", r, was, now)
			}
		}
	}
}

func TestSlidingLogAllocs(t *testing.T) {
	hits := make([]Hit, 0, 8)
	now := tBase
	wantNoAllocs(t, func() {
		now += 2 * nsPerSec // one hit per 2 s, 5 per 10 s: always allowed
		hits, _, _ = SlidingLog(hits, now, swExact(5, 10, 1))
	})
}
