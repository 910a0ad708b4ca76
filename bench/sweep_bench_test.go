package bench

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// BenchmarkSweep measures the background expiry sweep on its own: it
// inserts b.N CL.THROTTLE keys into an engine on a manual clock, moves the
// clock past every expiry, and calls Engine.Sweep with the default budget
// (65536 entries) until every key is gone. A background tick (one per
// SweepInterval, 100 ms by default) runs up to 8 such calls while more
// than a quarter of what they examine has expired, within 25 ms of work.
// It reports
//
//	ticks           Sweep calls needed to empty the keyspace
//	sweep-s         the wall time that takes at one call per 100 ms (an
//	                upper bound: a tick makes up to 8 calls)
//	left-heap-B/key memory still held after the sweep (Go heap and off-heap
//	                arrays), per key inserted
//
// and ns/op is the sweep's CPU time per key. (DBSIZE reads the shards'
// counts and reclaims nothing, so bench/memprobe, polling it, watches the
// sweep over TCP too.)
func BenchmarkSweep(b *testing.B) { benchSweep(b, "user:%012d") }

// BenchmarkSweepOneShard is BenchmarkSweep with every key in one hash
// slot ({t}), hence in one shard: the mass expiry of issue 24 (item 18),
// which the sweep once reclaimed at 400 entries per round.
func BenchmarkSweepOneShard(b *testing.B) { benchSweep(b, "{t}user:%012d") }

func benchSweep(b *testing.B, format string) {
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
	keys := make([][]byte, b.N)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, format, i)
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
