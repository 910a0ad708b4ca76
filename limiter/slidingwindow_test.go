package limiter

import (
	"math"
	"math/rand/v2"
	"testing"
)

func sw(limit, window, cost int64) SlidingWindowRequest {
	return SlidingWindowRequest{Limit: limit, Window: window, Cost: cost}
}

func swMS(limit, window, cost int64) SlidingWindowRequest {
	r := sw(limit, window, cost)
	r.Millis = true
	return r
}

func swExact(limit, window, cost int64) SlidingWindowRequest {
	r := sw(limit, window, cost)
	r.Exact = true
	return r
}

func TestSlidingWindow(t *testing.T) {
	// Limit 10 per 10 s; tBase starts a window [tBase, tBase+10s). A key whose curr
	// is not 0 is idle at tBase+20s, one with only prev at tBase+10s.
	const sec = nsPerSec
	now := tBase + 3*sec
	prevWin := tBase - 10*sec
	type state = SlidingWindowState
	runCalls(t, SlidingWindow, []call[state, SlidingWindowRequest]{
		{
			name: "fresh key", now: now, req: sw(10, 10, 1),
			wantSt: state{Start: tBase, Curr: 1},
			want: Outcome{Result: Result{Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 17},
				Write: WriteStore, ExpireMs: tBaseMs + 20000},
		},
		{
			// Rolled: prev 8, curr 0; at e = 2.5 s the estimate is
			// 8·7.5/10 = 6, and 6+4 ≤ 10 exactly (8·7.5e9 = 6·10e9).
			name: "next window, exactly at the allow instant", st: state{Start: prevWin, Prev: 5, Curr: 8},
			exists: true, now: tBase + 2_500_000_000, req: sw(10, 10, 4),
			wantSt: state{Start: tBase, Prev: 8, Curr: 4},
			want: Outcome{Result: Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 18},
				Write: WriteStore, ExpireMs: tBaseMs + 20000},
		},
		{
			// 1 ns earlier: 8·(7.5e9+1) > 6·10e9. Allowed from e ≥ 10e9 −
			// ⌊6·10e9/8⌋ = 2.5e9, 1 ns away. Remaining 10 − ⌈6.0000000008⌉
			// = 3; only prev left: reset at tBase+10s, 7.5e9+1 ns → 8 s.
			name: "next window, 1 ns before the allow instant", st: state{Start: prevWin, Prev: 5, Curr: 8},
			exists: true, now: tBase + 2_500_000_000 - 1, req: sw(10, 10, 4),
			wantSt: state{Start: prevWin, Prev: 5, Curr: 8},
			want:   Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 3, RetryAfter: 1, ResetAfter: 8}},
		},
		{
			name: "1 ns before, MS", st: state{Start: prevWin, Prev: 5, Curr: 8},
			exists: true, now: tBase + 2_500_000_000 - 1, req: swMS(10, 10_000, 4),
			wantSt: state{Start: prevWin, Prev: 5, Curr: 8},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 3, RetryAfter: 1,
				ResetAfter: 7501}},
		},
		{
			name: "skipped windows", st: state{Start: tBase - 20*sec, Prev: 5, Curr: 8}, exists: true,
			now: now, req: sw(10, 10, 10), wantSt: state{Start: tBase, Curr: 10},
			want: Outcome{Result: Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 17},
				Write: WriteStore, ExpireMs: tBaseMs + 20000},
		},
		{
			// 10·0.9 + 2 + 2 > 10. In this window: e ≥ 10e9 − ⌊6·10e9/10⌋
			// = 4e9, 3 s away (10·0.6 + 2 + 2 = 10). Remaining ⌊10−11⌋ → 0.
			name: "allowed later in this window", st: state{Start: tBase, Prev: 10, Curr: 2}, exists: true,
			now: tBase + sec, req: sw(10, 10, 2), wantSt: state{Start: tBase, Prev: 10, Curr: 2},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 0, RetryAfter: 3, ResetAfter: 19}},
		},
		{
			// curr+cost > limit: next window, prev 10: e ≥ 10e9 − ⌊9·10e9/10⌋
			// = 1e9, i.e. tBase+11s, 8 s away (10·0.9 + 1 = 10).
			name: "allowed in the next window", st: state{Start: tBase, Curr: 10}, exists: true,
			now: now, req: sw(10, 10, 1), wantSt: state{Start: tBase, Curr: 10},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 0, RetryAfter: 8, ResetAfter: 17}},
		},
		{
			// Next window, prev 3, cost 8: e ≥ 10e9 − ⌊2·10e9/3⌋ =
			// 3333333334 (3·6666666666 ≤ 2·10e9 < 3·6666666667): at
			// tBase+13333333334, 10333333334 ns away → 11 s.
			name: "allowed in the next window, sub-second", st: state{Start: tBase, Curr: 3}, exists: true,
			now: now, req: sw(10, 10, 8), wantSt: state{Start: tBase, Curr: 3},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 7, RetryAfter: 11, ResetAfter: 17}},
		},
		{
			name: "allowed in the next window, sub-ms", st: state{Start: tBase, Curr: 3}, exists: true,
			now: now, req: swMS(10, 10_000, 8), wantSt: state{Start: tBase, Curr: 3},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 7, RetryAfter: 10334,
				ResetAfter: 17000}},
		},
		{
			// A full limit in curr: cost 10 waits until it has faded, tBase+20s.
			name: "allowed two windows on", st: state{Start: tBase, Curr: 10}, exists: true,
			now: now, req: sw(10, 10, 10), wantSt: state{Start: tBase, Curr: 10},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 0, RetryAfter: 17, ResetAfter: 17}},
		},
		{
			// room 0: prev never fades enough within this window; at tBase+10s
			// prev is 9 and 9+1 ≤ 10.
			name: "allowed at the next window's start", st: state{Start: tBase, Prev: 10, Curr: 9}, exists: true,
			now: tBase + sec, req: sw(10, 10, 1), wantSt: state{Start: tBase, Prev: 10, Curr: 9},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 0, RetryAfter: 9, ResetAfter: 19}},
		},
		{
			// 1000 ms windows, prev 10 at e = 1 ns: allowed from e ≥ 1e9 −
			// ⌊9·1e9/10⌋ = 1e8, 99999999 ns away → 100 ms.
			name: "sub-ms retry, MS", st: state{Start: tBase - sec, Curr: 10}, exists: true,
			now: tBase + 1, req: swMS(10, 1000, 1), wantSt: state{Start: tBase - sec, Curr: 10},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 0, RetryAfter: 100, ResetAfter: 1000}},
		},
		{
			name: "cost above the limit", st: state{Start: tBase, Curr: 4}, exists: true, now: now,
			req: sw(10, 10, 11), wantSt: state{Start: tBase, Curr: 4},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 6, RetryAfter: -1, ResetAfter: 17}},
		},
		{
			// 4·0.7 + 3 = 5.8 → remaining ⌊4.2⌋ = 4.
			name: "cost 0 reads", st: state{Start: tBase, Prev: 4, Curr: 3}, exists: true, now: now,
			req: sw(10, 10, 0), wantSt: state{Start: tBase, Prev: 4, Curr: 3},
			want: Outcome{Result: Result{Limit: 10, Remaining: 4, RetryAfter: -1, ResetAfter: 17}},
		},
		{
			name: "cost 0, fresh", now: now, req: sw(10, 10, 0),
			want: Outcome{Result: Result{Limit: 10, Remaining: 10, RetryAfter: -1}},
		},
		{
			// curr 3 → 2: 10 − 2 − ⌈2.8⌉ = 5.
			name: "refund", st: state{Start: tBase, Prev: 4, Curr: 3}, exists: true, now: now,
			req: sw(10, 10, -1), wantSt: state{Start: tBase, Prev: 4, Curr: 2},
			want: Outcome{Result: Result{Limit: 10, Remaining: 5, RetryAfter: -1, ResetAfter: 17},
				Write: WriteStore, ExpireMs: tBaseMs + 20000},
		},
		{
			// curr stops at 0, prev stays: idle at tBase+10s.
			name: "over-refund keeps prev", st: state{Start: tBase, Prev: 4, Curr: 3}, exists: true, now: now,
			req: sw(10, 10, -5), wantSt: state{Start: tBase, Prev: 4},
			want: Outcome{Result: Result{Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 7},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			// Rolled first: prev 3, curr 0; the refund has nothing to lower.
			name: "refund after a roll", st: state{Start: prevWin, Prev: 4, Curr: 3}, exists: true, now: now,
			req: sw(10, 10, -1), wantSt: state{Start: tBase, Prev: 3},
			want: Outcome{Result: Result{Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 7},
				Write: WriteStore, ExpireMs: tBaseMs + 10000},
		},
		{
			name: "over-refund to idle", st: state{Start: tBase, Curr: 3}, exists: true, now: now,
			req:  sw(10, 10, math.MinInt64),
			want: Outcome{Result: Result{Limit: 10, Remaining: 10, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			name: "refund on a fresh key", now: now, req: sw(10, 10, -1),
			want: Outcome{Result: Result{Limit: 10, Remaining: 10, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			// The stored window [tBase+10s, tBase+20s) is later than now's: it
			// stays current, read at its start (4 + 3 + 1 ≤ 10); idle at
			// tBase+30s, 27 s from now.
			name: "clock went backwards", st: state{Start: tBase + 10*sec, Prev: 4, Curr: 3}, exists: true,
			now: now, req: sw(10, 10, 1), wantSt: state{Start: tBase + 10*sec, Prev: 4, Curr: 4},
			want: Outcome{Result: Result{Limit: 10, Remaining: 2, RetryAfter: -1, ResetAfter: 27},
				Write: WriteStore, ExpireMs: tBaseMs + 30000},
		},
		{
			// 4 + 5 + 2 > 10: e ≥ 10e9 − ⌊3·10e9/4⌋ = 2.5e9 into the stored
			// window, tBase+12.5s, 9.5 s from now → 10 s.
			name: "clock went backwards, limited", st: state{Start: tBase + 10*sec, Prev: 4, Curr: 5}, exists: true,
			now: now, req: sw(10, 10, 2), wantSt: state{Start: tBase + 10*sec, Prev: 4, Curr: 5},
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 1, RetryAfter: 10, ResetAfter: 27}},
		},
		{
			// The stored window's next ends at 9223372030e9, more than
			// MaxInt64 ns after now: the reset time saturates.
			name: "clock went back by more than MaxInt64 ns", st: state{Start: 9_223_372_010 * sec, Curr: 1},
			exists: true, now: -9_000_000_000 * sec, req: sw(10, 10, 1),
			wantSt: state{Start: 9_223_372_010 * sec, Curr: 2},
			want: Outcome{Result: Result{Limit: 10, Remaining: 8, RetryAfter: -1, ResetAfter: 9_223_372_037},
				Write: WriteStore, ExpireMs: 9_223_372_030_000},
		},
		{
			// Stored by a 5 s window at tBase+5s; with 10 s windows that is
			// now's window [tBase, tBase+10s). At e = 7 s: 2·0.3 + 3 + 1 ≤ 10.
			name: "window lengthened", st: state{Start: tBase + 5*sec, Prev: 2, Curr: 3}, exists: true,
			now: tBase + 7*sec, req: sw(10, 10, 1), wantSt: state{Start: tBase, Prev: 2, Curr: 4},
			want: Outcome{Result: Result{Limit: 10, Remaining: 5, RetryAfter: -1, ResetAfter: 13},
				Write: WriteStore, ExpireMs: tBaseMs + 20000},
		},
		{
			// Stored by a 10 s window at tBase; with 5 s windows now is in
			// [tBase+5s, tBase+10s), so tBase's counts are the previous window's.
			name: "window shortened", st: state{Start: tBase, Prev: 2, Curr: 4}, exists: true,
			now: tBase + 6*sec, req: sw(10, 5, 0), wantSt: state{Start: tBase, Prev: 2, Curr: 4},
			want: Outcome{Result: Result{Limit: 10, Remaining: 6, RetryAfter: -1, ResetAfter: 4}},
		},
		{
			// A lowered limit: the estimate 4·0.7+3 = 5.8 is above 5.
			name: "limit lowered", st: state{Start: tBase, Prev: 4, Curr: 3}, exists: true, now: now,
			req: sw(5, 10, 0), wantSt: state{Start: tBase, Prev: 4, Curr: 3},
			want: Outcome{Result: Result{Limit: 5, Remaining: 0, RetryAfter: -1, ResetAfter: 17}},
		},
		{
			name: "negative stored counts", st: state{Start: tBase, Prev: -4, Curr: -3}, exists: true, now: now,
			req: sw(10, 10, 1), wantSt: state{Start: tBase, Curr: 1},
			want: Outcome{Result: Result{Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 17},
				Write: WriteStore, ExpireMs: tBaseMs + 20000},
		},
	})
}

// TestSlidingWindowExact128 compares the estimate where prev·(W−e) and
// limit·W need 128 bits: limit 4e18, W = 4e9 s. tBase = 1.7e18 ns is in the
// window [0, 4e18); prev 4e18 at e = 1.7e18 weighs 4e18·2.3e18/4e18 =
// 2.3e18 exactly, so cost 1.7e18 fits exactly and 1.7e18+1 does not.
func TestSlidingWindowExact128(t *testing.T) {
	const limit, w = 4_000_000_000_000_000_000, 4_000_000_000
	const ns = w * nsPerSec
	st := SlidingWindowState{Start: -ns, Curr: limit}

	got, out, err := SlidingWindow(st, true, tBase, sw(limit, w, 1_700_000_000_000_000_000))
	want := Outcome{Result: Result{Limit: limit, Remaining: 0, RetryAfter: -1, ResetAfter: 6_300_000_000},
		Write: WriteStore, ExpireMs: 2 * ns / nsPerMs}
	wantSt := SlidingWindowState{Prev: limit, Curr: 1_700_000_000_000_000_000}
	if err != nil || out != want || got != wantSt {
		t.Errorf("fits: got %+v %+v %v\nwant %+v %+v", got, out, err, wantSt, want)
	}

	// One more: room 2.3e18−1 = prev's weight at e = 1.7e18+1, 1 ns away.
	got, out, err = SlidingWindow(st, true, tBase, sw(limit, w, 1_700_000_000_000_000_001))
	want = Outcome{Result: Result{Limited: true, Limit: limit, Remaining: 1_700_000_000_000_000_000,
		RetryAfter: 1, ResetAfter: 2_300_000_000}}
	if err != nil || out != want || got != st {
		t.Errorf("1 over: got %+v %+v %v\nwant %+v", got, out, err, want)
	}
}

func TestSlidingWindowRangeErrors(t *testing.T) {
	type c = call[SlidingWindowState, SlidingWindowRequest]
	runCalls(t, SlidingWindow, []c{
		// [9223372030e9, +10s) and the window after it end past MaxInt64.
		{name: "window end overflows", now: math.MaxInt64 - 1, req: sw(5, 10, 1), err: ErrWindowRange},
		// [9223372020e9, 9223372030e9): its end fits, the next one's not.
		{name: "next window end overflows", now: 9_223_372_025 * nsPerSec, req: sw(5, 10, 0), err: ErrWindowRange},
		{name: "window start overflows", now: math.MinInt64, req: sw(5, 3, 1), err: ErrWindowRange},
		// A stored window far ahead (the clock went back): its end overflows.
		{name: "stored window near MaxInt64", st: SlidingWindowState{Start: 9_223_372_030 * nsPerSec, Curr: 1},
			exists: true, now: tBase, req: sw(5, 10, 1), err: ErrWindowRange},
		{name: "invalid request", now: tBase, req: sw(0, 1, 1), err: ErrLimitNotPositive},
	})
}

func TestSlidingWindowValidate(t *testing.T) {
	runValidations(t, []validation[SlidingWindowRequest]{
		{sw(1, 1, 1), nil},
		{sw(0, 0, 1), ErrLimitNotPositive},
		{sw(-1, math.MaxInt64, 1), ErrLimitNotPositive},
		{sw(1, 0, 1), ErrWindowNotPositive},
		{sw(1, -1, 1), ErrWindowNotPositive},
		{sw(1, math.MaxInt64/nsPerSec, 1), nil},
		{sw(1, math.MaxInt64/nsPerSec+1, 1), ErrWindowRange},
		{swMS(1, math.MaxInt64/nsPerMs, 1), nil},
		{swMS(1, math.MaxInt64/nsPerMs+1, 1), ErrWindowRange},
		{sw(math.MaxInt64, 1, math.MinInt64), nil},
		{sw(100_001, 1, 1), nil},
		{swExact(100_000, 1, 1), nil},
		{swExact(100_001, 1, 1), ErrExactLimit},
		{swExact(0, 1, 1), ErrLimitNotPositive},
		{swExact(100_001, 0, 1), ErrWindowNotPositive},
		{swExact(100_001, math.MaxInt64, 1), ErrExactLimit}, // before the window's range
	})
}

// TestSlidingWindowRobust runs random requests, valid but extreme, on
// random states and clocks: no panic, only the documented error, sane
// replies.
func TestSlidingWindowRobust(t *testing.T) {
	robust[SlidingWindowState, SlidingWindowRequest]{
		seed: [2]uint64{5, 6}, f: SlidingWindow, rangeErr: ErrWindowRange,
		req: func(rng *rand.Rand) SlidingWindowRequest {
			return SlidingWindowRequest{Limit: pickInt64(rng), Window: pickInt64(rng), Cost: pickInt64(rng),
				Millis: rng.IntN(2) == 0}
		},
		st: func(rng *rand.Rand) SlidingWindowState {
			return SlidingWindowState{Start: pickInt64(rng), Prev: pickInt64(rng), Curr: pickInt64(rng)}
		},
		limitAndCost: func(r SlidingWindowRequest) (int64, int64) { return r.Limit, r.Cost },
		stored: func(_ SlidingWindowRequest, st SlidingWindowState) bool {
			return st.Curr >= 0 && st.Prev >= 0 && st.Curr+st.Prev != 0
		},
	}.run(t)
}

func TestSlidingWindowAllocs(t *testing.T) {
	st := SlidingWindowState{Start: tBase, Prev: 3, Curr: 2}
	wantNoAllocs(t, func() {
		_, _, _ = SlidingWindow(st, true, tBase+nsPerSec, sw(10, 10, 1))
	})
}
