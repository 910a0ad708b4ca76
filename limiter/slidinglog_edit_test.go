package limiter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// hitSums is a SumLog over a []Hit, with its prefix sums.
type hitSums struct {
	hits []Hit
	sums []int64 // sums[k]: the N of hits[:k]
}

func newHitSums(hits []Hit) hitSums {
	s := hitSums{hits: hits, sums: make([]int64, len(hits)+1)}
	for k, h := range hits {
		s.sums[k+1] = s.sums[k] + h.N
	}
	return s
}

func (s hitSums) Len() int        { return len(s.hits) }
func (s hitSums) At(k int) int64  { return s.hits[k].At }
func (s hitSums) Sum(k int) int64 { return s.sums[k] }

// applyEdit returns the log ed makes of hits.
func applyEdit(hits []Hit, ed LogEdit) []Hit {
	var log []Hit
	log = append(log, hits[ed.Drop:ed.Keep]...)
	if len(log) > 0 {
		var before int64
		for _, h := range log[:len(log)-1] {
			before += h.N
		}
		log[len(log)-1].N = ed.Sum - before
	}
	if ed.Add.N > 0 {
		log = append(log, ed.Add)
	}
	return append(log, hits[ed.End:]...)
}

// SlidingLogEdit, applied, agrees with SlidingLog request by request on
// random logs: same outcome, same error, same log after.
func TestSlidingLogEditAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const sec = nsPerSec
	for round := range 20000 {
		// A log of up to 40 distinct instants within ±20 s of tBase.
		var hits []Hit
		at := tBase - 20*sec + rng.Int64N(sec)
		for range rng.IntN(40) {
			at += 1 + rng.Int64N(sec)*rng.Int64N(3)
			hits = append(hits, Hit{At: at, N: 1 + rng.Int64N(4)})
		}
		now := tBase + rng.Int64N(4*sec) - 2*sec
		if len(hits) > 0 && rng.IntN(4) == 0 {
			now = hits[rng.IntN(len(hits))].At // on an instant of the log
		}
		r := SlidingWindowRequest{Limit: 1 + rng.Int64N(60), Window: 1 + rng.Int64N(25), Cost: rng.Int64N(8) - 2, Exact: true}
		switch rng.IntN(8) {
		case 0:
			r.Cost = r.Limit + rng.Int64N(3) // never allowed, or exactly the limit
		case 1:
			r.Cost = -rng.Int64N(200) // a large refund
		case 2:
			r.Millis, r.Window = true, 1+rng.Int64N(25000)
		case 3:
			r.Window = maxInt64 / sec // the window's end does not fit
		}
		wantLog, want, wantErr := SlidingLog(slices.Clone(hits), now, r)
		ed, got, err := SlidingLogEdit(newHitSums(hits), now, r)
		if err != wantErr || got != want {
			t.Fatalf("round %d: %v at %d, %+v: got %+v %v, want %+v %v", round, hits, now, r, got, err, want, wantErr)
		}
		if err != nil || got.Write != WriteStore {
			continue
		}
		if log := applyEdit(hits, ed); !slices.Equal(log, wantLog) {
			t.Fatalf("round %d: %v at %d, %+v: edit %+v makes %v, want %v", round, hits, now, r, ed, log, wantLog)
		}
	}
}

func TestGallop(t *testing.T) {
	for n := range 40 {
		for lo := range n + 1 {
			for want := lo; want <= n; want++ {
				ok := func(k int) bool {
					if k < lo || k >= n {
						panic(fmt.Sprintf("probe %d outside [%d, %d)", k, lo, n))
					}
					return k >= want
				}
				if got := gallop(lo, n, ok); got != want {
					t.Fatalf("gallop(%d, %d) = %d, want %d", lo, n, got, want)
				}
				if got := gallopBack(lo, n, ok); got != want {
					t.Fatalf("gallopBack(%d, %d) = %d, want %d", lo, n, got, want)
				}
			}
		}
	}
}
