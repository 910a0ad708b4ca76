package testkit

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer that a server's goroutines (or a process's
// output copier) may write while a test reads it. The zero value is an
// empty buffer.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor waits, bounded by IOTimeout, until the buffer holds want, and
// fails the test with what it holds if it does not.
func (s *SyncBuffer) WaitFor(t testing.TB, want string) {
	t.Helper()
	deadline := time.Now().Add(IOTimeout)
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the output lacks %q after %v:\n%s", want, IOTimeout, s.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
