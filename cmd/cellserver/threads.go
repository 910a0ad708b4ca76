package main

import (
	"math"
	"runtime"
	"time"

	"github.com/cellserver/cellserver/internal/cpuload"
)

// Sizing the thread count (the threads setting at 0, its default).
//
// One thread per processor is right for a server that has its machine to
// itself. Beside busy neighbours (a load generator, other services) the
// extra threads are worse than useless: Go keeps idle threads spinning for
// work and wakes a second one whenever a goroutine becomes runnable, and
// those cycles are taken from the neighbours this server's clients may
// well be among (on a 2-core machine, redis-benchmark: bench/RESULTS.md).
// So with threads at 0 the server runs as many threads as there are
// processors the rest of the machine leaves idle, rounded, at least one
// and at most the processors Go found at start: it measures the others'
// use every second (package cpuload) and changes GOMAXPROCS when two
// measurements in a row agree on a new figure. Where the machine's load
// cannot be read (not Linux), or where Go found fewer processors than the
// machine has (a container's CPU limit, an affinity mask), the count stays
// as Go set it.

// sizeThreads runs the sizing every second until stop is closed, logging
// each change with logf. GOMAXPROCS belongs to the process, so this lives
// here rather than in package server.
// extra threads are added to the figure, up to the ceiling (one for the
// snapshots' background work with persistence on: see run).
func sizeThreads(stop <-chan struct{}, extra int, logf func(level, format string, args ...any)) {
	t := &threadSizer{load: new(cpuload.Sampler), most: runtime.GOMAXPROCS(0), extra: extra}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if n, changed := t.size(); changed {
				logf("verbose", "threads: now %d, the processors other processes leave idle (threads 0)", n)
			}
		}
	}
}

// sampler measures the other processes' use of the processors, as
// cpuload.Sampler does.
type sampler interface {
	Others() (others float64, cpus int, ok bool)
}

// threadSizer holds what sizing needs between two measurements.
type threadSizer struct {
	load    sampler // a *cpuload.Sampler
	most    int     // GOMAXPROCS at start: the ceiling
	extra   int     // added to the measured figure
	pending int     // the figure the last measurement wanted; 0: none
}

// threadsFor returns how many threads to run when other processes use
// others processors' worth of time, with most at most.
func threadsFor(others float64, most int) int {
	return min(most, max(1, int(math.Round(float64(most)-others))))
}

// size measures the machine's load and sets GOMAXPROCS as the comment
// above says; it returns the count in force and whether it changed it.
func (t *threadSizer) size() (int, bool) {
	cur := runtime.GOMAXPROCS(0)
	others, cpus, ok := t.load.Others()
	if !ok || t.most <= 1 || cpus != t.most {
		// A container's CPU limit or an affinity mask gave Go fewer
		// processors than the machine has: the machine's load then says
		// nothing of what this process may use.
		return cur, false
	}
	want := min(t.most, threadsFor(others, t.most)+t.extra)
	if want == cur {
		t.pending = 0
		return cur, false
	}
	if t.pending != want {
		t.pending = want // wait for a second measurement to agree
		return cur, false
	}
	t.pending = 0
	runtime.GOMAXPROCS(want)
	return want, true
}
