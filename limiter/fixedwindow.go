package limiter

// This file is FW.INCR: a counter of allowed hits per window, windows
// aligned to multiples of the window length since the Unix epoch. It also
// holds the window arithmetic SW shares.

// Validate checks r's arguments, in this order: limit and window are
// positive (ErrLimitNotPositive, ErrWindowNotPositive) and the window in ns
// fits in an int64 (ErrWindowRange). Any cost is valid: above the limit it
// is never allowed, and a refund never takes the count below 0.
func (r FixedWindowRequest) Validate() error {
	_, err := r.windowNs()
	return err
}

// windowNs validates r and returns its window in ns.
func (r FixedWindowRequest) windowNs() (int64, error) { return windowNs(r.Limit, r.Window, r.Millis) }

// windowNs validates a window's limit and length (in ms with millis, else
// in seconds), in this order: both positive (ErrLimitNotPositive,
// ErrWindowNotPositive), the length in ns within an int64
// (ErrWindowRange); it returns the length in ns. FW and SW share it.
func windowNs(limit, window int64, millis bool) (int64, error) {
	switch {
	case limit <= 0:
		return 0, ErrLimitNotPositive
	case window <= 0:
		return 0, ErrWindowNotPositive
	}
	w, ok := durationNs(window, millis)
	if !ok {
		return 0, ErrWindowRange
	}
	return w, nil
}

// FixedWindow applies one FW.INCR request at now (Unix ns) to a key whose
// stored state is st (exists false: no key, a count of 0). It validates r
// itself and returns Validate's error first.
//
// An allowed hit or a refund returns the new state with WriteStore and the
// window's end as expiry, or WriteDelete when the count is back to 0; a
// limited request or a cost of 0 returns WriteNone and st unchanged.
//
// The stored count belongs to the window (of the current length) holding
// st.Start, so a changed window length keeps the count while that window
// lasts. A stored window later than now's (the clock went backwards) stays
// the current one: its count still applies and the key still expires at its
// end, so the times replied include the clock's step back.
//
// It returns ErrWindowRange when a window's end does not fit in an int64.
func FixedWindow(st FixedWindowState, exists bool, now int64, r FixedWindowRequest) (FixedWindowState, Outcome, error) {
	w, err := r.windowNs()
	if err != nil {
		return st, Outcome{}, err
	}
	unit := replyUnit(r.Millis)
	start, ok := alignWindow(now, w)
	if !ok {
		return st, Outcome{}, ErrWindowRange
	}
	var count int64
	if exists {
		switch stored, ok := alignWindow(st.Start, w); {
		case !ok || stored < start: // an earlier window, or a corrupt Start
		case stored > start: // the clock went backwards
			start, count = stored, max(st.Count, 0)
		default:
			count = max(st.Count, 0)
		}
	}
	end, ok := addChecked(start, w)
	if !ok {
		return st, Outcome{}, ErrWindowRange
	}
	toEnd := roundUp(subSat(end, now), unit) // end > now

	cost := r.Cost
	res := Result{Limit: r.Limit, Remaining: max(r.Limit-count, 0), RetryAfter: -1}
	if count > 0 {
		res.ResetAfter = toEnd
	}
	switch {
	case cost == 0 || cost > r.Limit: // a read, or never allowed
		res.Limited = cost != 0
		return st, Outcome{Result: res}, nil
	case cost < 0: // a refund
		count = max(count+cost, 0)
	case count <= r.Limit-cost:
		count += cost
	default:
		res.Limited = true
		res.RetryAfter = toEnd
		return st, Outcome{Result: res}, nil
	}

	res.Remaining = max(r.Limit-count, 0)
	if count == 0 {
		res.ResetAfter = 0
		return FixedWindowState{}, Outcome{Result: res, Write: WriteDelete}, nil
	}
	res.ResetAfter = toEnd
	next := FixedWindowState{Start: start, Count: count}
	return next, Outcome{Result: res, Write: WriteStore, ExpireMs: expireMsAt(end)}, nil
}
