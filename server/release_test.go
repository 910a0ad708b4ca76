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
		live         int64
		release      bool
		why          string
	}{
		{0, 0, 0, 0, false, "empty, nothing free"},
		{1, 40 * mb, 4 * mb, 0, false, "growing"},
		{2, 40 * mb, 4 * mb, 0, false, "settled with 4 MiB free, but nothing has shrunk"},
		{9, 40 * mb, 4 * mb, 0, false, "still: a steady server is never made to collect"},
		{10, 32 * mb, 4 * mb, 0, false, "shrunk by a fifth"},
		{11, 29 * mb, 4 * mb, 0, true, "shrunk by more than a quarter of the peak"},
		{12, 20 * mb, 0, 0, true, "and by a quarter again"},
		{13, 15 * mb, 0, 0, true, "and again: shrinking releases are not spaced"},
		{14, 15*mb - 1000, 2 * mb, 0, false, "a little less: neither shrunk enough nor settled"},
		{15, 15*mb - 1000, 2 * mb, 0, false, "settled, but 2 s after the last release"},
		{18, 15*mb - 1000, 2 * mb, 0, true, "settled, 5 s after"},
		{24, 15*mb - 1000, 3 * mb, 0, false, "settled again, but the settled state was released"},
		{25, 30 * mb, 3 * mb, 0, false, "growing again"},
		{26, 20 * mb, 3 * mb, 0, true, "shrunk by a third"},
		{28, 20 * mb, mb - 1, 0, false, "settled, but less than releaseAt free"},
		{31, 20 * mb, 2 * mb, 0, true, "settled with more free, 5 s after"},
		{40, 20*mb - 10, 3 * mb, 0, false, "changing"},
		{41, 20 * mb, 64 * mb, 100 * mb, false, "a burst, but less than what is live"},
		{42, 20 * mb, 200 * mb, 100 * mb, true, "a burst: far more spare than live, however steady the tables"},
		{43, 20 * mb, 200 * mb, 0, false, "still spare, but 1 s after the last release"},
		{47, 20 * mb, 200 * mb, 0, true, "5 s after"},
	}
	for _, s := range steps {
		if got := r.check(t0.Add(time.Duration(s.sec)*time.Second), s.tables, s.free, s.live); got != s.release {
			t.Fatalf("at %d s (%s): release %v, want %v", s.sec, s.why, got, s.release)
		}
	}
}

// The metrics the releaser reads are ones the runtime has, as unsigned
// integers (a renamed one would read as 0, and memory would never be
// released), and spare and heapFree compute from what they read: the free
// heap plus the garbage (objects beyond the live bytes, never negative),
// an unknown metric as 0. The samples are of the thread count, which holds
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
		names       []string
		spare, live int64
	}{
		{[]string{threads, threads, unknown}, 2 * p, 0}, // free, and objects with none live: all garbage
		{[]string{unknown, threads, threads}, 0, p},     // objects all live
		{[]string{unknown, unknown, threads}, 0, p},     // more live than objects: no negative garbage
		{[]string{unknown, unknown, unknown}, 0, 0},
	} {
		if spare, live := spare(samples(c.names...)); spare != c.spare || live != c.live {
			t.Errorf("spare of %q = %d, %d; want %d, %d", c.names, spare, live, c.spare, c.live)
		}
	}
	if got := heapFree(samples(threads)); got != p {
		t.Errorf("heapFree of %s = %d, want %d", threads, got, p)
	}
	if got := heapFree(samples(unknown)); got != 0 {
		t.Errorf("an unknown metric reads as %d", got)
	}
}
