package limiter

import "math/bits"

// This file is SW.HIT's default mode, the sliding window counter: the counts
// of allowed hits in the current window and the one before it, windows
// aligned to multiples of the window length since the Unix epoch. With e the
// ns elapsed in the current window of length W, the estimate is
// prev·(W−e)/W + curr; every comparison with it is made exactly, on 128-bit
// products, never with floats. SW.HIT EXACT is in slidinglog.go.

// maxExactLimit is the largest limit SW.HIT accepts with EXACT.
const maxExactLimit = 100_000

// Validate checks r's arguments for both modes, in this order: limit and
// window are positive (ErrLimitNotPositive, ErrWindowNotPositive); with
// Exact, limit is at most 100000 (ErrExactLimit); the window in ns fits in
// an int64 (ErrWindowRange). Any cost is valid: above the limit it is never
// allowed, and a refund never takes a count below 0.
func (r SlidingWindowRequest) Validate() error {
	_, err := r.windowNs()
	return err
}

// windowNs validates r and returns its window in ns.
func (r SlidingWindowRequest) windowNs() (int64, error) {
	w, err := windowNs(r.Limit, r.Window, r.Millis)
	if (err == nil || err == ErrWindowRange) && r.Exact && r.Limit > maxExactLimit {
		return 0, ErrExactLimit // checked before the window's range
	}
	return w, err
}

// SlidingWindow applies one SW.HIT request (the counter mode; r.Exact is
// not looked at) at now (Unix ns) to a key whose stored state is st (exists
// false: no key, both counts 0). It validates r itself and returns
// Validate's error first.
//
// An allowed hit or a refund returns the new state with WriteStore, its
// expiry the instant the estimate is 0 again, or WriteDelete when both
// counts are 0; a limited request or a cost of 0 returns WriteNone and st
// unchanged.
//
// The stored counts belong to the window (of the current length) holding
// st.Start, so after a change of window length they count as that window's
// and roll from there: an approximation, as the counter is. A stored window
// later than now's (the clock went backwards) stays the current one, read as
// at its start (its previous count at full weight): no allowed hit is
// forgotten, and the times replied include the clock's step back.
//
// It returns ErrWindowRange when the end of the window after the current one
// does not fit in an int64.
func SlidingWindow(st SlidingWindowState, exists bool, now int64, r SlidingWindowRequest) (SlidingWindowState, Outcome, error) {
	w, err := r.windowNs()
	if err != nil {
		return st, Outcome{}, err
	}
	unit := replyUnit(r.Millis)
	start, ok := alignWindow(now, w)
	if !ok {
		return st, Outcome{}, ErrWindowRange
	}
	at := now // the instant the estimate is taken at
	var prev, curr int64
	if exists {
		stored, ok := alignWindow(st.Start, w)
		switch {
		case !ok: // a corrupt Start: nothing to keep
		case stored == start:
			prev, curr = st.Prev, st.Curr
		case stored > start: // the clock went backwards
			start, at = stored, stored
			prev, curr = st.Prev, st.Curr
		default: // an earlier window: roll once if it is the previous one
			if d, ok := subChecked(start, stored); ok && d == w {
				prev = st.Curr
			}
		}
		prev, curr = max(prev, 0), max(curr, 0)
	}
	end, ok := addChecked(start, w)
	if !ok {
		return st, Outcome{}, ErrWindowRange
	}
	end2, ok := addChecked(end, w)
	if !ok {
		return st, Outcome{}, ErrWindowRange
	}
	left := end - at // W − e, in (0, W]

	cost := r.Cost
	res := Result{Limit: r.Limit, RetryAfter: -1}
	switch {
	case cost == 0 || cost > r.Limit: // a read, or never allowed
		res.Limited = cost != 0
	case cost < 0: // a refund
		curr = max(curr+cost, 0)
	case curr <= r.Limit-cost && mulLE(prev, left, r.Limit-cost-curr, w):
		curr += cost // estimate + cost ≤ limit
	default:
		res.Limited = true
		res.RetryAfter = roundUp(subSat(swAllowAt(start, at, w, prev, curr, r.Limit, cost), now), unit)
	}
	res.Remaining = swRemaining(r.Limit, prev, curr, left, w)
	switch {
	case curr > 0:
		res.ResetAfter = roundUp(subSat(end2, now), unit)
	case prev > 0:
		res.ResetAfter = roundUp(subSat(end, now), unit)
	}
	if cost == 0 || res.Limited {
		return st, Outcome{Result: res}, nil
	}

	next := SlidingWindowState{Start: start, Prev: prev, Curr: curr}
	switch {
	case curr > 0:
		return next, Outcome{Result: res, Write: WriteStore, ExpireMs: expireMsAt(end2)}, nil
	case prev > 0:
		return next, Outcome{Result: res, Write: WriteStore, ExpireMs: expireMsAt(end)}, nil
	}
	return SlidingWindowState{}, Outcome{Result: res, Write: WriteDelete}, nil
}

// swRemaining returns ⌊limit − estimate⌋ = limit − curr − ⌈prev·left/w⌉,
// at least 0, where left = W − e.
func swRemaining(limit, prev, curr, left, w int64) int64 {
	room := limit - curr // curr ≥ 0: no overflow
	if room <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(prev), uint64(left))
	q, rem := bits.Div64(hi, lo, uint64(w)) // q ≤ prev: hi < w
	if rem != 0 {
		q++
	}
	if q >= uint64(room) {
		return 0
	}
	return room - int64(q) // q < room
}

// swAllowAt returns the first instant, after at, at which a hit of cost
// (≤ limit) would be allowed by a key whose current window [start, start+w)
// holds prev and curr at at and which takes no other hit. It is within the
// current window when prev's fading weight is enough, else in the next one.
func swAllowAt(start, at, w, prev, curr, limit, cost int64) int64 {
	if room := limit - cost - curr; room >= 0 && prev > 0 {
		// prev·(w−e) ≤ room·w ⇔ e ≥ w − ⌊room·w/prev⌋
		if q, ok := mulDiv(room, w, prev); ok && q > 0 {
			return max(start+w-q, at)
		}
	}
	// In the next window, prev is curr and curr is 0:
	// curr·(w−e) ≤ (limit−cost)·w ⇔ e ≥ w − ⌊(limit−cost)·w/curr⌋.
	next := start + w // fits: the caller checked start+2w
	room := limit - cost
	if curr <= room {
		return next
	}
	q, _ := mulDiv(room, w, curr) // room < curr: q < w
	return next + w - q
}
