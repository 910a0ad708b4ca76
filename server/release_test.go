package server

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestReleaser(t *testing.T) {
	const mb = 1 << 20
	t0 := time.Unix(1e9, 0)
	var r releaser
	steps := []struct {
		sec          int
		tables, free int64
		heap         int64 // what the heap holds: objects and free pages
		release      bool
		why          string
	}{
		{0, 0, 0, 10 * mb, false, "empty, nothing free: the heap's base is 10 MiB"},
		{1, 40 * mb, 4 * mb, 10 * mb, false, "growing"},
		{2, 40 * mb, 4 * mb, 10 * mb, false, "settled with 4 MiB free, but nothing has shrunk"},
		{9, 40 * mb, 4 * mb, 10 * mb, false, "still: a steady server is never made to collect"},
		{10, 32 * mb, 4 * mb, 10 * mb, false, "shrunk by a fifth"},
		{11, 29 * mb, 4 * mb, 10 * mb, true, "shrunk by more than a quarter of the peak"},
		{12, 20 * mb, 0, 10 * mb, true, "and by a quarter again"},
		{13, 15 * mb, 0, 10 * mb, true, "and again: shrinking releases are not spaced"},
		{14, 15*mb - 1000, 2 * mb, 10 * mb, false, "a little less: neither shrunk enough nor settled"},
		{15, 15*mb - 1000, 2 * mb, 10 * mb, false, "settled, but 2 s after the last release"},
		{18, 15*mb - 1000, 2 * mb, 10 * mb, true, "settled, 5 s after"},
		{24, 15*mb - 1000, 3 * mb, 10 * mb, false, "settled again, but the settled state was released"},
		{25, 30 * mb, 3 * mb, 10 * mb, false, "growing again"},
		{26, 20 * mb, 3 * mb, 10 * mb, true, "shrunk by a third"},
		{28, 20 * mb, mb - 1, 10 * mb, false, "settled, but less than releaseAt free"},
		{31, 20 * mb, 2 * mb, 10 * mb, true, "settled with more free, 5 s after"},
		{40, 20*mb - 10, 3 * mb, 10 * mb, false, "changing"},
		{41, 20 * mb, 3 * mb, 29 * mb, false, "the heap holds 19 MiB over its base: not a burst"},
		{42, 20 * mb, 3 * mb, 200 * mb, true, "a burst: 190 MiB over the base of 10"},
		{43, 20 * mb, 3 * mb, 200 * mb, false, "still held, but 1 s after the last release"},
		{47, 20 * mb, 3 * mb, 150 * mb, true, "still held 5 s after: the first release came during the burst"},
		{48, 20 * mb, 3 * mb, 150 * mb, false, "what is left after two releases is the new base"},
		{60, 20 * mb, 3 * mb, 150 * mb, false, "and stays so"},
		{61, 20 * mb, 3 * mb, 120 * mb, false, "the heap shrinks: the base follows it down"},
		{62, 20 * mb, 3 * mb, 200 * mb, false, "80 MiB over a base of 120: a busy heap swinging to its goal"},
		{63, 20 * mb, 3 * mb, 400 * mb, true, "280 MiB over it: a burst"},
		{70, 20 * mb, 3 * mb, 130 * mb, false, "the release collected it"},
		{76, 20 * mb, 3 * mb, 130 * mb, false, "no second release once the heap is back near its base"},
	}
	for _, s := range steps {
		if got := r.check(t0.Add(time.Duration(s.sec)*time.Second), s.tables, s.free, s.heap); got != s.release {
			t.Fatalf("at %d s (%s): release %v, want %v", s.sec, s.why, got, s.release)
		}
	}
}

// The metrics the releaser reads are ones the runtime has, as unsigned
// integers (a renamed one would read as 0, and memory would never be
// released), and heapHeld and heapFree compute from what they read: the
// free heap, and it plus the objects, an unknown metric as 0. The samples are of the thread count, which holds
// still while the test runs, so that what they read is known; how the
// runtime's heap figures move is the runtime's business.
func TestHeapFreeMetric(t *testing.T) {
	kinds := map[string]metrics.ValueKind{}
	for _, d := range metrics.All() {
		kinds[d.Name] = d.Kind
	}
	for _, name := range heapMetrics {
		if kinds[name] != metrics.KindUint64 {
			t.Errorf("%s: kind %v, want an unsigned integer", name, kinds[name])
		}
	}
	const threads, unknown = "/sched/gomaxprocs:threads", "/no/such/metric:bytes"
	p := int64(runtime.GOMAXPROCS(0))
	samples := func(names ...string) []metrics.Sample {
		s := make([]metrics.Sample, len(names))
		for i, n := range names {
			s[i].Name = n
		}
		return s
	}
	for _, c := range []struct {
		names      []string
		free, held int64
	}{
		{[]string{threads, threads}, p, 2 * p},
		{[]string{unknown, threads}, 0, p},
		{[]string{threads, unknown}, p, p},
		{[]string{unknown, unknown}, 0, 0},
	} {
		if free, held := heapHeld(samples(c.names...)); free != c.free || held != c.held {
			t.Errorf("heapHeld of %q = %d, %d; want %d, %d", c.names, free, held, c.free, c.held)
		}
	}
	if got := heapFree(samples(threads)); got != p {
		t.Errorf("heapFree of %s = %d, want %d", threads, got, p)
	}
	if got := heapFree(samples(unknown)); got != 0 {
		t.Errorf("an unknown metric reads as %d", got)
	}
}
