package main

import (
	"math"
	"runtime"
	"sync"
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

// threadCount sets GOMAXPROCS: a base figure (the threads setting, or the
// sizing's), plus one while persistence works in the background (a
// snapshot, then Pebble's compactions: persist.SaverConfig.Busy), as
// Redis's BGSAVE gets a process of its own while it runs, so that the work
// takes no time slices from the commands' threads. The thread is there
// only while the work lasts: an idle thread beside a busy client costs
// as much as a busy one. GOMAXPROCS belongs to the process, so this lives
// here rather than in package server or package daemon.
type threadCount struct {
	mu   sync.Mutex
	base int  // 0: as Go set it
	most int  // the ceiling of base plus one; 0: none
	busy bool // persistence is at work
}

// set makes n the base figure.
func (c *threadCount) set(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base = n
	c.apply()
}

// persisting adds the thread for persistence's work (busy), or takes it
// away.
func (c *threadCount) persisting(busy bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = busy
	c.apply()
}

func (c *threadCount) apply() {
	if c.base == 0 {
		return
	}
	n := c.base
	if c.busy {
		n++
	}
	if c.most > 0 {
		n = min(n, c.most)
	}
	if runtime.GOMAXPROCS(0) != n {
		runtime.GOMAXPROCS(n)
	}
}

// sizeThreads runs the sizing every second until stop is closed, setting
// the base of count and logging each change with logf.
func sizeThreads(stop <-chan struct{}, count *threadCount, logf func(level, format string, args ...any)) {
	t := &threadSizer{load: new(cpuload.Sampler), most: runtime.GOMAXPROCS(0), set: count.set}
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
	load    sampler   // a *cpuload.Sampler
	most    int       // GOMAXPROCS at start: the ceiling
	set     func(int) // sets the figure (threadCount.set)
	cur     int       // the figure set last; 0: none yet (most)
	pending int       // the figure the last measurement wanted; 0: none
}

// threadsFor returns how many threads to run when other processes use
// others processors' worth of time, with most at most.
func threadsFor(others float64, most int) int {
	return min(most, max(1, int(math.Round(float64(most)-others))))
}

// size measures the machine's load and sets the figure as the comment
// above says; it returns the figure in force and whether it changed it.
func (t *threadSizer) size() (int, bool) {
	if t.cur == 0 {
		t.cur = t.most
	}
	cur := t.cur
	others, cpus, ok := t.load.Others()
	if !ok || t.most <= 1 || cpus != t.most {
		// A container's CPU limit or an affinity mask gave Go fewer
		// processors than the machine has: the machine's load then says
		// nothing of what this process may use.
		return cur, false
	}
	want := threadsFor(others, t.most)
	if want == cur {
		t.pending = 0
		return cur, false
	}
	if t.pending != want {
		t.pending = want // wait for a second measurement to agree
		return cur, false
	}
	t.pending = 0
	t.cur = want
	t.set(want)
	return want, true
}
