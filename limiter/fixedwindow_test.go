package limiter

import (
	"math"
	"math/rand/v2"
	"testing"
)

func fw(limit, window, cost int64) FixedWindowRequest {
	return FixedWindowRequest{Limit: limit, Window: window, Cost: cost}
}

func fwMS(limit, window, cost int64) FixedWindowRequest {
	r := fw(limit, window, cost)
	r.Millis = true
	return r
}

func TestFixedWindow(t *testing.T) {
	// Limit 5 per 10 s; tBase starts a window, so at now = tBase+3s the window
	// ends in 7 s and the key expires at tBaseMs+10000.
	const sec = nsPerSec
	now := tBase + 3*sec
	runCalls(t, FixedWindow, []call[FixedWindowState, FixedWindowRequest]{
		{
			name: "fresh key", now: now, req: fw(5, 10, 1),
			wantSt: FixedWindowState{Start: tBase, Count: 1},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 7},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			name: "up to the limit", st: FixedWindowState{Start: tBase, Count: 4}, exists: true, now: now,
			req: fw(5, 10, 1), wantSt: FixedWindowState{Start: tBase, Count: 5},
			want: Outcome{Result: Result{Limit: 5, Remaining: 0, RetryAfter: -1, ResetAfter: 7},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			name: "over the limit", st: FixedWindowState{Start: tBase, Count: 5}, exists: true, now: now,
			req: fw(5, 10, 1), wantSt: FixedWindowState{Start: tBase, Count: 5},
			want: Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 7, ResetAfter: 7}},
		},
		{
			name: "cost 2 over by 1", st: FixedWindowState{Start: tBase, Count: 4}, exists: true, now: now,
			req: fw(5, 10, 2), wantSt: FixedWindowState{Start: tBase, Count: 4},
			want: Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 1, RetryAfter: 7, ResetAfter: 7}},
		},
		{
			// 1 ns before the window's end: 1 ns → 1 s.
			name: "last ns of the window", st: FixedWindowState{Start: tBase, Count: 5}, exists: true,
			now: tBase + 10*sec - 1, req: fw(5, 10, 1), wantSt: FixedWindowState{Start: tBase, Count: 5},
			want: Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 0, RetryAfter: 1, ResetAfter: 1}},
		},
		{
			// At the window's end: a new window, the old count is gone.
			name: "first ns of the next window", st: FixedWindowState{Start: tBase, Count: 5}, exists: true,
			now: tBase + 10*sec, req: fw(5, 10, 1), wantSt: FixedWindowState{Start: tBase + 10*sec, Count: 1},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 10},
				Write: WriteStore, ExpireMs: tBaseMs + 20000},
		},
		{
			name: "skipped windows", st: FixedWindowState{Start: tBase - 50*sec, Count: 5}, exists: true,
			now: now, req: fw(5, 10, 5), wantSt: FixedWindowState{Start: tBase, Count: 5},
			want: Outcome{Result: Result{Limit: 5, Remaining: 0, RetryAfter: -1, ResetAfter: 7},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			// 6999999999 ns to the end → 7 s.
			name: "sub-second rounding", now: now + 1, req: fw(5, 10, 1),
			wantSt: FixedWindowState{Start: tBase, Count: 1},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 7},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			// 1500 ms windows: tBase = 1133333333.33 windows, so the window is
			// [tBase−0.5s, tBase+1s); from tBase+400000001 the end is 599999999 ns
			// away → 600 ms.
			name: "sub-ms rounding, MS", now: tBase + 400_000_001, req: fwMS(5, 1500, 1),
			wantSt: FixedWindowState{Start: tBase - 500*nsPerMs, Count: 1},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 600},
				Write: WriteStore, ExpireMs: tBaseMs + 1000},
		},
		{
			name: "cost above the limit", now: now, req: fw(5, 10, 6),
			want: Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 5, RetryAfter: -1}},
		},
		{
			name: "cost 0 reads", st: FixedWindowState{Start: tBase, Count: 2}, exists: true, now: now,
			req: fw(5, 10, 0), wantSt: FixedWindowState{Start: tBase, Count: 2},
			want: Outcome{Result: Result{Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 7}},
		},
		{
			// A count from an earlier window reads as 0 (reset 0).
			name: "cost 0 on an old window", st: FixedWindowState{Start: tBase - 10*sec, Count: 2}, exists: true,
			now: now, req: fw(5, 10, 0), wantSt: FixedWindowState{Start: tBase - 10*sec, Count: 2},
			want: Outcome{Result: Result{Limit: 5, Remaining: 5, RetryAfter: -1}},
		},
		{
			name: "refund", st: FixedWindowState{Start: tBase, Count: 3}, exists: true, now: now,
			req: fw(5, 10, -1), wantSt: FixedWindowState{Start: tBase, Count: 2},
			want: Outcome{Result: Result{Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 7},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			name: "over-refund stops at 0", st: FixedWindowState{Start: tBase, Count: 3}, exists: true, now: now,
			req:  fw(5, 10, math.MinInt64),
			want: Outcome{Result: Result{Limit: 5, Remaining: 5, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			name: "refund on a fresh key", now: now, req: fw(5, 10, -1),
			want: Outcome{Result: Result{Limit: 5, Remaining: 5, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			// A limit lowered below the count: remaining stays at 0.
			name: "limit lowered", st: FixedWindowState{Start: tBase, Count: 5}, exists: true, now: now,
			req: fw(3, 10, 0), wantSt: FixedWindowState{Start: tBase, Count: 5},
			want: Outcome{Result: Result{Limit: 3, Remaining: 0, RetryAfter: -1, ResetAfter: 7}},
		},
		{
			// Stored by a 5 s window at tBase+5s; with 10 s windows that is the
			// window [tBase, tBase+10s), now's: the count carries over.
			name: "window lengthened", st: FixedWindowState{Start: tBase + 5*sec, Count: 3}, exists: true,
			now: tBase + 7*sec, req: fw(5, 10, 1), wantSt: FixedWindowState{Start: tBase, Count: 4},
			want: Outcome{Result: Result{Limit: 5, Remaining: 1, RetryAfter: -1, ResetAfter: 3},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			// Stored by a 10 s window at tBase; with 5 s windows now is in
			// [tBase+5s, tBase+10s): the count belongs to an earlier window.
			name: "window shortened", st: FixedWindowState{Start: tBase, Count: 3}, exists: true,
			now: tBase + 7*sec, req: fw(5, 5, 1), wantSt: FixedWindowState{Start: tBase + 5*sec, Count: 1},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 3},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			// The stored window [tBase+10s, tBase+20s) is later than now's: it
			// stays current, ending 17 s from now.
			name: "clock went backwards", st: FixedWindowState{Start: tBase + 10*sec, Count: 3}, exists: true,
			now: now, req: fw(5, 10, 1), wantSt: FixedWindowState{Start: tBase + 10*sec, Count: 4},
			want: Outcome{Result: Result{Limit: 5, Remaining: 1, RetryAfter: -1, ResetAfter: 17},
				Write: WriteStore, ExpireMs: tBaseMs + 20000},
		},
		{
			// The stored window ends at 9223372030e9, more than MaxInt64 ns
			// after now: the time to its end saturates at 9223372037 s.
			name: "clock went back by more than MaxInt64 ns",
			st:   FixedWindowState{Start: 9_223_372_020 * sec, Count: 1}, exists: true,
			now: -9_000_000_000 * sec, req: fw(5, 10, 1),
			wantSt: FixedWindowState{Start: 9_223_372_020 * sec, Count: 2},
			want: Outcome{Result: Result{Limit: 5, Remaining: 3, RetryAfter: -1, ResetAfter: 9_223_372_037},
				Write: WriteStore, ExpireMs: 9_223_372_030_000},
		},
		{
			name: "negative stored count", st: FixedWindowState{Start: tBase, Count: -4}, exists: true, now: now,
			req: fw(5, 10, 1), wantSt: FixedWindowState{Start: tBase, Count: 1},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 7},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			// Before the epoch: [−10s, 0) holds −3s; expiry at 0 ms.
			name: "negative clock", now: -3 * sec, req: fw(5, 10, 1),
			wantSt: FixedWindowState{Start: -10 * sec, Count: 1},
			want: Outcome{Result: Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 3},
				Write: WriteStore, ExpireMs: 0},
		},
	})
}

func TestFixedWindowRangeErrors(t *testing.T) {
	type c = call[FixedWindowState, FixedWindowRequest]
	runCalls(t, FixedWindow, []c{
		// The window [9223372030e9, 9223372040e9) ends past MaxInt64.
		{name: "window end overflows", now: math.MaxInt64 - 1, req: fw(5, 10, 1), err: ErrWindowRange},
		// ⌊MinInt64/3e9⌋·3e9 = −9223372038e9 < MinInt64.
		{name: "window start overflows", now: math.MinInt64, req: fw(5, 3, 1), err: ErrWindowRange},
		{name: "invalid request", now: tBase, req: fw(5, 0, 1), err: ErrWindowNotPositive},
	})
}

func TestFixedWindowValidate(t *testing.T) {
	runValidations(t, []validation[FixedWindowRequest]{
		{fw(1, 1, 1), nil},
		{fw(0, 0, 1), ErrLimitNotPositive},
		{fw(-1, math.MaxInt64, 1), ErrLimitNotPositive},
		{fw(1, 0, 1), ErrWindowNotPositive},
		{fw(1, -1, 1), ErrWindowNotPositive},
		{fw(1, math.MaxInt64/nsPerSec, 1), nil},
		{fw(1, math.MaxInt64/nsPerSec+1, 1), ErrWindowRange},
		{fwMS(1, math.MaxInt64/nsPerMs, 1), nil},
		{fwMS(1, math.MaxInt64/nsPerMs+1, 1), ErrWindowRange},
		{fw(math.MaxInt64, 1, math.MinInt64), nil},
	})
}

// TestFixedWindowRobust runs random requests, valid but extreme, on random
// states and clocks: no panic, only the documented error, sane replies.
func TestFixedWindowRobust(t *testing.T) {
	robust[FixedWindowState, FixedWindowRequest]{
		seed: [2]uint64{3, 4}, f: FixedWindow, rangeErr: ErrWindowRange,
		req: func(rng *rand.Rand) FixedWindowRequest {
			return FixedWindowRequest{Limit: pickInt64(rng), Window: pickInt64(rng), Cost: pickInt64(rng),
				Millis: rng.IntN(2) == 0}
		},
		st: func(rng *rand.Rand) FixedWindowState {
			return FixedWindowState{Start: pickInt64(rng), Count: pickInt64(rng)}
		},
		limitAndCost: func(r FixedWindowRequest) (int64, int64) { return r.Limit, r.Cost },
		stored:       func(_ FixedWindowRequest, st FixedWindowState) bool { return st.Count >= 1 },
	}.run(t)
}

func TestFixedWindowAllocs(t *testing.T) {
	st := FixedWindowState{Start: tBase, Count: 2}
	wantNoAllocs(t, func() {
		_, _, _ = FixedWindow(st, true, tBase+nsPerSec, fw(10, 10, 1))
	})
}
