package server

import (
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// drainAll drains the engine's change feed, as replication's drain loop
// does each millisecond.
func drainAll(e *engine.Engine) {
	for i := range e.Shards() {
		e.DrainFeed(i, func(engine.Record, engine.Change) {})
	}
}

// With a replica attached (the engine's change feed on, drained between
// batches), a -P 16 batch of CL.THROTTLE still allocates nothing.
func TestServeBatchWithFeedDoesNotAllocate(t *testing.T) {
	h := newBatchHarness(t, 16)
	h.s.Engine().SetFeed(true)
	call := func() {
		h.run()
		drainAll(h.s.Engine())
	}
	call()
	call()
	if n := testing.AllocsPerRun(100, call); n != 0 {
		t.Fatalf("a batch and a drain allocate %v times with the feed on", n)
	}
}

// BenchmarkServeBatchFeed is BenchmarkServeBatch with a replica attached:
// the feed on, drained every 64 batches (1024 requests, about a
// millisecond's worth at -P 16 on one core).
func BenchmarkServeBatchFeed(b *testing.B) {
	h := newBatchHarness(b, 16)
	h.s.Engine().SetFeed(true)
	h.run()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N / 16 {
		h.run()
		if i%64 == 63 {
			drainAll(h.s.Engine())
		}
	}
}
