package mono

import (
	"testing"
	"time"
)

// Now follows the monotonic clock time.Since reads.
func TestNowFollowsTime(t *testing.T) {
	m0 := Now()
	t0 := time.Now()
	for time.Since(t0) < time.Millisecond { // busy: a millisecond passes
	}
	d := time.Since(t0)
	m := Now() - m0 // spans d and a little more
	if m < int64(d) || m > int64(d)+int64(time.Millisecond) {
		t.Fatalf("Now moved %d ns while time moved %v", m, d)
	}
}

func BenchmarkNow(b *testing.B) {
	for range b.N {
		Now()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	for range b.N {
		time.Now()
	}
}
