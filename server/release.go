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
//   - when the keyspace (engine.Engine.KeyspaceBytes) has shrunk by a
//     quarter, and by at least releaseAt, since its peak (keys expired or
//     were deleted), as it goes down;
//   - and once more after such a release, once things have settled: when
//     the keyspace did not change over the last second while at least
//     releaseAt of the heap is free but still held, settleGap or more
//     after the last release. This catches what was freed after the last
//     release of a mass expiry, below the first rule's threshold;
//   - after a burst: when the Go heap (its objects, live or garbage, and
//     its free pages) holds burstAt or more, and twice as much, over the
//     least it has held (its base), settleGap or more after the last
//     release. One large request or reply (an ECHO of 300 MB, a COMMAND
//     INFO of a million names) leaves its buffers as garbage that an idle
//     server, which allocates nothing, may not collect for minutes; and a
//     collection that ran during the burst counted them live, so the
//     heap's live bytes cannot tell them from what is in use. Growth over
//     the base can. A release that came while the burst was still in use
//     is followed by a second one settleGap later if the heap still holds
//     that much; after that second one, what is left is taken to be in
//     use and becomes the base. So lasting growth (a server that gains
//     many connections) costs two releases per step of burstAt, and a
//     busy server whose heap swings between its live bytes and twice them
//     (its collector's goal) none.
//
// A server whose keyspace never shrinks and whose heap does not grow is
// never made to collect.
const (
	releaseAt      = 1 << 20
	burstAt        = 32 << 20
	settleGap      = 5 * time.Second
	heapFreeMetric = "/memory/classes/heap/free:bytes"
)

// heapMetrics are what heapHeld reads: the heap's free bytes and its
// objects' bytes (live and garbage).
var heapMetrics = []string{heapFreeMetric, "/memory/classes/heap/objects:bytes"}

type releaser struct {
	peak  int64     // keyspace bytes at their highest since memory was last released
	last  int64     // keyspace bytes at the previous check
	at    time.Time // of the last release
	armed bool      // a shrink was released and the settled state not yet
	base  int64     // the least the heap held since it was last measured anew; 0: measure it anew
	again bool      // the last release was the first for a burst
}

// check reports whether to release memory now, given the keyspace's bytes,
// the heap's free bytes and what the heap holds in all (objects and free
// pages); it assumes the caller does.
func (r *releaser) check(now time.Time, tables, heapFree, heap int64) bool {
	last := r.last
	r.last = tables
	r.observe(heap)
	if grown := heap - r.base; grown < burstAt || grown < 2*r.base {
		r.again = false
	} else if now.Sub(r.at) >= settleGap {
		// A release during the burst collects only what is garbage by
		// then: the base stays, and the next check may release again.
		// After the second release in a row, what the heap still holds
		// is in use: it becomes the base.
		if r.again {
			r.base = 0
		}
		r.peak, r.at, r.armed, r.again = tables, now, false, !r.again
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

// observe tells r what the heap holds now (objects and free pages): the
// base follows it down, and is set by it when it is to be measured anew.
// The server calls it at its start, before any client, and right after
// each release (whose collection leaves only live objects), as well as
// through check.
func (r *releaser) observe(heap int64) {
	if r.base == 0 || heap < r.base {
		r.base = heap
	}
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

// heapHeld returns the Go heap's free bytes (pages not returned to the
// system) and what it holds in all: those and its objects' bytes, live
// or garbage; sample holds heapMetrics. An unknown metric reads as 0.
func heapHeld(sample []metrics.Sample) (free, held int64) {
	metrics.Read(sample)
	var v [2]int64
	for i, s := range sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = int64(s.Value.Uint64())
		}
	}
	return v[0], v[0] + v[1]
}
