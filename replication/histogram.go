package replication

import (
	"sync/atomic"
	"time"
)

// HistogramBounds are the upper bounds of Histogram's buckets.
var HistogramBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, time.Second,
}

// Histogram counts durations in buckets (HistogramBounds, and one for the
// longer ones), lock-free; the metrics export it.
type Histogram struct {
	counts [len(HistogramBounds) + 1]atomic.Int64
	sum    atomic.Int64 // ns
}

// Observe counts d.
func (h *Histogram) Observe(d time.Duration) {
	i := 0
	for i < len(HistogramBounds) && d > HistogramBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// Snapshot returns the bucket counts (not cumulative) and the sum.
func (h *Histogram) Snapshot() (counts []int64, sum time.Duration) {
	counts = make([]int64, len(h.counts))
	for i := range counts {
		counts[i] = h.counts[i].Load()
	}
	return counts, time.Duration(h.sum.Load())
}

// Quantile returns the upper bound of the bucket holding quantile q of
// what was observed (0 with nothing observed).
func (h *Histogram) Quantile(q float64) time.Duration {
	counts, _ := h.Snapshot()
	var total int64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	want := int64(q*float64(total) + 0.5)
	var acc int64
	for i, c := range counts {
		acc += c
		if acc >= want && i < len(HistogramBounds) {
			return HistogramBounds[i]
		}
	}
	return time.Duration(1<<63 - 1)
}
