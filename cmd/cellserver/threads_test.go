package main

import (
	"runtime"
	"testing"
)

func TestThreadsFor(t *testing.T) {
	for _, tt := range []struct {
		others float64
		most   int
		want   int
	}{
		{0, 2, 2},     // a machine to itself: one thread per processor
		{0.3, 2, 2},   // light neighbours
		{0.95, 2, 1},  // a load generator on one of two processors
		{1.9, 2, 1},   // never fewer than one
		{5, 2, 1},     // figures above the processors' count
		{3.2, 16, 13}, // a busy large machine
		{0, 1, 1},     // one processor
		{-0.5, 4, 4},  // never more than at start
	} {
		if got := threadsFor(tt.others, tt.most); got != tt.want {
			t.Errorf("threadsFor(%v, %d) = %d, want %d", tt.others, tt.most, got, tt.want)
		}
	}
}

// fakeLoad answers Others from a script.
type fakeLoad struct {
	others []float64
	cpus   int
}

func (f *fakeLoad) Others() (float64, int, bool) {
	if len(f.others) == 0 {
		return 0, f.cpus, false
	}
	o := f.others[0]
	f.others = f.others[1:]
	return o, f.cpus, true
}

// TestThreadSizer: the count changes when two measurements agree, never on
// one, and never where Go was given fewer processors than the machine has.
func TestThreadSizer(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(4)
	count := &threadCount{most: 4}
	s := &threadSizer{load: &fakeLoad{others: []float64{2.1, 0.2, 2.2, 1.9, 0.1}, cpus: 4}, most: 4, set: count.set}
	for i, want := range []struct {
		n       int
		changed bool
	}{
		{4, false}, // wants 2: first measurement
		{4, false}, // wants 4: the count in force; forget the 2
		{4, false}, // wants 2 again: first measurement again
		{2, true},  // wants 2: two agree
		{2, false}, // wants 4: first measurement
	} {
		n, changed := s.size()
		if n != want.n || changed != want.changed || runtime.GOMAXPROCS(0) != want.n {
			t.Fatalf("measurement %d: %d, %v (GOMAXPROCS %d); want %d, %v", i, n, changed, runtime.GOMAXPROCS(0), want.n, want.changed)
		}
	}
	runtime.GOMAXPROCS(4)
	limited := &threadSizer{load: &fakeLoad{others: []float64{3, 3, 3}, cpus: 64}, most: 4, set: count.set}
	for range 3 {
		if n, changed := limited.size(); n != 4 || changed {
			t.Fatalf("with 4 of 64 processors: %d, %v; want the count left at 4", n, changed)
		}
	}
	// Persistence's thread is added to the sized figure while it works.
	count = &threadCount{most: 4}
	sized := &threadSizer{load: &fakeLoad{others: []float64{3.2, 3.1}, cpus: 4}, most: 4, set: count.set}
	sized.size()
	if n, _ := sized.size(); n != 1 || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("sized to %d (GOMAXPROCS %d), want 1", n, runtime.GOMAXPROCS(0))
	}
	count.persisting(true)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("persisting: GOMAXPROCS %d, want 1 + 1", got)
	}
	count.persisting(false)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("done persisting: GOMAXPROCS %d, want 1", got)
	}
}

// The threads setting is the base, persistence adds one while it works,
// within the ceiling when there is one; a count with no base yet leaves
// GOMAXPROCS as Go set it.
func TestThreadCount(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(3)
	var unset threadCount
	unset.persisting(true)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("no base: GOMAXPROCS %d, want 3 as it was", got)
	}
	set := &threadCount{}
	set.set(1)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("threads 1: GOMAXPROCS %d", got)
	}
	set.persisting(true)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("threads 1, persisting: GOMAXPROCS %d, want 2", got)
	}
	set.set(4)
	if got := runtime.GOMAXPROCS(0); got != 5 {
		t.Fatalf("threads 4, persisting: GOMAXPROCS %d, want 5 (no ceiling)", got)
	}
	capped := &threadCount{most: 4}
	capped.set(4)
	capped.persisting(true)
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("sized 4 of 4, persisting: GOMAXPROCS %d, want the ceiling 4", got)
	}
}
