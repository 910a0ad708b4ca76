package limiter

import (
	"math"
	"math/bits"
)

// rustAsI64 converts f to int64 the way Rust's `f as i64` does: truncation
// toward zero, saturating at the int64 bounds, NaN to 0. Go's int64(f) is
// implementation-defined out of range, so redis-cell's arithmetic needs this.
func rustAsI64(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= 9223372036854775807.0: // 2⁶³ as f64
		return maxInt64
	case f <= -9223372036854775808.0:
		return minInt64
	}
	return int64(f)
}

// addChecked returns a+b and whether it fits in an int64.
func addChecked(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

// subChecked returns a-b and whether it fits in an int64.
func subChecked(a, b int64) (int64, bool) {
	d := a - b
	return d, (d < a) == (b > 0)
}

// mulChecked returns a·b and whether it fits in an int64.
func mulChecked(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	neg := (a < 0) != (b < 0)
	hi, lo := bits.Mul64(absU(a), absU(b))
	if hi != 0 {
		return 0, false
	}
	if neg {
		if lo > 1<<63 {
			return 0, false
		}
		return int64(-lo), true // lo ≤ 2⁶³ checked above
	}
	if lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

func absU(a int64) uint64 {
	if a < 0 {
		return uint64(-a) // also right for minInt64: -a wraps to 2⁶³
	}
	return uint64(a)
}

// replyUnit is the ns in one unit of a TB/SW/FW reply's times.
func replyUnit(millis bool) int64 {
	if millis {
		return nsPerMs
	}
	return nsPerSec
}

// durationNs converts a period or window argument (seconds, or ms with
// millis) to ns, and reports whether it fits in an int64.
func durationNs(v int64, millis bool) (int64, bool) {
	return mulChecked(v, replyUnit(millis))
}

// subSat returns a−b, saturated to the int64 range.
func subSat(a, b int64) int64 {
	d, ok := subChecked(a, b)
	switch {
	case ok:
		return d
	case a > b:
		return maxInt64
	}
	return minInt64
}

// alignWindow returns the start of the window of length w holding t,
// ⌊t/w⌋·w, and whether it fits in an int64 (it may not for t near the
// lower bound).
func alignWindow(t, w int64) (int64, bool) {
	return mulChecked(floorDiv(t, w), w)
}

// mulLE reports whether a·b ≤ c·d, for a, b, c, d ≥ 0, exactly.
func mulLE(a, b, c, d int64) bool {
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	return h1 < h2 || h1 == h2 && l1 <= l2
}

// mulDiv returns ⌊a·b/c⌋ for a, b ≥ 0 and c > 0, and false when it does
// not fit in an int64.
func mulDiv(a, b, c int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > uint64(maxInt64) {
		return 0, false
	}
	return int64(q), true
}
