package limiter

import (
	"errors"
	"math"
	"testing"
)

// now0 is a whole second, so that sub-second parts in the cases below are
// exactly what they say.
const now0 = int64(1_700_000_000_000_000_000)

func mustParams(t *testing.T, r GCRARequest) GCRAParams {
	t.Helper()
	p, err := r.Params()
	if err != nil {
		t.Fatalf("Params(%+v): %v", r, err)
	}
	return p
}

func TestGCRAParams(t *testing.T) {
	cases := []struct {
		name string
		req  GCRARequest
		want GCRAParams
		err  error
	}{
		{"readme", GCRARequest{15, 30, 60, 1}, GCRAParams{Interval: 2e9, Tolerance: 32e9, Limit: 16, Increment: 2e9}, nil},
		// 1e9/3 = 333333333.33… truncated.
		{"fractional interval", GCRARequest{2, 3, 1, 1}, GCRAParams{Interval: 333333333, Tolerance: 999999999, Limit: 3, Increment: 333333333}, nil},
		{"quantity 0", GCRARequest{0, 1, 1, 0}, GCRAParams{Interval: 1e9, Tolerance: 1e9, Limit: 1, Increment: 0}, nil},
		{"refund", GCRARequest{0, 1, 1, -3}, GCRAParams{Interval: 1e9, Tolerance: 1e9, Limit: 1, Increment: -3e9}, nil},
		{"count 0", GCRARequest{1, 0, 60, 1}, GCRAParams{}, ErrZeroRate},
		{"period 0", GCRARequest{1, 10, 0, 1}, GCRAParams{}, ErrZeroRate},
		// Zero rate is checked before the sign, as redis-cell checks it.
		{"count 0 period negative", GCRARequest{1, 0, -5, 1}, GCRAParams{}, ErrZeroRate},
		{"above 1 per ns", GCRARequest{1, 2_000_000_001, 1, 1}, GCRAParams{}, ErrZeroRate},
		{"negative max_burst", GCRARequest{-1, 10, 60, 1}, GCRAParams{}, ErrNegativeMaxBurst},
		{"negative count", GCRARequest{1, -10, 60, 1}, GCRAParams{}, ErrNegativeCount},
		{"negative period", GCRARequest{1, 10, -60, 1}, GCRAParams{}, ErrNegativePeriod},
		{"period overflows ns", GCRARequest{1, 1, 9_223_372_037, 1}, GCRAParams{}, ErrPeriodRange},
		{"max_burst+1 overflows", GCRARequest{math.MaxInt64, 1, 1, 1}, GCRAParams{}, ErrMaxBurstRange},
		{"tolerance overflows", GCRARequest{1 << 40, 1, 1 << 30, 1}, GCRAParams{}, ErrMaxBurstRange},
		{"increment overflows", GCRARequest{1, 1, 60, 1 << 40}, GCRAParams{}, ErrQuantityRange},
		{"negative increment overflows", GCRARequest{1, 1, 60, math.MinInt64}, GCRAParams{}, ErrQuantityRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.req.Params()
			if !errors.Is(err, c.err) || got != c.want {
				t.Fatalf("got %+v, %v; want %+v, %v", got, err, c.want, c.err)
			}
		})
	}
}

// gcraWant is what one GCRA call returns: its Outcome, and the TAT it
// stores (compared only when Write is WriteStore).
type gcraWant struct {
	Result   Result
	Write    Write
	TAT      int64
	ExpireMs int64
}

func TestGCRA(t *testing.T) {
	readme := GCRARequest{MaxBurst: 15, Count: 30, Period: 60, Quantity: 1}
	withQ := func(q int64) GCRARequest { r := readme; r.Quantity = q; return r }
	cases := []struct {
		name   string
		req    GCRARequest
		tat    int64 // relative to now; ignored when !exists
		exists bool
		now    int64
		want   gcraWant
	}{
		{name: "README example on a fresh key", req: readme, now: now0,
			want: gcraWant{Result{false, 16, 15, -1, 2}, WriteStore, now0 + 2e9, now0/1e6 + 2000}},
		{name: "16th call: exactly at the allow instant is allowed", req: readme, tat: 30e9, exists: true, now: now0,
			want: gcraWant{Result{false, 16, 0, -1, 32}, WriteStore, now0 + 32e9, now0/1e6 + 32000}},
		{name: "17th call is limited", req: readme, tat: 32e9, exists: true, now: now0,
			want: gcraWant{Result: Result{true, 16, 0, 2, 32}}},
		{name: "one ns past the allow instant", req: readme, tat: 30e9 + 1, exists: true, now: now0,
			// diff = -1 ns: limited, retry 1 ns → 0 s (no +1 below 1 ms).
			want: gcraWant{Result: Result{true, 16, 0, 0, 30}}},
		{name: "retry 2.0009s rounds to 2", req: readme, tat: 32_000_900_000, exists: true, now: now0,
			want: gcraWant{Result: Result{true, 16, 0, 2, 32}}},
		{name: "retry 2.001s rounds to 3", req: readme, tat: 32_001_000_000, exists: true, now: now0,
			want: gcraWant{Result: Result{true, 16, 0, 3, 33}}},
		{name: "reset 2.0009s rounds to 2", req: readme, tat: 900_000, exists: true, now: now0,
			// ttl 2.0009 s; next = 29.9991 s → 29999100 µs / 2000000 µs = 14.99955 → 14.
			want: gcraWant{Result{false, 16, 14, -1, 2}, WriteStore, now0 + 2_000_900_000, now0/1e6 + 2000}},
		{name: "reset 2.001s rounds to 3", req: readme, tat: 1_000_000, exists: true, now: now0,
			want: gcraWant{Result{false, 16, 14, -1, 3}, WriteStore, now0 + 2_001_000_000, now0/1e6 + 2001}},
		{name: "stale TAT in the past counts from now", req: readme, tat: -50e9, exists: true, now: now0,
			want: gcraWant{Result{false, 16, 15, -1, 2}, WriteStore, now0 + 2e9, now0/1e6 + 2000}},
		{name: "expiry takes floor of now in ms", req: readme, now: now0 + 1_500_000,
			want: gcraWant{Result{false, 16, 15, -1, 2}, WriteStore, now0 + 1_500_000 + 2e9, now0/1e6 + 1 + 2000}},
		{name: "quantity 0 on a fresh key stores a 0 ms ttl", req: withQ(0), now: now0,
			want: gcraWant{Result{false, 16, 16, -1, 0}, WriteStore, now0, now0 / 1e6}},
		{name: "quantity 0 after limits were lowered is limited", req: GCRARequest{0, 1, 1, 0}, tat: 5e9, exists: true, now: now0,
			// τ = 1 s; tat 5 s ahead: allow_at = 4 s ahead: limited, retry 4, reset 5.
			want: gcraWant{Result: Result{true, 1, 0, 4, 5}}},
		{name: "quantity above the limit is never allowed", req: withQ(17), now: now0,
			want: gcraWant{Result: Result{true, 16, 16, -1, 0}}},
		{name: "quantity equal to the limit is allowed on a full key", req: withQ(16), now: now0,
			want: gcraWant{Result{false, 16, 0, -1, 32}, WriteStore, now0 + 32e9, now0/1e6 + 32000}},
		{name: "refund", req: withQ(-3), tat: 10e9, exists: true, now: now0,
			want: gcraWant{Result{false, 16, 14, -1, 4}, WriteStore, now0 + 4e9, now0/1e6 + 4000}},
		{name: "refund to exactly now is stored", req: withQ(-1), tat: 2e9, exists: true, now: now0,
			want: gcraWant{Result{false, 16, 16, -1, 0}, WriteStore, now0, now0 / 1e6}},
		{name: "over-refund keeps no state", req: withQ(-5), tat: 2e9, exists: true, now: now0,
			want: gcraWant{Result: Result{false, 16, 16, -1, 0}, Write: WriteDelete}},
		{name: "refund on a fresh key keeps no state", req: withQ(-1), now: now0,
			want: gcraWant{Result: Result{false, 16, 16, -1, 0}, Write: WriteDelete}},
		{name: "fractional interval, remaining in whole µs", req: GCRARequest{2, 3, 1, 1}, now: now0,
			// T = 333333333 ns; ttl = T → 0.333 s → 0 + 1 (≥ 1 ms) = 1;
			// next = 666666666 ns → 666666 µs / 333333 µs = 2.
			want: gcraWant{Result{false, 3, 2, -1, 1}, WriteStore, now0 + 333333333, now0/1e6 + 333}},
		{name: "interval under 1 µs divides by zero like f64", req: GCRARequest{4, 2_000_000, 1, 1}, now: now0,
			// T = 500 ns → 0 µs; next = 2000 ns → 2 µs / 0 → +Inf → saturates.
			want: gcraWant{Result{false, 5, math.MaxInt64, -1, 0}, WriteStore, now0 + 500, now0 / 1e6}},
		{name: "0/0 is NaN, which converts to 0", req: GCRARequest{0, 2_000_000, 1, 1}, now: now0,
			want: gcraWant{Result{false, 1, 0, -1, 0}, WriteStore, now0 + 500, now0 / 1e6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustParams(t, c.req)
			in := GCRAState{TAT: c.now + c.tat}
			st, out, err := GCRA(in, c.exists, c.now, p)
			if err != nil {
				t.Fatal(err)
			}
			got := gcraWant{Result: out.Result, Write: out.Write, ExpireMs: out.ExpireMs}
			switch out.Write {
			case WriteStore:
				got.TAT = st.TAT
			case WriteNone:
				if st != in {
					t.Fatalf("a limited request changed the state: %+v → %+v", in, st)
				}
			}
			if got != c.want {
				t.Fatalf("\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestGCRAOverflow(t *testing.T) {
	p := mustParams(t, GCRARequest{MaxBurst: 1, Count: 1, Period: 1, Quantity: 10})
	if _, _, err := GCRA(GCRAState{TAT: math.MaxInt64 - 10}, true, now0, p); !errors.Is(err, ErrQuantityRange) {
		t.Fatalf("TAT near the top: got %v, want ErrQuantityRange", err)
	}
	refund := mustParams(t, GCRARequest{MaxBurst: 1, Count: 1, Period: 1, Quantity: -10})
	if _, _, err := GCRA(GCRAState{}, false, math.MinInt64+10, refund); !errors.Is(err, ErrQuantityRange) {
		t.Fatalf("refund below the bottom: got %v, want ErrQuantityRange", err)
	}
}

// TestGCRATATOutOfReach: a limited request on a key whose TAT lies further
// ahead of now than an int64 reaches (the clock set near its lower end, as
// only DEBUG CLOCK can) answers ErrQuantityRange, as every step that
// overflows does (docs/commands.md 4.5), never a negative reset_after:
// FuzzCommandLayer found it replying [1 9 0 9223372029 -9223372036].
func TestGCRATATOutOfReach(t *testing.T) {
	p := mustParams(t, GCRARequest{MaxBurst: 8, Count: 1, Period: 1, Quantity: 1})
	for _, c := range []struct{ tat, now int64 }{
		{1_110_111_111, math.MinInt64 + 999_999_999},
		{p.Tolerance - p.Increment, math.MinInt64}, // now − allow_at is the lowest int64
	} {
		if _, out, err := GCRA(GCRAState{TAT: c.tat}, true, c.now, p); !errors.Is(err, ErrQuantityRange) {
			t.Errorf("TAT %d at %d: got %+v, %v; want ErrQuantityRange", c.tat, c.now, out.Result, err)
		}
	}
}

func TestCellSeconds(t *testing.T) {
	cases := []struct{ d, want int64 }{
		{0, 0},
		{2_000_000_000, 2},
		{2_000_900_000, 2}, // 0.9 ms: no +1
		{2_001_000_000, 3}, // 1 ms: +1
		{900_000, 0},
		{1_000_000, 1},
		{999_999_999, 1},
		{-1_500_000_000, -1}, // negative: truncate, never +1
		{-999_999, 0},
		// Beyond 2²⁴ s the f64 sum rounds up to the next second, then +1.
		{16_777_216*1e9 + 999_999_999, 16_777_218},
	}
	for _, c := range cases {
		if got := cellSeconds(c.d); got != c.want {
			t.Errorf("cellSeconds(%d) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestRustAsI64(t *testing.T) {
	cases := []struct {
		f    float64
		want int64
	}{
		{math.NaN(), 0},
		{math.Inf(1), math.MaxInt64},
		{math.Inf(-1), math.MinInt64},
		{1e19, math.MaxInt64},
		{-1e19, math.MinInt64},
		{9223372036854775807.0, math.MaxInt64}, // rounds to 2⁶³ in f64
		{-1.9, -1},
		{1.9, 1},
		{-0.5, 0},
	}
	for _, c := range cases {
		if got := rustAsI64(c.f); got != c.want {
			t.Errorf("rustAsI64(%v) = %d, want %d", c.f, got, c.want)
		}
	}
}

func TestCheckedArithmetic(t *testing.T) {
	if _, ok := mulChecked(math.MinInt64, -1); ok {
		t.Error("MinInt64 * -1 must overflow")
	}
	if v, ok := mulChecked(math.MinInt64, 1); !ok || v != math.MinInt64 {
		t.Errorf("MinInt64 * 1 = %d, %v", v, ok)
	}
	if v, ok := mulChecked(-(1 << 62), 2); !ok || v != math.MinInt64 {
		t.Errorf("-2⁶² * 2 = %d, %v", v, ok)
	}
	if _, ok := mulChecked(1<<62, 2); ok {
		t.Error("2⁶² * 2 must overflow")
	}
	if _, ok := addChecked(math.MaxInt64, 1); ok {
		t.Error("MaxInt64 + 1 must overflow")
	}
	if _, ok := subChecked(math.MinInt64, 1); ok {
		t.Error("MinInt64 - 1 must overflow")
	}
	if v, ok := subChecked(-1, math.MinInt64); !ok || v != math.MaxInt64 {
		t.Errorf("-1 - MinInt64 = %d, %v", v, ok)
	}
}
