package server

import (
	"runtime/metrics"
	"time"
)

// Handing memory back to the operating system. The tables' large arrays
// live outside the Go heap and go back the moment they are freed; what is
// left is the Go heap (small tables, what shrinking tables passed through,
// connection buffers), whose freed pages Go returns only gradually, and
// not below a margin over its next collection's goal. The server's cron
// asks a releaser once a second whether to call debug.FreeOSMemory (a
// collection of the Go heap, which holds little, and the return of every
// free page):
//
//   - when the tables have shrunk by a quarter, and by at least releaseAt,
//     since their peak (keys expired or were deleted), as they go down;
//   - and once more after such a release, once things have settled: when
//     the tables did not change over the last second while at least
//     releaseAt of the heap is free but still held, settleGap or more
//     after the last release. This catches what was freed after the last
//     release of a mass expiry, below the first rule's threshold;
//   - after a burst: when the heap holds burstAt or more beyond its live
//     bytes (free, or garbage not collected yet), and at least as much as
//     is live, settleGap or more after the last release. One large
//     request or reply (a COMMAND INFO of a million names, a long EXEC)
//     leaves its buffers to a collection that an idle server may not run
//     for minutes, and the runtime returns free pages only gradually.
//
// A server whose tables never shrink and whose heap holds little beyond
// its live bytes is never made to collect.
const (
	releaseAt      = 1 << 20
	burstAt        = 64 << 20
	settleGap      = 5 * time.Second
	heapFreeMetric = "/memory/classes/heap/free:bytes"
)

// heapMetrics are what spare reads: the heap's free bytes, its objects'
// bytes (live and garbage) and its live bytes at the last collection.
var heapMetrics = []string{heapFreeMetric, "/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes"}

type releaser struct {
	peak  int64     // table bytes at their highest since memory was last released
	last  int64     // table bytes at the previous check
	at    time.Time // of the last release
	armed bool      // a shrink was released and the settled state not yet
}

// check reports whether to release memory now, given the tables' bytes,
// the heap's bytes held beyond its live ones (spare) and its live bytes;
// it assumes the caller does.
func (r *releaser) check(now time.Time, tables, heapFree, live int64) bool {
	last := r.last
	r.last = tables
	if heapFree >= burstAt && heapFree >= live && now.Sub(r.at) >= settleGap {
		r.peak, r.at, r.armed = tables, now, false
		return true
	}
	if tables > r.peak {
		r.peak = tables
		return false
	}
	drop := r.peak - tables
	shrunk := drop >= releaseAt && drop >= r.peak/4
	settled := r.armed && tables == last && heapFree >= releaseAt && now.Sub(r.at) >= settleGap
	if !shrunk && !settled {
		return false
	}
	r.peak, r.at, r.armed = tables, now, shrunk
	return true
}

// heapFree returns the bytes of the Go heap that are free but still held
// from the operating system.
func heapFree(sample []metrics.Sample) int64 {
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// spare returns the bytes the Go heap holds beyond its live ones (free
// pages not returned, and garbage), and its live bytes; sample holds
// heapMetrics.
func spare(sample []metrics.Sample) (spare, live int64) {
	metrics.Read(sample)
	var v [3]int64
	for i, s := range sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = int64(s.Value.Uint64())
		}
	}
	return v[0] + max(0, v[1]-v[2]), v[2]
}
