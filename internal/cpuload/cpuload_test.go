package cpuload

import (
	"runtime"
	"testing"
)

func TestOthers(t *testing.T) {
	var s Sampler
	if _, _, ok := s.Others(); ok {
		t.Fatal("the first call reported a figure")
	}
	if runtime.GOOS != "linux" {
		return
	}
	// Burn some time here, so the counters move.
	x := 0
	for i := range 50_000_000 {
		x += i
	}
	others, cpus, ok := s.Others()
	if !ok || cpus < 1 || others < 0 || others > float64(cpus) {
		t.Fatalf("Others() = %v, %d, %v (%d)", others, cpus, ok, x)
	}
}
