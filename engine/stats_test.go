package engine

import (
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// Stats counts commands' lookups as hits and misses, and estimates the
// keys' average remaining life from what the sweep examines.
func TestStatsHitsMissesAvgTTL(t *testing.T) {
	e, clock := newTestEngine(t, 1)
	r := limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 1}
	for _, k := range []string{"a", "b", "a"} { // miss, miss, hit
		if _, err := e.fixedWindow([]byte(k), r); err != nil {
			t.Fatal(err)
		}
	}
	e.Exists([]byte("a"), nil)       // hit
	e.Exists([]byte("nothere"), nil) // miss
	st := e.Stats()
	if st.KeyspaceHits != 2 || st.KeyspaceMisses != 3 || st.AvgTTL != 0 {
		t.Fatalf("hits %d misses %d avg_ttl %d, want 2, 3, 0", st.KeyspaceHits, st.KeyspaceMisses, st.AvgTTL)
	}
	// now0 is 20 s into a minute: both windows end 40 s on; 15 s later,
	// 25 s remain.
	clock.Advance(15e9)
	e.Sweep(100)
	if got := e.Stats().AvgTTL; got != 25000 {
		t.Fatalf("avg_ttl %d ms, want 25000", got)
	}
	// A later sample weighs 1/50: 25000/50*49 + 15000/50.
	clock.Advance(10e9)
	e.Sweep(100)
	if got := e.Stats().AvgTTL; got != 24800 {
		t.Fatalf("avg_ttl %d ms, want 24800", got)
	}
	e.ResetStats()
	if st := e.Stats(); st.KeyspaceHits != 0 || st.KeyspaceMisses != 0 || st.AvgTTL != 24800 {
		t.Fatalf("after ResetStats: %+v", st)
	}
}
