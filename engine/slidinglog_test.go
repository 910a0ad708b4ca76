package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cellserver/cellserver/internal/manual"
	"github.com/cellserver/cellserver/limiter"
)

// The engine's SW.HIT EXACT (in the record, or decoded when the log moves
// or is wide) replies what limiter.SlidingLog replies on a []Hit, request
// by request, and leaves the same log and expiry: random hits, refunds,
// reads and refused requests, windows from 1 ms to 3 days, the clock
// moving forward in small and large steps and sometimes back.
func TestSlidingLogMatchesTheReference(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { diffSlidingLog(t, seed, 3000) })
	}
}

func diffSlidingLog(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	e, clock := newTestEngine(t, 1)
	sh := &e.shards[0]
	key := []byte("log")
	h := e.hash(key)

	var ref []limiter.Hit // the reference log, nil: no key
	var refExpire int64
	now := now0
	// Each seed keeps to a few limits and windows, as a client does, with
	// now and then another.
	limits := []int64{1 + rng.Int64N(5), 1 + rng.Int64N(200), 100_000}
	windows := []int64{1 + rng.Int64N(3), 10, 3 * 24 * 3600}
	jumps := 20            // one step in jumps moves the clock far forward or back
	most := int64(1 << 62) // the largest cost of a hit
	far := int64(20e9)     // the longest jump forward, ns
	switch {
	case seed%4 == 2:
		// Logs longer than 2^47 ns (39 hours): a window of 3 days, the
		// clock jumping hours ahead; the log goes to the 16-byte form and
		// back as its hits leave.
		windows, jumps, far = []int64{3 * 24 * 3600, 3 * 24 * 3600, 10}, 8, 30*3600e9
	case seed%2 == 1:
		// Long logs: a high limit, a long window, the clock seldom jumps,
		// so that the ring wraps and the log grows and slides.
		limits, windows, jumps, most = []int64{100_000, 90_000, 2 + rng.Int64N(3000)}, []int64{2 + rng.Int64N(8), 20, 3 * 24 * 3600}, 2000, 20
	}
	wide := 0
	compact := 0
	for step := range steps {
		switch rng.IntN(jumps) {
		case 0:
			now -= rng.Int64N(3e9) // back
		case 1:
			now += rng.Int64N(far)
		case 2, 3, 4: // the same instant: hits merge
		default:
			now += rng.Int64N(3e6)
		}
		clock.Set(now)
		r := limiter.SlidingWindowRequest{Limit: limits[rng.IntN(len(limits))], Window: windows[rng.IntN(2)], Cost: 1, Exact: true}
		switch rng.IntN(40) {
		case 0:
			r.Window = windows[2]
		case 1:
			r.Millis, r.Window = true, 1+rng.Int64N(5000)
		}
		switch rng.IntN(12) {
		case 0:
			r.Cost = 0
		case 1:
			r.Cost = -rng.Int64N(10)
		case 2:
			r.Cost = 1 + rng.Int64N(min(r.Limit, most))
		case 3:
			r.Cost = r.Limit + 1
		}

		// The reference: the key as the engine's getLocked would find it.
		if ref != nil && unixMs(now) > refExpire {
			ref = nil
		}
		if i := sh.t.find(key, h); i >= 0 {
			if sh.t.logHeadAt(sh.t.stateAt(uint32(sh.t.slots[i])) + 8).compact {
				compact++
			} else {
				wide++
			}
		}
		log, want, wantErr := limiter.SlidingLog(slices.Clone(ref), now, r)
		got, err := e.slidingWindow(key, r)
		if err != wantErr || got != want.Result {
			t.Fatalf("step %d at %d, %+v on %d hits: %+v %v, want %+v %v", step, now-now0, r, len(ref), got, err, want.Result, wantErr)
		}
		if err == nil {
			switch want.Write {
			case limiter.WriteStore:
				ref, refExpire = log, want.ExpireMs
			case limiter.WriteDelete:
				ref = nil
			}
		}

		i := sh.t.find(key, h)
		if (i >= 0) != (ref != nil) {
			t.Fatalf("step %d: key exists %v, want %v", step, i >= 0, ref != nil)
		}
		if i < 0 {
			continue
		}
		if ex := sh.t.entryAt(i).expireMs; ex != refExpire {
			t.Fatalf("step %d: expiry %d, want %d", step, ex, refExpire)
		}
		if hits := sh.t.logAt(i); !slices.Equal(hits, ref) {
			t.Fatalf("step %d: log %v, want %v", step, hits[:min(len(hits), 5)], ref[:min(len(ref), 5)])
		}
	}
	t.Logf("compact before %d of %d requests, wide before %d; %d hits at the end", compact, steps, wide, len(ref))
	if seed%4 == 2 {
		if wide < steps/20 || compact < steps/20 {
			t.Fatalf("the log was compact before %d requests and wide before %d, of %d", compact, wide, steps)
		}
	} else if compact < steps/2 {
		t.Fatalf("the log was compact before %d requests of %d", compact, steps)
	}
}

// A log is compact exactly while its hits are sorted, strictly, each
// N ≥ 1, within 2^47 − 1 ns of the first, and 131071 in all at most.
func TestCompactLogBounds(t *testing.T) {
	const span = int64(1)<<47 - 1
	tests := []struct {
		name string
		hits []limiter.Hit
		want bool
	}{
		{"none", nil, true},
		{"one", []limiter.Hit{{At: -5, N: 1}}, true},
		{"widest span", []limiter.Hit{{At: now0, N: 1}, {At: now0 + span, N: 1}}, true},
		{"span of 2^47 ns", []limiter.Hit{{At: now0, N: 1}, {At: now0 + span + 1, N: 1}}, false},
		{"most hits", []limiter.Hit{{At: 1, N: 100_000}, {At: 2, N: 31_071}}, true},
		{"one hit too many", []limiter.Hit{{At: 1, N: 100_000}, {At: 2, N: 31_072}}, false},
		{"same instant twice", []limiter.Hit{{At: 1, N: 1}, {At: 1, N: 1}}, false},
		{"out of order", []limiter.Hit{{At: 2, N: 1}, {At: 1, N: 1}}, false},
		{"N of 0", []limiter.Hit{{At: 1, N: 0}}, false},
		{"negative N", []limiter.Hit{{At: 1, N: -3}}, false},
	}
	for _, tt := range tests {
		if got := compactLog(tt.hits); got != tt.want {
			t.Errorf("%s: compactLog = %v, want %v", tt.name, got, tt.want)
		}
		// Either way, the record gives the hits back.
		tb := table{mem: new(manual.Allocator)}
		if len(tt.hits) == 0 {
			continue
		}
		k := []byte("k")
		if !tb.put(-1, k, 1, &entry{kind: limiter.KindSlidingLog, expireMs: 1, State: limiter.State{Log: tt.hits}}) {
			t.Fatalf("%s: refused", tt.name)
		}
		i := tb.find(k, 1)
		if l := tb.logHeadAt(tb.stateAt(uint32(tb.slots[i])) + 8); l.compact != tt.want {
			t.Errorf("%s: stored compact %v, want %v", tt.name, l.compact, tt.want)
		}
		if got := tb.logAt(i); !slices.Equal(got, tt.hits) {
			t.Errorf("%s: read back %v", tt.name, got)
		}
		tb.reset()
	}
}
