package limiter

// This file is CL.THROTTLE: the generic cell rate algorithm exactly as
// redis-cell v0.5.0 computes it, with its integer-nanosecond arithmetic,
// its f64 steps and its rounding of durations to seconds. Where redis-cell
// overflows or crashes, the functions here return an error instead.

// GCRARequest holds CL.THROTTLE's arguments as parsed from the wire.
type GCRARequest struct {
	MaxBurst int64
	Count    int64 // per Period
	Period   int64 // seconds
	Quantity int64 // negative: a refund
}

// GCRAParams are the derived constants of one request, all in nanoseconds
// except Limit.
type GCRAParams struct {
	Interval  int64 // T, the emission interval
	Tolerance int64 // τ = T·(max_burst+1)
	Limit     int64 // max_burst+1
	Increment int64 // T·quantity
}

// Params validates req and derives its constants. The checks run in the
// order redis-cell's own would, then cellserver's additions: zero rate,
// negative arguments, 64-bit overflow.
func (req GCRARequest) Params() (GCRAParams, error) {
	if req.Count == 0 || req.Period == 0 {
		return GCRAParams{}, ErrZeroRate
	}
	switch {
	case req.MaxBurst < 0:
		return GCRAParams{}, ErrNegativeMaxBurst
	case req.Count < 0:
		return GCRAParams{}, ErrNegativeCount
	case req.Period < 0:
		return GCRAParams{}, ErrNegativePeriod
	}
	periodNs, ok := mulChecked(req.Period, nsPerSec)
	if !ok {
		return GCRAParams{}, ErrPeriodRange
	}
	var p GCRAParams
	p.Interval = rustAsI64(float64(periodNs) / float64(req.Count))
	if p.Interval == 0 {
		return GCRAParams{}, ErrZeroRate
	}
	if p.Limit, ok = addChecked(req.MaxBurst, 1); !ok {
		return GCRAParams{}, ErrMaxBurstRange
	}
	if p.Tolerance, ok = mulChecked(p.Interval, p.Limit); !ok {
		return GCRAParams{}, ErrMaxBurstRange
	}
	if p.Increment, ok = mulChecked(p.Interval, req.Quantity); !ok {
		return GCRAParams{}, ErrQuantityRange
	}
	return p, nil
}

// GCRAState is a CL.THROTTLE key's state: its theoretical arrival time
// (Unix ns), the value redis-cell stores.
type GCRAState struct {
	TAT int64
}

// GCRA applies one CL.THROTTLE request at now (Unix ns) to a key whose
// stored state is st (exists false: no key). Reply durations are in whole
// seconds, rounded as redis-cell rounds them. An allowed request returns
// the new state with WriteStore; an over-refund returns WriteDelete (see
// below), a limited request WriteNone and st unchanged.
func GCRA(st GCRAState, exists bool, now int64, p GCRAParams) (GCRAState, Outcome, error) {
	tat := st.TAT
	if !exists {
		tat = now
	}
	newTAT, ok := addChecked(max(tat, now), p.Increment)
	if !ok {
		return st, Outcome{}, ErrQuantityRange
	}
	allowAt, ok := subChecked(newTAT, p.Tolerance)
	if !ok {
		return st, Outcome{}, ErrQuantityRange
	}
	diff, ok := subChecked(now, allowAt)
	if !ok {
		return st, Outcome{}, ErrQuantityRange
	}

	var out Outcome
	var ttl int64
	retry := int64(-1)
	if diff < 0 {
		out.Result.Limited = true
		if p.Increment <= p.Tolerance {
			retry = cellSeconds(-diff)
		}
		// 0 for a fresh key whose quantity alone is over τ; it overflows
		// only for a TAT out of reach of a clock near its lower end.
		if ttl, ok = subChecked(tat, now); !ok {
			return st, Outcome{}, ErrQuantityRange
		}
	} else {
		if newTAT < now {
			// An over-refund: redis-cell would store a TAT in the past
			// with no expiry; cellserver keeps nothing, as for a full key.
			out.Write = WriteDelete
			out.Result = Result{Limit: p.Limit, Remaining: p.Limit, RetryAfter: -1}
			return GCRAState{}, out, nil
		}
		ttl = newTAT - now
		out.Write = WriteStore
		st.TAT = newTAT
		out.ExpireMs = floorDiv(now, nsPerMs) + ttl/nsPerMs
	}

	out.Result.Limit = p.Limit
	out.Result.RetryAfter = retry
	out.Result.ResetAfter = cellSeconds(ttl)
	if next := p.Tolerance - ttl; next > -p.Interval {
		out.Result.Remaining = rustAsI64(float64(next/1000) / float64(p.Interval/1000))
	}
	return st, out, nil
}

// cellSeconds turns a duration in ns into the whole seconds redis-cell
// replies: the f64 sum of its whole seconds and fraction, truncated, plus
// one only when the sub-second part is at least 1 ms.
func cellSeconds(d int64) int64 {
	s, ns := d/nsPerSec, d%nsPerSec
	secs := rustAsI64(float64(s) + float64(ns)/1e9)
	if ns >= nsPerMs {
		secs++
	}
	return secs
}
