package server

import (
	"runtime"
	"runtime/debug"
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

// The runtime has the metric the releaser reads, and heapFree reads it:
// memory freed by a collection shows as free heap until it is returned to
// the system, and a metric the runtime does not have reads as 0.
func TestHeapFreeMetric(t *testing.T) {
	sample := []metrics.Sample{{Name: heapFreeMetric}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("%s: kind %v", heapFreeMetric, sample[0].Value.Kind())
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but ours
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = 1 // touch every page, so that the heap really holds them
	}
	runtime.KeepAlive(big)
	big = nil
	runtime.GC()
	if free := heapFree(sample); free < 16<<20 {
		t.Fatalf("%d bytes free right after 64 MiB were collected", free)
	}
	if got := heapFree([]metrics.Sample{{Name: "/no/such/metric:bytes"}}); got != 0 {
		t.Fatalf("an unknown metric reads as %d", got)
	}
}
