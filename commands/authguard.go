package commands

import (
	"crypto/sha256"
	"crypto/subtle"
	"sync"
	"time"
)

// Failed AUTH is logged and slowed down:
//
//   - Each failure (AUTH or HELLO … AUTH) is logged at warning level, at
//     most one line per authLogEvery server-wide; a line counts the
//     failures not logged since the line before it, so a flood of guesses
//     costs the log one line a second.
//   - On one connection, the first authFreeFailures failures answer at
//     once; each later one waits authDelayBase, doubling per failure up to
//     authDelayMax, before it answers. The wait holds only that
//     connection's goroutine (no lock is held while AUTH runs, and inside
//     EXEC, where every shard is locked, there is no wait), and ends early
//     if the client is killed. A successful AUTH starts the count afresh.
//     The delay function and the clock are Options, so tests never sleep.
const (
	authLogEvery     = time.Second
	authFreeFailures = 3
	authDelayBase    = 100 * time.Millisecond
	authDelayMax     = 5 * time.Second
)

// authDelay is how long the n-th consecutive failed AUTH of a connection
// waits before it answers.
func authDelay(n int) time.Duration {
	if n <= authFreeFailures {
		return 0
	}
	d := authDelayBase
	for i := authFreeFailures + 1; i < n && d < authDelayMax; i++ {
		d *= 2
	}
	return min(d, authDelayMax)
}

// authLog rate-limits the failed-AUTH log lines of one table.
type authLog struct {
	mu         sync.Mutex
	last       time.Time // when the last line was written; zero: never
	suppressed int64     // failures since then not logged
}

// note records one failure at now and returns how many failures before it
// went unlogged, and whether this one is to be logged.
func (l *authLog) note(now time.Time) (suppressed int64, logIt bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < authLogEvery {
		l.suppressed++
		return 0, false
	}
	suppressed, l.suppressed, l.last = l.suppressed, 0, now
	return suppressed, true
}

// sleepUnlessKilled waits d, or until the client is killed.
func sleepUnlessKilled(d time.Duration, killed <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-killed:
	}
}

// checkPassword reports whether user/pass are the default user's
// credentials. hasUser is false for the one-argument AUTH form; a user
// name given, even empty, must be "default", the only user (Redis 7
// answers WRONGPASS to AUTH "" pass). The password is compared in
// constant time: both sides are hashed first, so that not even its length
// shows in the time taken.
func (c *Client) checkPassword(user []byte, hasUser bool, pass []byte) bool {
	want := c.host.RequirePass()
	if hasUser && string(user) != "default" {
		return false
	}
	if want == "" {
		return true // the default user has no password
	}
	got, exp := sha256.Sum256(pass), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(got[:], exp[:]) == 1
}

// authOK notes a successful authentication.
func (c *Client) authOK() {
	c.authenticated = true
	c.authFailures = 0
}

// authFailed logs (rate-limited) and slows down a failed authentication
// as user, before its error reply is written.
func (c *Client) authFailed(user []byte, hasUser bool) {
	c.authFailures++
	t := c.table
	if suppressed, ok := t.authLog.note(t.now()); ok {
		name := "default"
		if hasUser {
			name = clip(user, 64)
		}
		if suppressed > 0 {
			c.host.Logf("warning", "Failed AUTH from %s (id=%d) as user %q; %d more failed AUTH not logged since the last line", c.addr, c.id, name, suppressed)
		} else {
			c.host.Logf("warning", "Failed AUTH from %s (id=%d) as user %q", c.addr, c.id, name)
		}
	}
	if d := authDelay(c.authFailures); d > 0 && !c.inExec {
		t.sleep(d, c.done)
	}
}
