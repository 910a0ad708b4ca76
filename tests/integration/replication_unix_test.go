//go:build unix

package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/internal/testkit/ha"
)

// TestReplicaOverItsBacklog: a replica stopped (SIGSTOP) while the
// primary, with the smallest repl-backlog-size (16 KiB), takes 200000 new
// keys: the primary's clients never wait for it (no pipeline of 1000
// takes a second), and once it runs again (SIGCONT) it is past the
// backlog, so the primary drops its link and gives it a fresh full copy
// (the primary's log says so), after which it holds exactly the primary's
// keys.
func TestReplicaOverItsBacklog(t *testing.T) {
	t.Parallel()
	const n = 200000
	g := ha.Start(t, ha.Options{Sentinels: -1, Conf: []string{"repl-backlog-size 16kb"}}, 1)
	p, r := g.Nodes[0], g.Nodes[1]
	if err := r.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = r.Signal(syscall.SIGCONT)
		}
	}()
	if slowest := fillKeys(t, p, "b:", n); slowest > time.Second {
		t.Errorf("a pipeline of 1000 waited %v on the primary while its replica was stopped", slowest)
	}
	if err := r.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	testkit.WaitFor(t, "the primary to give the replica a fresh full copy", func() bool {
		return strings.Contains(p.Log.String(), "fell behind the backlog") &&
			strings.Count(p.Log.String(), "asks for synchronization: full copy") == 2
	})
	ha.WaitLinkUp(t, r)
	wantSameSample(t, p, r, "b:", n)
}
