package engine

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
		return int64(-lo), true //nolint:gosec // lo ≤ 2⁶³ checked above
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
