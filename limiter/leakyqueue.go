package limiter

// This file is LB.QUEUE: the leaky bucket as a queue. The queue has
// Capacity places and lets Rate requests leave per Period, one every
// T = period/rate; a request that fits is given its turn, the instant the
// work queued before it has left, instead of being refused. The state is
// the instant the queue will be empty, EmptyAt + Rem/Rate ns (0 ≤ Rem <
// Rate), as TB.TAKE keeps the instant its bucket is full: the work queued
// at t, scaled by the rate, is then (EmptyAt − t)·Rate + Rem, one place
// being period_ns of it, so every step is integer arithmetic and the turns
// of a queue kept busy are exactly T apart, never drifting, whatever T's
// fraction of a nanosecond.

// LeakyQueueRequest is LB.QUEUE's arguments.
type LeakyQueueRequest struct {
	Capacity int64 // places in the queue, ≥ 1
	Rate     int64 // requests leaving per Period, ≥ 1
	Period   int64 // seconds, or milliseconds with Millis; ≥ 1
	Cost     int64 // places taken; negative: given back; 0: a pure read
	Millis   bool  // MS: Period, MaxWait and the reply's times are milliseconds
	// MaxWait, when HasMaxWait, is the longest wait for its turn a request
	// accepts (in Period's unit): a turn further away refuses it.
	MaxWait    int64
	HasMaxWait bool
}

// LeakyQueueState is a queue that is not empty: it will be empty at
// EmptyAt + Rem/Rate ns (0 ≤ Rem < Rate).
type LeakyQueueState struct {
	EmptyAt int64
	Rem     int64
}

// Validate checks r's arguments, in this order: capacity, rate and period
// are positive (ErrCapacityNotPositive, ErrRateNotPositive,
// ErrPeriodNotPositive); MaxWait is not negative (ErrMaxWaitNegative); the
// period in ns fits in an int64 (ErrPeriodRange), and so does MaxWait
// (ErrMaxWaitRange); capacity·period_ns, the full queue's scaled size, fits
// (ErrCapacityRange). Any cost is valid: above the capacity it is never
// admitted, and giving back more than is queued only empties the queue.
func (r LeakyQueueRequest) Validate() error {
	_, _, err := r.ns()
	return err
}

// ns validates r and returns its period and MaxWait in ns (maxWait is
// maxInt64 without MAXWAIT).
func (r LeakyQueueRequest) ns() (period, maxWait int64, err error) {
	switch {
	case r.Capacity <= 0:
		return 0, 0, ErrCapacityNotPositive
	case r.Rate <= 0:
		return 0, 0, ErrRateNotPositive
	case r.Period <= 0:
		return 0, 0, ErrPeriodNotPositive
	case r.HasMaxWait && r.MaxWait < 0:
		return 0, 0, ErrMaxWaitNegative
	}
	period, ok := durationNs(r.Period, r.Millis)
	if !ok {
		return 0, 0, ErrPeriodRange
	}
	maxWait = maxInt64
	if r.HasMaxWait {
		if maxWait, ok = durationNs(r.MaxWait, r.Millis); !ok {
			return 0, 0, ErrMaxWaitRange
		}
	}
	if _, ok := mulChecked(r.Capacity, period); !ok {
		return 0, 0, ErrCapacityRange
	}
	return period, maxWait, nil
}

// LeakyQueue applies one LB.QUEUE request at now (Unix ns) to a queue whose
// stored state is st (exists false: no key, an empty queue). It validates
// r itself and returns Validate's error first.
//
// With queued the work in the queue now, in places rounded up, a request
// of cost c is admitted when queued + c ≤ Capacity and its wait, the time
// until the work queued before it has left (0 for an empty queue), is at
// most MaxWait; it then takes c places, c·T of work, and the queue is
// empty c·T later than it was (or than now, when it was empty). The
// reply: limit Capacity; remaining the free places after the request;
// retry_after, when refused, the time until it would be admitted (a place
// frees, or its wait fits MaxWait), -1 when admitted or when c >
// Capacity; and, in the fifth place, the wait: for an admitted request
// the time until its turn, otherwise (refused, read, or a give-back, after
// the places are given back) the time until the queue is empty. Times are
// rounded up to the reply's unit.
//
// An admitted request or give-back returns the new state with
// WriteStore, or WriteDelete when the queue is empty; a refused request
// or a cost of 0 returns WriteNone and st unchanged. The stored state is
// read with the current arguments, the work in it capped at the new
// capacity's. A clock that went backwards makes the queue look fuller,
// never emptier, and never yields negative times. It returns
// ErrPeriodRange when the instant the queue would be empty does not fit
// in an int64.
func LeakyQueue(st LeakyQueueState, exists bool, now int64, r LeakyQueueRequest) (LeakyQueueState, Outcome, error) {
	period, maxWait, err := r.ns()
	if err != nil {
		return st, Outcome{}, err
	}
	unit := replyUnit(r.Millis)
	full := r.Capacity * period // fits: checked by ns
	cost := r.Cost

	// work is the queued work now, scaled by the rate: 0 ≤ work ≤ full.
	// wait is the time until the queue is empty, in ns, rounded up.
	var emptyAt, rem, work, wait int64
	if exists {
		emptyAt, rem = st.EmptyAt, min(max(st.Rem, 0), r.Rate-1)
		work = tbMissing(emptyAt, rem, now, r.Rate, full)
		wait = max(0, subSat(tbIdle(emptyAt, rem), now))
	}
	res := Result{Limit: r.Capacity, Remaining: r.Capacity - ceilDiv(work, period), RetryAfter: -1}
	switch {
	case cost == 0 || cost > r.Capacity: // a read, or never admitted
		res.Limited = cost != 0
		res.ResetAfter = roundUp(wait, unit)
		return st, Outcome{Result: res}, nil
	case cost < 0: // a give-back: cost·period ≥ −full fits
		if cost <= -r.Capacity {
			work = 0
		} else {
			work = max(0, work+cost*period)
		}
	case work <= full-cost*period && wait <= maxWait:
		res.ResetAfter = roundUp(wait, unit)
		work += cost * period
	default: // refused: admitted once the work ≤ target and the wait ≤ maxWait
		target := full - cost*period
		// (emptyAt − t)·rate + rem ≤ target ⇔ t ≥ emptyAt − ⌊(target − rem)/rate⌋;
		// idle − t ≤ maxWait ⇔ t ≥ idle − maxWait.
		allowAt := max(subSat(emptyAt, floorDiv(target-rem, r.Rate)), subSat(tbIdle(emptyAt, rem), maxWait))
		res.Limited = true
		res.RetryAfter = roundUp(subSat(allowAt, now), unit)
		res.ResetAfter = roundUp(wait, unit)
		return st, Outcome{Result: res}, nil
	}

	res.Remaining = r.Capacity - ceilDiv(work, period)
	if work == 0 {
		return LeakyQueueState{}, Outcome{Result: res, Write: WriteDelete}, nil
	}
	next := LeakyQueueState{Rem: work % r.Rate}
	var ok bool
	if next.EmptyAt, ok = addChecked(now, work/r.Rate); !ok {
		return st, Outcome{}, ErrPeriodRange
	}
	idle := next.EmptyAt
	if next.Rem > 0 {
		if idle, ok = addChecked(idle, 1); !ok {
			return st, Outcome{}, ErrPeriodRange
		}
	}
	if cost < 0 {
		res.ResetAfter = roundUp(idle-now, unit)
	}
	return next, Outcome{Result: res, Write: WriteStore, ExpireMs: expireMsAt(idle)}, nil
}
