package limiter

import (
	"slices"
	"sort"
)

// This file is SW.HIT EXACT, the sliding window log: every allowed hit's
// instant is kept, hits at the same ns merged into one Hit, and the estimate
// at now is the number of hits in (now − window, now]. The arguments are
// SlidingWindowRequest's, validated by its Validate (slidingwindow.go).

// SlidingLog applies one SW.HIT EXACT request at now (Unix ns) to a key
// whose stored log is hits (nil: no key), sorted by At. It validates r
// itself and returns Validate's error first.
//
// With WriteNone (a limited request, a cost of 0) the returned slice is hits
// and its contents are untouched. With WriteStore the log is returned with
// the hits that left the window pruned and the new hit added, append-style:
// it may share hits' backing array, whose contents may have changed, so the
// caller must keep the returned slice and drop hits. It adds at most one
// hit: given hits with capacity for one more, it allocates nothing. Its
// expiry is the instant the newest hit leaves the window. WriteDelete
// (nil) means the log is empty. The log holds only the distinct instants
// in the window (and any later than now); giving back the memory of a log
// that shrank is the caller's business (the table moves it to a smaller
// record).
//
// A refund drops hits from the newest counted ones, never below 0. Hits
// later than now (the clock went backwards) are not counted, but they are
// kept, in order, and count again once the clock reaches them.
//
// It returns ErrWindowRange when the instant the newest hit leaves the
// window does not fit in an int64.
func SlidingLog(hits []Hit, now int64, r SlidingWindowRequest) ([]Hit, Outcome, error) {
	w, err := r.windowNs()
	if err != nil {
		return hits, Outcome{}, err
	}
	unit := replyUnit(r.Millis)

	// hits[i:j] are counted; hits[:i] have left the window; hits[j:] are
	// later than now.
	i := 0
	if cutoff, ok := subChecked(now, w); ok { // else none has left
		i = sort.Search(len(hits), func(k int) bool { return hits[k].At > cutoff })
	}
	j := i + sort.Search(len(hits)-i, func(k int) bool { return hits[i+k].At > now })
	var count int64
	for _, h := range hits[i:j] {
		count = addSat(count, max(h.N, 0))
	}

	cost := r.Cost
	res := Result{Limit: r.Limit, Remaining: max(r.Limit-count, 0), RetryAfter: -1}
	switch {
	case cost == 0 || cost > r.Limit: // a read, or never allowed
		res.Limited = cost != 0
	case cost < 0: // a refund, below
	case count > r.Limit-cost:
		res.Limited = true
		// Wait until the oldest counted hits worth count+cost−limit leave.
		excess, freed := count-(r.Limit-cost), int64(0)
		k := i
		for ; k < j-1; k++ {
			if freed = addSat(freed, max(hits[k].N, 0)); freed >= excess {
				break
			}
		}
		allowAt, ok := addChecked(hits[k].At, w)
		if !ok {
			return hits, Outcome{}, ErrWindowRange
		}
		res.RetryAfter = roundUp(subSat(allowAt, now), unit) // At > now−w
	}
	if cost == 0 || res.Limited {
		if i < len(hits) {
			idle, ok := addChecked(hits[len(hits)-1].At, w)
			if !ok {
				return hits, Outcome{}, ErrWindowRange
			}
			res.ResetAfter = roundUp(subSat(idle, now), unit)
		}
		return hits, Outcome{Result: res}, nil
	}

	// A write from here. Check its expiry fits before hits may change.
	newest := now
	if i < len(hits) {
		newest = max(newest, hits[len(hits)-1].At)
	}
	if _, ok := addChecked(newest, w); !ok {
		return hits, Outcome{}, ErrWindowRange
	}
	log := hits[:copy(hits, hits[i:])] // drop hits[:i] in place
	j -= i
	if cost > 0 {
		count += cost
		if j > 0 && log[j-1].At == now {
			log[j-1].N += cost // ≤ count: no overflow
		} else {
			log = slices.Insert(log, j, Hit{At: now, N: cost})
		}
	} else {
		count, log = max(count+cost, 0), slRefund(log, j, cost)
	}
	res.Remaining = max(r.Limit-count, 0)
	if len(log) == 0 {
		return nil, Outcome{Result: res, Write: WriteDelete}, nil
	}
	idle := addSat(log[len(log)-1].At, w) // ≤ newest+w: fits
	res.ResetAfter = roundUp(subSat(idle, now), unit)
	return log, Outcome{Result: res, Write: WriteStore, ExpireMs: expireMsAt(idle)}, nil
}

// slRefund drops up to −cost hits from the newest of log[:j], the counted
// ones, and returns the log.
func slRefund(log []Hit, j int, cost int64) []Hit {
	k := j // log[k:j] are dropped
	for k > 0 && cost < 0 {
		n := max(log[k-1].N, 0)
		if n+cost > 0 {
			log[k-1].N = n + cost
			break
		}
		cost += n
		k--
	}
	return slices.Delete(log, k, j)
}

// addSat returns a+b for b ≥ 0, saturated at the int64 bound.
func addSat(a, b int64) int64 {
	if s, ok := addChecked(a, b); ok {
		return s
	}
	return maxInt64
}

// SumLog is a sliding log held in another form than a []Hit (the engine
// keeps it in its record), read through its instants and the prefix sums
// of its counts, which lets SlidingLogEdit answer in O(log n) at worst
// where SlidingLog walks the log. Its hits are sorted by At, strictly, and
// each has N ≥ 1: the logs SlidingLog makes.
type SumLog interface {
	// Len returns the number of hits.
	Len() int
	// At returns the instant of hit k, 0 ≤ k < Len().
	At(k int) int64
	// Sum returns the N of the hits before hit k, 0 ≤ k ≤ Len(): Sum(0)
	// is 0.
	Sum(k int) int64
}

// LogEdit is how SlidingLogEdit changes a log, in terms of the log it
// read (hits): the new log is hits[Drop:Keep], the last of them with its N
// changed so that they count Sum in all, then Add if Add.N > 0, then
// hits[End:], the hits later than now, unchanged. Drop ≤ Keep ≤ End.
type LogEdit struct {
	Drop, Keep, End int
	Sum             int64
	Add             Hit
}

// SlidingLogEdit is SlidingLog on a SumLog: given the same log as hits,
// it returns the same Outcome and error, and with WriteStore the edit that
// turns the log into the one SlidingLog returns. It changes nothing
// itself. It finds the hits that left the window, those later than now and
// the oldest ones a refused request waits for by galloping searches, each
// O(log d) for the d hits it passes: a hit on a log whose oldest hits leave
// one by one, and whose newest is not later than now, costs O(1).
func SlidingLogEdit[L SumLog](l L, now int64, r SlidingWindowRequest) (LogEdit, Outcome, error) {
	w, err := r.windowNs()
	if err != nil {
		return LogEdit{}, Outcome{}, err
	}
	unit := replyUnit(r.Millis)
	n := l.Len()

	// Hits [i, j) are counted, as in SlidingLog. The newest hit, read
	// once, settles j in a steady stream (no hit later than now).
	var last int64
	if n > 0 {
		last = l.At(n - 1)
	}
	i := 0
	if cutoff, ok := subChecked(now, w); ok && n > 0 {
		if last <= cutoff {
			i = n
		} else {
			i = gallop(0, n-1, func(k int) bool { return l.At(k) > cutoff })
		}
	}
	j := n
	if n > 0 && last > now {
		j = gallopBack(i, n-1, func(k int) bool { return l.At(k) > now })
	}
	before := l.Sum(i)
	count := l.Sum(j) - before

	cost := r.Cost
	res := Result{Limit: r.Limit, Remaining: max(r.Limit-count, 0), RetryAfter: -1}
	switch {
	case cost == 0 || cost > r.Limit:
		res.Limited = cost != 0
	case cost < 0:
	case count > r.Limit-cost:
		res.Limited = true
		// The first counted hit by which the oldest ones are worth the
		// excess, or the newest counted one (count ≥ excess: it is).
		excess := count - (r.Limit - cost)
		k := gallop(i, j-1, func(k int) bool { return l.Sum(k+1)-before >= excess })
		allowAt, ok := addChecked(l.At(k), w)
		if !ok {
			return LogEdit{}, Outcome{}, ErrWindowRange
		}
		res.RetryAfter = roundUp(subSat(allowAt, now), unit)
	}
	if cost == 0 || res.Limited {
		if i < n {
			idle, ok := addChecked(last, w)
			if !ok {
				return LogEdit{}, Outcome{}, ErrWindowRange
			}
			res.ResetAfter = roundUp(subSat(idle, now), unit)
		}
		return LogEdit{}, Outcome{Result: res}, nil
	}

	newest := now
	if i < n {
		newest = max(newest, last)
	}
	if _, ok := addChecked(newest, w); !ok {
		return LogEdit{}, Outcome{}, ErrWindowRange
	}
	ed := LogEdit{Drop: i, Keep: j, End: j}
	if cost > 0 {
		if j > i && (j == n && last == now || j < n && l.At(j-1) == now) {
			ed.Sum = count + cost
		} else {
			ed.Sum, ed.Add = count, Hit{At: now, N: cost}
		}
		count += cost
	} else {
		// The refund keeps the oldest counted hits worth what is left.
		count = max(count+cost, 0)
		ed.Sum, ed.Keep = count, i
		if count > 0 {
			ed.Keep = 1 + gallopBack(i, j, func(k int) bool { return l.Sum(k+1)-before >= count })
		}
	}
	res.Remaining = max(r.Limit-count, 0)
	switch { // last becomes the newest hit's instant after the edit

	case j < n: // last stays the newest
	case ed.Add.N > 0:
		last = now
	case ed.Keep > ed.Drop:
		last = l.At(ed.Keep - 1)
	default:
		return ed, Outcome{Result: res, Write: WriteDelete}, nil
	}
	idle := addSat(last, w) // ≤ newest+w: fits
	res.ResetAfter = roundUp(subSat(idle, now), unit)
	return ed, Outcome{Result: res, Write: WriteStore, ExpireMs: expireMsAt(idle)}, nil
}

// gallop returns the first k in [lo, hi) for which ok holds, or hi, ok
// being false and then true over the range: it probes lo, lo+1, lo+3,
// lo+7, … then searches the last step, O(log(k−lo)) in all.
func gallop(lo, hi int, ok func(int) bool) int {
	step := 1
	for lo < hi && !ok(lo) {
		next := lo + step
		if next >= hi || ok(next) {
			return lo + 1 + sort.Search(min(next, hi)-lo-1, func(d int) bool { return ok(lo + 1 + d) })
		}
		lo, step = next, 2*step
	}
	return lo
}

// gallopBack is gallop probing from the end: it returns the first k in
// [lo, hi) for which ok holds, or hi, in O(log(hi−k)).
func gallopBack(lo, hi int, ok func(int) bool) int {
	step := 1
	for hi > lo && ok(hi-1) {
		next := hi - 1 - step
		if next < lo || !ok(next) {
			from := max(next+1, lo) // !ok(next) or next < lo; ok(hi−1)
			return from + sort.Search(hi-1-from, func(d int) bool { return ok(from + d) })
		}
		hi, step = next+1, 2*step
	}
	return hi
}
