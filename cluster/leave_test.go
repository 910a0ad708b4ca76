package cluster

import (
	"errors"
	"testing"
	"time"
)

// A node whose every peer is leaving too leaves promptly, without its
// slots' hand-off, rather than retry them to the leavers until its leave
// timeout: b has begun to leave and not gossiped it yet (as when a whole
// cluster gets SIGTERM at once), and refuses a's hand-offs for that; a
// learns from the refusal, and its Leave returns ErrAlone at once.
func TestLeaveWhenPeersLeave(t *testing.T) {
	a := startNode(t)
	b := startNode(t, a.member())
	settled(t, a, b)
	b.mu.Lock()
	b.leaving = true // as Leave begins, before its gossip
	b.gossipedMu.Lock()
	b.selfMeta.Leaving = true
	b.gossipedMu.Unlock()
	b.mu.Unlock()
	a.cfg.LeaveTimeout = 10 * time.Second
	began := time.Now()
	err := a.Leave()
	if took := time.Since(began); !errors.Is(err, ErrAlone) || took > 5*time.Second {
		t.Fatalf("Leave with every peer leaving: %v after %v; want %v at once", err, took, ErrAlone)
	}
}
