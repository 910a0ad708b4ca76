package limiter

import "math/bits"

// This file is TB.TAKE: a token bucket kept in the time domain. A bucket
// that is not full is the instant it will be full again, FullAt + Rem/Refill
// ns. The tokens missing at t, scaled by the period in ns, are then
// (FullAt − t)·Refill + Rem, so every step is integer arithmetic and refill
// is exact: after exactly period/refill one whole token is back, and
// take/wait cycles never drift.

// Validate checks r's arguments, in this order: capacity, refill and period
// are positive (ErrCapacityNotPositive, ErrRefillNotPositive,
// ErrPeriodNotPositive); the period in ns fits in an int64 (ErrPeriodRange);
// capacity·period_ns, the full bucket's scaled size, fits (ErrCapacityRange).
// Any cost is valid: above the capacity it is never allowed, and a refund
// larger than the bucket only fills it.
func (r TokenBucketRequest) Validate() error {
	_, err := r.periodNs()
	return err
}

// periodNs validates r and returns its period in ns.
func (r TokenBucketRequest) periodNs() (int64, error) {
	switch {
	case r.Capacity <= 0:
		return 0, ErrCapacityNotPositive
	case r.Refill <= 0:
		return 0, ErrRefillNotPositive
	case r.Period <= 0:
		return 0, ErrPeriodNotPositive
	}
	period, ok := durationNs(r.Period, r.Millis)
	if !ok {
		return 0, ErrPeriodRange
	}
	if _, ok := mulChecked(r.Capacity, period); !ok {
		return 0, ErrCapacityRange
	}
	return period, nil
}

// TokenBucket applies one TB.TAKE request at now (Unix ns) to a bucket whose
// stored state is st (exists false: no key, a full bucket). It validates r
// itself and returns Validate's error first.
//
// An allowed take or refund returns the new state with WriteStore, or
// WriteDelete when the bucket is full again; a limited request or a cost of
// 0 returns WriteNone and st unchanged.
//
// The stored state is read with the current arguments, so they may change
// between calls: the bucket keeps the instant it would be full, its missing
// tokens are recomputed with the new refill and period and capped at the new
// capacity. A limited request reports the times the stored state implies
// (the key is not rewritten). A clock that went backwards makes the bucket
// look emptier, never fuller, and never yields negative times.
//
// It returns ErrPeriodRange when the instant the bucket would be full again
// does not fit in an int64.
func TokenBucket(st TokenBucketState, exists bool, now int64, r TokenBucketRequest) (TokenBucketState, Outcome, error) {
	period, err := r.periodNs()
	if err != nil {
		return st, Outcome{}, err
	}
	unit := replyUnit(r.Millis)
	full := r.Capacity * period // fits: checked by periodNs
	cost := r.Cost

	// missing is the tokens missing now, scaled by period: 0 ≤ missing ≤ full.
	var fullAt, rem, missing int64
	if exists {
		fullAt, rem = st.FullAt, min(max(st.Rem, 0), r.Refill-1)
		missing = tbMissing(fullAt, rem, now, r.Refill, full)
	}

	res := Result{Limit: r.Capacity, Remaining: (full - missing) / period, RetryAfter: -1}
	switch {
	case cost == 0 || cost > r.Capacity: // a read, or never allowed
		res.Limited = cost != 0
		if missing > 0 {
			res.ResetAfter = roundUp(subSat(tbIdle(fullAt, rem), now), unit)
		}
		return st, Outcome{Result: res}, nil
	case cost < 0: // a refund: cost·period ≥ −full fits
		if cost <= -r.Capacity {
			missing = 0
		} else {
			missing = max(0, missing+cost*period)
		}
	case missing <= full-cost*period:
		missing += cost * period
	default: // limited: cost tokens are there once the raw missing ≤ target
		target := full - cost*period
		// (fullAt − t)·refill + rem ≤ target ⇔ t ≥ fullAt − ⌊(target − rem)/refill⌋
		allowAt := subSat(fullAt, floorDiv(target-rem, r.Refill))
		res.Limited = true
		res.RetryAfter = roundUp(subSat(allowAt, now), unit)
		res.ResetAfter = roundUp(subSat(tbIdle(fullAt, rem), now), unit)
		return st, Outcome{Result: res}, nil
	}

	if missing == 0 {
		res.Remaining = r.Capacity
		return TokenBucketState{}, Outcome{Result: res, Write: WriteDelete}, nil
	}
	next := TokenBucketState{Rem: missing % r.Refill}
	var ok bool
	if next.FullAt, ok = addChecked(now, missing/r.Refill); !ok {
		return st, Outcome{}, ErrPeriodRange
	}
	idle := next.FullAt
	if next.Rem > 0 {
		if idle, ok = addChecked(idle, 1); !ok {
			return st, Outcome{}, ErrPeriodRange
		}
	}
	res.Remaining = (full - missing) / period
	res.ResetAfter = roundUp(idle-now, unit)
	return next, Outcome{Result: res, Write: WriteStore, ExpireMs: expireMsAt(idle)}, nil
}

// tbMissing returns the tokens missing at t, scaled by the period,
// (fullAt − t)·refill + rem clamped to [0, full], with 0 ≤ rem < refill.
func tbMissing(fullAt, rem, t, refill, full int64) int64 {
	d, ok := subChecked(fullAt, t)
	switch {
	case !ok && fullAt > t:
		return full
	case !ok || d < 0: // d ≤ −1: d·refill + rem < 0
		return 0
	}
	hi, lo := bits.Mul64(uint64(d), uint64(refill))
	lo, carry := bits.Add64(lo, uint64(rem), 0)
	if hi != 0 || carry != 0 || lo > uint64(full) {
		return full
	}
	return int64(lo) // lo ≤ full checked above
}

// tbIdle returns the first whole ns at which a bucket full at
// fullAt + rem/refill is full, saturating at the int64 bound.
func tbIdle(fullAt, rem int64) int64 {
	if rem > 0 && fullAt < maxInt64 {
		return fullAt + 1
	}
	return fullAt
}
