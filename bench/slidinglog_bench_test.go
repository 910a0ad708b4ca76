package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// cpuMeter reports a benchmark's CPU time per op (cpu-ns/op) next to its
// wall time: on this shared machine the wall time also counts the time
// other processes held the cores.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

// startCPU starts measuring; call it just after b.ResetTimer.
func startCPU() cpuMeter {
	t, ok := processCPU()
	return cpuMeter{start: t, ok: ok}
}

// report adds cpu-ns/op to b's results; call it just after b.StopTimer.
func (m cpuMeter) report(b *testing.B) {
	if t, ok := processCPU(); ok && m.ok && b.N > 0 {
		b.ReportMetric(float64(t-m.start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkSlidingLogSize runs SW.HIT EXACT (limit 100000 per 10 s) on one
// key of the engine whose log holds n hits: the clock moves 10 s / n per
// request, so that each hit drops the oldest one and the log slides at
// its size. A hit on a log of 50000 should cost about what one on a log of
// 10 does (ratio of ns/op, or of cpu-ns/op, within one run).
//
// Run: go test -run xxx -bench SlidingLogSize -benchtime 300000x -count 5 ./bench/
func BenchmarkSlidingLogSize(b *testing.B) {
	for _, n := range []int{10, 5000, 50000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			clock := engine.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
			e, err := engine.New(engine.Config{Clock: clock})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = e.Close() }()
			key := []byte("user:000000000001")
			r := limiter.SlidingWindowRequest{Limit: 100_000, Window: 10, Cost: 1, Exact: true}
			step := 10e9 / int64(n)
			for range 2 * n { // over a window: the log is full and slides
				clock.Advance(step)
				if _, err := e.Apply(key, r.Request(), nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			for range b.N {
				clock.Advance(step)
				if _, err := e.Apply(key, r.Request(), nil); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu.report(b)
			read := r
			read.Cost = 0
			if res, _ := e.Apply(key, read.Request(), nil); res.Remaining != 100_000-int64(n) {
				b.Fatalf("%d hits in the log, want %d", 100_000-res.Remaining, n)
			}
		})
	}
}
