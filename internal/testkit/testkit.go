// Package testkit is cellserver's one test kit: the free ports and open
// listeners tests serve on, a raw RESP connection, waiting with a
// deadline, a buffer a server's goroutines may write while a test reads
// it, serving any server on a listener, running a cellserver binary, and
// a gossip network in the test's process for cluster nodes (Gossip).
// Every package's tests use it; its sub-package testkit/inproc starts a
// whole cellserver in the test's process, and testkit/ha a replication
// group of binaries (or redis-server) watched by real Redis Sentinels.
//
// Package testkit imports only the standard library and memberlist (for
// Gossip), no package of this module, so that the tests inside any
// package (server's own among them) may use it.
package testkit

import (
	"errors"
	"testing"
	"time"
)

// IOTimeout bounds every wait of a test on the network or on background
// work, so that a bug fails a test instead of hanging the package.
const IOTimeout = 10 * time.Second

// WaitFor polls cond until it holds, or fails the test once IOTimeout has
// passed. It is for background work (connection bookkeeping, a process
// coming up, gossip converging), never for a server's clock, which tests
// move themselves.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Until(t, IOTimeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

var errNotYet = errors.New("not yet")

// Until calls try until it returns nil, or fails the test with try's last
// error once d has passed. The pause between calls grows from 5 ms to
// 100 ms, so that a long wait polls gently.
func Until(t testing.TB, d time.Duration, what string, try func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	pause := 5 * time.Millisecond
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// Recv returns the next value from ch, or fails the test once IOTimeout
// has passed without one.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(IOTimeout):
		t.Fatalf("timed out after %v waiting for %s", IOTimeout, what)
		panic("unreachable")
	}
}
