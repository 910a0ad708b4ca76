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
//     release of a mass expiry, below the first rule's threshold (measured
//     at 1M keys: RSS 10 s after every key had expired was 20-30% above
//     the empty server's without it). A server whose tables never shrink
//     is never made to collect.
const (
	releaseAt      = 1 << 20
	settleGap      = 5 * time.Second
	heapFreeMetric = "/memory/classes/heap/free:bytes"
)

type releaser struct {
	peak  int64     // table bytes at their highest since memory was last released
	last  int64     // table bytes at the previous check
	at    time.Time // of the last release
	armed bool      // a shrink was released and the settled state not yet
}

// check reports whether to release memory now, given the tables' bytes
// and the heap's free, unreturned bytes; it assumes the caller does.
func (r *releaser) check(now time.Time, tables, heapFree int64) bool {
	last := r.last
	r.last = tables
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
