package server

import "testing"

// rateMeter averages its last 16 samples, each the growth of the total
// over the time between two readings.
func TestRateMeter(t *testing.T) {
	var m rateMeter
	if m.rate() != 0 {
		t.Fatal("rate before any reading")
	}
	m.add(1e9, 100)
	if m.rate() != 0 {
		t.Fatal("rate from one reading")
	}
	m.add(1.25e9, 150) // 50 in 250 ms: 200/s
	if got := m.rate(); got != 200 {
		t.Fatalf("rate %v, want 200", got)
	}
	m.add(1.5e9, 250) // 100 in 250 ms: 400/s
	if got := m.rate(); got != 300 {
		t.Fatalf("rate %v, want 300", got)
	}
	m.add(1.75e9, 0) // reset: 0/s
	if got := m.rate(); got != 200 {
		t.Fatalf("rate %v, want 200", got)
	}
	for i := range rateSamples { // 16 more samples of 40 per 250 ms push the rest out
		m.add(2e9+int64(i)*250e6, int64(40*(i+1)))
	}
	if got := m.rate(); got != 160 {
		t.Fatalf("rate %v, want 160", got)
	}
}
