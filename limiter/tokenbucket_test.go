package limiter

import (
	"math"
	"math/rand/v2"
	"testing"
)

// tBase is a Unix instant in ns that is a multiple of 10 s (and of 1 s, 1 ms).
const tBase = int64(1_700_000_000) * nsPerSec

// tBaseMs is tBase in ms.
const tBaseMs = tBase / nsPerMs

func tb(capacity, refill, period, cost int64) TokenBucketRequest {
	return TokenBucketRequest{Capacity: capacity, Refill: refill, Period: period, Cost: cost}
}

func tbMS(capacity, refill, period, cost int64) TokenBucketRequest {
	r := tb(capacity, refill, period, cost)
	r.Millis = true
	return r
}

func TestTokenBucket(t *testing.T) {
	// A bucket of 10 that refills 1/s and is empty at tBase: full at tBase+10s.
	empty10 := TokenBucketState{FullAt: tBase + 10*nsPerSec}
	runCalls(t, TokenBucket, []call[TokenBucketState, TokenBucketRequest]{
		{
			// 1 token of 10 missing: full again 1 s later.
			name: "fresh key", now: tBase, req: tb(10, 1, 1, 1),
			wantSt: TokenBucketState{FullAt: tBase + nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 1},
				Write: WriteStore, ExpireMs: tBaseMs + 1000},
		},
		{
			// Empty: the 9-token target (missing ≤ 9e9) is reached at tBase+1s.
			name: "empty, limited", st: empty10, exists: true, now: tBase, req: tb(10, 1, 1, 1),
			wantSt: empty10,
			want:   Outcome{Result: Result{Limited: true, Limit: 10, RetryAfter: 1, ResetAfter: 10}},
		},
		{
			// missing = 9e9+1 > 9e9: 1 ns short; reset 9e9+1 ns → 10 s.
			name: "one ns before a token", st: empty10, exists: true, now: tBase + nsPerSec - 1,
			req: tb(10, 1, 1, 1), wantSt: empty10,
			want: Outcome{Result: Result{Limited: true, Limit: 10, RetryAfter: 1, ResetAfter: 10}},
		},
		{
			// Same in ms: retry 1 ns → 1 ms; reset 9e9+1 ns → 9001 ms.
			name: "one ns before a token, MS", st: empty10, exists: true, now: tBase + nsPerSec - 1,
			req: tbMS(10, 1, 1000, 1), wantSt: empty10,
			want: Outcome{Result: Result{Limited: true, Limit: 10, RetryAfter: 1, ResetAfter: 9001}},
		},
		{
			// missing = 9e9 exactly: allowed, empty again, full at now+10s.
			name: "exactly at the token", st: empty10, exists: true, now: tBase + nsPerSec,
			req:    tb(10, 1, 1, 1),
			wantSt: TokenBucketState{FullAt: tBase + 11*nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 10},
				Write: WriteStore, ExpireMs: tBaseMs + 11000},
		},
		{
			// 3 per 1000 ms: 1e9 scaled missing = 333333333 ns + 1/3 ns;
			// idle at tBase+333333334 → 334 ms, expiry ⌈…/1e6⌉ = tBaseMs+334.
			name: "sub-ms remainder, MS", now: tBase, req: tbMS(3, 3, 1000, 1),
			wantSt: TokenBucketState{FullAt: tBase + 333_333_333, Rem: 1},
			want: Outcome{Result: Result{Limit: 3, Remaining: 2, RetryAfter: -1, ResetAfter: 334},
				Write: WriteStore, ExpireMs: tBaseMs + 334},
		},
		{
			// Same in seconds: 333333334 ns → 1 s.
			name: "sub-second remainder", now: tBase, req: tb(3, 3, 1, 1),
			wantSt: TokenBucketState{FullAt: tBase + 333_333_333, Rem: 1},
			want: Outcome{Result: Result{Limit: 3, Remaining: 2, RetryAfter: -1, ResetAfter: 1},
				Write: WriteStore, ExpireMs: tBaseMs + 334},
		},
		{
			// Empty 3/3/1s bucket at tBase+333333333: missing = 666666667·3 =
			// 2000000001 > 2e9; allowed from tBase+1e9−⌊2e9/3⌋ = tBase+333333334.
			name: "1/3 s token, 1 ns early", st: TokenBucketState{FullAt: tBase + nsPerSec}, exists: true,
			now: tBase + 333_333_333, req: tb(3, 3, 1, 1),
			wantSt: TokenBucketState{FullAt: tBase + nsPerSec},
			want:   Outcome{Result: Result{Limited: true, Limit: 3, RetryAfter: 1, ResetAfter: 1}},
		},
		{
			// missing = 666666666·3 = 1999999998, +1e9 = 2999999998 =
			// 3·999999999 + 1: full at tBase+333333334+999999999 + 1/3 ns.
			name: "1/3 s token, on time", st: TokenBucketState{FullAt: tBase + nsPerSec}, exists: true,
			now: tBase + 333_333_334, req: tb(3, 3, 1, 1),
			wantSt: TokenBucketState{FullAt: tBase + 1_333_333_333, Rem: 1},
			want: Outcome{Result: Result{Limit: 3, Remaining: 0, RetryAfter: -1, ResetAfter: 1},
				Write: WriteStore, ExpireMs: tBaseMs + 1334},
		},
		{
			name: "cost above capacity, fresh", now: tBase, req: tb(5, 1, 1, 6),
			want: Outcome{Result: Result{Limited: true, Limit: 5, Remaining: 5, RetryAfter: -1}},
		},
		{
			name: "cost above capacity, not full", st: empty10, exists: true, now: tBase + 3*nsPerSec,
			req: tb(10, 1, 1, 11), wantSt: empty10,
			want: Outcome{Result: Result{Limited: true, Limit: 10, Remaining: 3, RetryAfter: -1, ResetAfter: 7}},
		},
		{
			// missing 2.5 tokens: 7 left, full in 2.5 s → 3 s.
			name: "cost 0 reads", st: TokenBucketState{FullAt: tBase + 2_500_000_000}, exists: true, now: tBase,
			req: tb(10, 1, 1, 0), wantSt: TokenBucketState{FullAt: tBase + 2_500_000_000},
			want: Outcome{Result: Result{Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 3}},
		},
		{
			name: "cost 0, fresh", now: tBase, req: tb(10, 1, 1, 0),
			want: Outcome{Result: Result{Limit: 10, Remaining: 10, RetryAfter: -1}},
		},
		{
			// 5 missing, 2 back: 3 missing, full at tBase+3s.
			name: "refund", st: TokenBucketState{FullAt: tBase + 5*nsPerSec}, exists: true, now: tBase,
			req:    tb(10, 1, 1, -2),
			wantSt: TokenBucketState{FullAt: tBase + 3*nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 3},
				Write: WriteStore, ExpireMs: tBaseMs + 3000},
		},
		{
			name: "over-refund caps at full", st: TokenBucketState{FullAt: tBase + 5*nsPerSec}, exists: true,
			now:  tBase,
			req:  tb(10, 1, 1, -7),
			want: Outcome{Result: Result{Limit: 10, Remaining: 10, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			name: "refund of MinInt64", st: empty10, exists: true, now: tBase, req: tb(10, 1, 1, math.MinInt64),
			want: Outcome{Result: Result{Limit: 10, Remaining: 10, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			name: "refund on a fresh key", now: tBase, req: tb(10, 1, 1, -1),
			want: Outcome{Result: Result{Limit: 10, Remaining: 10, RetryAfter: -1}, Write: WriteDelete},
		},
		{
			// Stored by capacity 10: 8 s to full. Capacity now 4: at most 4e9
			// missing, so empty; the stored state reaches 3e9 missing
			// (target) at tBase+8s−3s.
			name: "capacity lowered", st: TokenBucketState{FullAt: tBase + 8*nsPerSec}, exists: true, now: tBase,
			req: tb(4, 1, 1, 1), wantSt: TokenBucketState{FullAt: tBase + 8*nsPerSec},
			want: Outcome{Result: Result{Limited: true, Limit: 4, RetryAfter: 5, ResetAfter: 8}},
		},
		{
			// 4 s to full at 2/s: 8 missing, 2 there; take 1: 9e9 scaled,
			// full in 4.5 s.
			name: "refill raised", st: TokenBucketState{FullAt: tBase + 4*nsPerSec}, exists: true, now: tBase,
			req:    tb(10, 2, 1, 1),
			wantSt: TokenBucketState{FullAt: tBase + 4_500_000_000},
			want: Outcome{Result: Result{Limit: 10, Remaining: 1, RetryAfter: -1, ResetAfter: 5},
				Write: WriteStore, ExpireMs: tBaseMs + 4500},
		},
		{
			// Rem 5 from an older refill clamps to 1 (< refill 2):
			// missing = 1e9·2+1, 7 left; idle at FullAt+1 → 2 s.
			name: "stored Rem above refill", st: TokenBucketState{FullAt: tBase + nsPerSec, Rem: 5}, exists: true,
			now: tBase, req: tb(10, 2, 1, 0), wantSt: TokenBucketState{FullAt: tBase + nsPerSec, Rem: 5},
			want: Outcome{Result: Result{Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 2}},
		},
		{
			// Refill above the scaled capacity: 1e9 missing at 3e9/ns is
			// full within the same ns plus 1/3: idle at now+1.
			name: "refill faster than 1 token/ns", now: tBase, req: tb(1, 3_000_000_000, 1, 1),
			wantSt: TokenBucketState{FullAt: tBase, Rem: 1_000_000_000},
			want: Outcome{Result: Result{Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: 1},
				Write: WriteStore, ExpireMs: tBaseMs + 1},
		},
		{
			// Full at tBase+1s but the clock is 100 s back: 101 s missing,
			// capped at empty; 9 tokens' worth is back at tBase−8s.
			name: "clock went backwards", st: TokenBucketState{FullAt: tBase + nsPerSec}, exists: true,
			now: tBase - 100*nsPerSec, req: tb(10, 1, 1, 1), wantSt: TokenBucketState{FullAt: tBase + nsPerSec},
			want: Outcome{Result: Result{Limited: true, Limit: 10, RetryAfter: 92, ResetAfter: 101}},
		},
		{
			name: "stored FullAt at MinInt64", st: TokenBucketState{FullAt: math.MinInt64}, exists: true,
			now: tBase, req: tb(10, 1, 1, 1),
			wantSt: TokenBucketState{FullAt: tBase + nsPerSec},
			want: Outcome{Result: Result{Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 1},
				Write: WriteStore, ExpireMs: tBaseMs + 1000},
		},
		{
			// FullAt−now overflows: empty; times saturate at MaxInt64 ns =
			// 9223372036.85… s → 9223372037.
			name: "stored FullAt at MaxInt64, clock at MinInt64", st: TokenBucketState{FullAt: math.MaxInt64},
			exists: true, now: math.MinInt64, req: tb(10, 1, 1, 1),
			wantSt: TokenBucketState{FullAt: math.MaxInt64},
			want: Outcome{Result: Result{Limited: true, Limit: 10, RetryAfter: 9223372037,
				ResetAfter: 9223372037}},
		},
	})
}

// TestTokenBucketNoDrift takes one token at each instant a token of a
// 3-per-second bucket comes back, 3000 times. The k-th token is back at
// tBase + k·10⁹/3 ns exactly, so it must be refused 1 ns before
// ⌈k·10⁹/3⌉ and allowed at it, and the state must be the closed form.
func TestTokenBucketNoDrift(t *testing.T) {
	req := tb(3, 3, 1, 1)
	st := TokenBucketState{FullAt: tBase + nsPerSec} // empty at tBase
	for k := int64(1); k <= 3000; k++ {
		at := tBase + ceilDiv(k*nsPerSec, 3)
		_, out, err := TokenBucket(st, true, at-1, req)
		if err != nil || !out.Result.Limited || out.Result.RetryAfter != 1 || out.Write != WriteNone {
			t.Fatalf("k=%d, 1 ns early: %+v %v", k, out, err)
		}
		st, out, err = TokenBucket(st, true, at, req)
		if err != nil || out.Result.Limited || out.Result.Remaining != 0 || out.Write != WriteStore {
			t.Fatalf("k=%d, on time: %+v %v", k, out, err)
		}
		// Full 1 s after the k-th token's exact instant: FullAt + Rem/3 =
		// tBase + 10⁹ + k·10⁹/3, and k·10⁹ ≡ k (mod 3).
		want := TokenBucketState{FullAt: tBase + nsPerSec + k*nsPerSec/3, Rem: k % 3}
		if st != want {
			t.Fatalf("k=%d: state %+v, want %+v", k, st, want)
		}
	}
	// 3000 tokens at 3/s: exactly 1000 s later, still empty for 1 s.
	if want := (TokenBucketState{FullAt: tBase + 1001*nsPerSec}); st != want {
		t.Fatalf("final state %+v, want %+v", st, want)
	}
}

// TestTokenBucketWholePeriods empties a 3/3/1s bucket and waits exactly one
// period, 1000 times: each time exactly 3 tokens are back.
func TestTokenBucketWholePeriods(t *testing.T) {
	st, exists := TokenBucketState{}, false
	for i := range int64(1000) {
		now := tBase + i*nsPerSec
		var out Outcome
		var err error
		st, out, err = TokenBucket(st, exists, now, tb(3, 3, 1, 3))
		exists = true
		want := Outcome{Result: Result{Limit: 3, RetryAfter: -1, ResetAfter: 1},
			Write: WriteStore, ExpireMs: tBaseMs + (i+1)*1000}
		if err != nil || out != want || st != (TokenBucketState{FullAt: now + nsPerSec}) {
			t.Fatalf("i=%d: %+v %+v %v", i, st, out, err)
		}
	}
}

func TestTokenBucketRangeErrors(t *testing.T) {
	type c = call[TokenBucketState, TokenBucketRequest]
	runCalls(t, TokenBucket, []c{
		// now+1e9 > MaxInt64: the full instant does not fit.
		{name: "full instant overflows", now: math.MaxInt64 - 500_000_000, req: tb(10, 1, 1, 1), err: ErrPeriodRange},
		// FullAt = MaxInt64 with Rem 1: idle at MaxInt64+1.
		{name: "idle ns overflows", now: math.MaxInt64 - 333_333_333, req: tb(3, 3, 1, 1), err: ErrPeriodRange},
		{name: "invalid request", now: tBase, req: tb(0, 1, 1, 1), err: ErrCapacityNotPositive},
	})
}

func TestTokenBucketValidate(t *testing.T) {
	const maxSec = math.MaxInt64 / nsPerSec // 9223372036
	const maxMs = math.MaxInt64 / nsPerMs   // 9223372036854
	runValidations(t, []validation[TokenBucketRequest]{
		{tb(1, 1, 1, 1), nil},
		{tb(0, 0, 0, 1), ErrCapacityNotPositive},
		{tb(-1, 1, math.MaxInt64, 1), ErrCapacityNotPositive},
		{tb(1, 0, 0, 1), ErrRefillNotPositive},
		{tb(1, -3, 1, 1), ErrRefillNotPositive},
		{tb(1, 1, 0, 1), ErrPeriodNotPositive},
		{tb(1, 1, -1, 1), ErrPeriodNotPositive},
		{tb(1, 1, maxSec, 1), nil},
		{tb(1, 1, maxSec+1, 1), ErrPeriodRange},
		{tbMS(1, 1, maxMs, 1), nil},
		{tbMS(1, 1, maxMs+1, 1), ErrPeriodRange},
		{tb(2, 1, maxSec, 1), ErrCapacityRange},             // 2·9223372036e9 > MaxInt64
		{tb(math.MaxInt64, 1, maxSec+1, 1), ErrPeriodRange}, // period first
		{tb(9, 1, 1_000_000_000, 1), nil},                   // 9e18 fits
		{tb(10, 1, 1_000_000_000, 1), ErrCapacityRange},     // 1e19 does not
		{tb(1, math.MaxInt64, 1, math.MaxInt64), nil},
		{tb(1, 1, 1, math.MinInt64), nil},
	})
}

// extremeInt64s are int64s at and near the edges, for the robustness tests.
var extremeInt64s = []int64{
	math.MinInt64, math.MinInt64 + 1, -1_000_000_000_000_000_000, -nsPerSec, -1, 0, 1, 2, 3, 7,
	999, nsPerMs, nsPerSec, tBase, tBase + 1, 1_000_000_000_000_000_000, math.MaxInt64 / 2,
	math.MaxInt64 - nsPerSec, math.MaxInt64 - 1, math.MaxInt64,
}

// pickInt64 returns an extreme value, a small one or a random one.
func pickInt64(rng *rand.Rand) int64 {
	switch rng.IntN(3) {
	case 0:
		return extremeInt64s[rng.IntN(len(extremeInt64s))]
	case 1:
		return rng.Int64N(1050) - 50
	}
	return rng.Int64() - rng.Int64()
}

// checkLimiterResult checks what every TB/SW/FW outcome must satisfy.
func checkLimiterResult(t *testing.T, out Outcome, limit, cost int64) {
	t.Helper()
	r := out.Result
	bad := r.Limit != limit || r.Remaining < 0 || r.Remaining > limit || r.ResetAfter < 0 ||
		r.Limited && out.Write != WriteNone ||
		out.Write == WriteDelete && (r.Remaining != limit || r.ResetAfter != 0) ||
		out.Write == WriteStore && r.ResetAfter < 1
	if r.Limited && cost <= limit {
		bad = bad || r.RetryAfter < 1
	} else {
		bad = bad || r.RetryAfter != -1
	}
	if bad {
		t.Fatalf("cost %d: bad outcome %+v", cost, out)
	}
}

// TestTokenBucketRobust runs random requests, valid but extreme, on random
// states and clocks: no panic, only the documented error, sane replies.
func TestTokenBucketRobust(t *testing.T) {
	robust[TokenBucketState, TokenBucketRequest]{
		seed: [2]uint64{1, 2}, f: TokenBucket, rangeErr: ErrPeriodRange,
		req: func(rng *rand.Rand) TokenBucketRequest {
			return TokenBucketRequest{Capacity: pickInt64(rng), Refill: pickInt64(rng), Period: pickInt64(rng),
				Cost: pickInt64(rng), Millis: rng.IntN(2) == 0}
		},
		st: func(rng *rand.Rand) TokenBucketState {
			return TokenBucketState{FullAt: pickInt64(rng), Rem: pickInt64(rng)}
		},
		limitAndCost: func(r TokenBucketRequest) (int64, int64) { return r.Capacity, r.Cost },
		stored: func(r TokenBucketRequest, st TokenBucketState) bool {
			return st.Rem >= 0 && st.Rem < r.Refill
		},
	}.run(t)
}

func TestTokenBucketAllocs(t *testing.T) {
	st := TokenBucketState{FullAt: tBase + 5}
	wantNoAllocs(t, func() {
		_, _, _ = TokenBucket(st, true, tBase, tb(10, 1, 1, 1))
	})
}
