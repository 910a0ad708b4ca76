package bench

import (
	"runtime"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// BenchmarkSweep measures the background expiry sweep on its own: it
// inserts b.N CL.THROTTLE keys into an engine on a manual clock, moves the
// clock past every expiry, and calls Engine.Sweep with the default budget
// (65536 entries per tick) until every key is gone, the way the background
// loop does once per SweepInterval (100 ms by default). It reports
//
//	ticks           Sweep calls needed to empty the keyspace
//	sweep-s         the wall time that takes at one tick per 100 ms
//	left-heap-B/key memory still held after the sweep (Go heap and off-heap
//	                arrays), per key inserted
//
// and ns/op is the sweep's CPU time per key. (DBSIZE and INFO also reclaim
// expired keys, synchronously, so a probe over TCP cannot watch the sweep
// alone.)
func BenchmarkSweep(b *testing.B) {
	const budget = 65536 // engine.Config.SweepBudget's default
	clock := engine.NewManualClock(time.Now().UnixNano())
	e, err := engine.New(engine.Config{Clock: clock})
	if err != nil {
		b.Fatal(err)
	}
	p, err := limiter.GCRARequest{MaxBurst: 15, Count: 1, Period: 3600, Quantity: 1}.Params()
	if err != nil {
		b.Fatal(err)
	}
	keys := benchKeys()
	if b.N > len(keys) {
		keys = makeKeys(b.N)
	}
	before := liveHeap(e)
	for i := range b.N {
		if _, err := e.Apply(keys[i], p.Request(), nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := clock.Advance(int64(2 * time.Hour)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	removed, ticks := 0, 0
	for removed < b.N && ticks < 1_000_000 {
		removed += e.Sweep(budget)
		ticks++
	}
	b.StopTimer()
	if removed != b.N {
		b.Fatalf("the sweep removed %d of %d keys in %d ticks", removed, b.N, ticks)
	}
	b.ReportMetric(float64(ticks), "ticks")
	b.ReportMetric(float64(ticks)*0.1, "sweep-s")
	b.ReportMetric((float64(liveHeap(e))-float64(before))/float64(b.N), "left-heap-B/key")
	runtime.KeepAlive(e)
}
