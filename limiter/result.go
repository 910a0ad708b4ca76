package limiter

// Result is the reply every limiter command shares: five integers, in the
// order they are sent on the wire.
type Result struct {
	// Limited is true when the request was refused (and changed nothing).
	Limited bool
	// Limit is the most the key can hold or spend at once.
	Limit int64
	// Remaining is what can still be spent right now, after this request.
	Remaining int64
	// RetryAfter is the time until the same request would be allowed, in
	// the command's reply unit; -1 when allowed or never allowed.
	RetryAfter int64
	// ResetAfter is the time until the key is back to its idle state, in
	// the command's reply unit; 0 when it already is. LB.QUEUE puts the
	// wait before the request's turn here instead (LeakyQueue).
	ResetAfter int64
}

const (
	maxInt64 = int64(^uint64(0) >> 1)
	minInt64 = -maxInt64 - 1

	nsPerMs  = int64(1_000_000)
	nsPerSec = int64(1_000_000_000)
)

// ceilDiv returns ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// floorDiv returns ⌊a/b⌋ for b > 0 and any a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// roundUp converts a non-negative duration in ns to whole units (1e9 for
// seconds, 1e6 for milliseconds), rounding up.
func roundUp(d, unit int64) int64 {
	if d <= 0 {
		return 0
	}
	return ceilDiv(d, unit)
}

// expireMsAt returns the expiry millisecond for a key that becomes idle at
// idleAt ns: ⌈idleAt/10⁶⌉.
func expireMsAt(idleAt int64) int64 {
	if idleAt <= 0 {
		return idleAt / nsPerMs
	}
	return ceilDiv(idleAt, nsPerMs)
}
