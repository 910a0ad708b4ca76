package loglimit

import (
	"testing"
	"time"
)

// TestLimit: one line per interval, the next one counting the events
// left out.
func TestLimit(t *testing.T) {
	var l Limit
	t0 := time.Unix(1_700_000_000, 0)
	for i, c := range []struct {
		at         time.Duration
		suppressed int64
		log        bool
	}{{0, 0, true}, {500 * time.Millisecond, 0, false}, {999 * time.Millisecond, 0, false}, {time.Second, 2, true}, {3 * time.Second, 0, true}} {
		if n, ok := l.Note(t0.Add(c.at), time.Second); n != c.suppressed || ok != c.log {
			t.Errorf("event %d at %v: %d, %v; want %d, %v", i, c.at, n, ok, c.suppressed, c.log)
		}
	}
}
