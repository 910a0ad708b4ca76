package client

import (
	"sync"
	"time"
)

// BreakerState is the circuit breaker's state.
type BreakerState uint8

const (
	// Closed: calls go to the server.
	Closed BreakerState = iota
	// Open: the server failed FailureThreshold calls in a row; calls do
	// not wait on it and take the failure policy at once, for OpenFor.
	Open
	// HalfOpen: OpenFor has passed; one call at a time probes the server,
	// the others take the failure policy. A probe that succeeds closes the
	// breaker, one that fails opens it again.
	HalfOpen
)

// String names the state: "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "closed"
}

// breaker is a circuit breaker over the calls to the server. It is safe
// for concurrent use; its transitions are reported through emit, called
// without its lock held.
type breaker struct {
	threshold int
	openFor   time.Duration
	now       func() time.Time
	emit      func(Event)

	mu       sync.Mutex
	state    BreakerState
	failures int       // consecutive, while closed
	openedAt time.Time // while open
	probing  bool      // a half-open probe is out
}

// allow reports whether a call may go to the server now.
func (b *breaker) allow() bool {
	b.mu.Lock()
	var ev BreakerState
	changed := false
	ok := true
	switch b.state {
	case Open:
		if b.now().Sub(b.openedAt) < b.openFor {
			ok = false
			break
		}
		b.state, b.probing, ev, changed = HalfOpen, true, HalfOpen, true
	case HalfOpen:
		if b.probing {
			ok = false
		} else {
			b.probing = true
		}
	}
	b.mu.Unlock()
	if changed {
		b.emit(Event{Type: EventBreaker, State: ev})
	}
	return ok
}

// success records a call the server answered.
func (b *breaker) success() {
	b.mu.Lock()
	changed := b.state != Closed
	b.state, b.failures, b.probing = Closed, 0, false
	b.mu.Unlock()
	if changed {
		b.emit(Event{Type: EventBreaker, State: Closed})
	}
}

// abandon records a call given up by its caller: a half-open probe may
// be sent again.
func (b *breaker) abandon() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// failure records a call the server did not answer.
func (b *breaker) failure() {
	b.mu.Lock()
	changed := false
	switch b.state {
	case Closed:
		if b.failures++; b.failures >= b.threshold {
			b.state, b.openedAt, changed = Open, b.now(), true
		}
	case HalfOpen:
		b.state, b.openedAt, b.probing, changed = Open, b.now(), false, true
	}
	b.mu.Unlock()
	if changed {
		b.emit(Event{Type: EventBreaker, State: Open})
	}
}

// current returns the state.
func (b *breaker) current() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}
