// Package loglimit rate-limits one kind of log line: at most one line per
// interval, each line counting the events left out since the one before.
// The server's failed TLS handshakes, the command layer's failed AUTH and
// the cluster's failed link handshakes each keep one, so that whoever can
// reach a port cannot write the log at the rate they can connect.
package loglimit

import (
	"sync"
	"time"
)

// Limit is the state of one kind of line. The zero value is ready: its
// first event is logged.
type Limit struct {
	mu         sync.Mutex
	last       time.Time // when the last line was written; zero: never
	suppressed int64     // events since then not logged
}

// Note records one event at now and reports whether it is to be logged,
// at most one per every, and if so how many events before it were not.
func (l *Limit) Note(now time.Time, every time.Duration) (suppressed int64, logIt bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.suppressed++
		return 0, false
	}
	suppressed, l.suppressed, l.last = l.suppressed, 0, now
	return suppressed, true
}
