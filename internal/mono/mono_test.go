package mono

import (
	"testing"
	"time"
)

// Now follows the monotonic clock time.Since reads.
func TestNowFollowsTime(t *testing.T) {
	t0, m0 := time.Now(), Now()
	for time.Since(t0) < time.Millisecond { // busy: a millisecond passes
	}
	d, m := time.Since(t0), Now()-m0
	if m < int64(time.Millisecond) || m > int64(d)+int64(time.Millisecond) {
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
