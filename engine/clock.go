package engine

import (
	"sync/atomic"
	"time"
)

// Clock tells the engine what time it is, in nanoseconds since the Unix
// epoch. Implementations must be safe for concurrent use.
type Clock interface {
	Now() int64
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the wall-clock time in Unix nanoseconds.
func (SystemClock) Now() int64 { return time.Now().UnixNano() }

// ManualClock is a clock that is either the wall clock or frozen at an
// instant chosen by the caller. It backs DEBUG CLOCK. The zero value follows
// the wall clock. It is safe for concurrent use.
type ManualClock struct {
	frozen atomic.Bool
	at     atomic.Int64
}

var (
	_ Clock = SystemClock{}
	_ Clock = (*ManualClock)(nil)
)

// NewManualClock returns a clock frozen at unixNano.
func NewManualClock(unixNano int64) *ManualClock {
	c := &ManualClock{}
	c.Set(unixNano)
	return c
}

// Now returns the frozen instant, or the wall clock when not frozen.
func (c *ManualClock) Now() int64 {
	if c.frozen.Load() {
		return c.at.Load()
	}
	return time.Now().UnixNano()
}

// Set freezes the clock at unixNano.
func (c *ManualClock) Set(unixNano int64) {
	c.at.Store(unixNano)
	c.frozen.Store(true)
}

// Advance moves the clock forward by d nanoseconds, freezing it at the
// current wall-clock time first if it was following the wall clock. It
// returns ErrClockOverflow, and leaves the clock unchanged, when d is
// negative or the result would not fit in an int64.
func (c *ManualClock) Advance(d int64) error {
	if d < 0 {
		return ErrClockOverflow
	}
	if !c.frozen.Load() {
		c.at.Store(time.Now().UnixNano())
		c.frozen.Store(true)
	}
	for {
		old := c.at.Load()
		if old > maxInt64-d {
			return ErrClockOverflow
		}
		if c.at.CompareAndSwap(old, old+d) {
			return nil
		}
	}
}

// Real makes the clock follow the wall clock again.
func (c *ManualClock) Real() { c.frozen.Store(false) }
