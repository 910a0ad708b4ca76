//go:build unix

package integration

import (
	"io"
	"net/http"
	"strconv"
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
// (cellserver_replication_full_copies_total grows on the primary's
// /metrics), after which it holds exactly the primary's keys.
func TestReplicaOverItsBacklog(t *testing.T) {
	t.Parallel()
	const n = 200000
	metrics := "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t))
	g := ha.Start(t, ha.Options{Sentinels: -1, Conf: []string{"repl-backlog-size 16kb"},
		PrimaryConf: []string{"metrics-addr " + metrics}}, 1)
	p, r := g.Nodes[0], g.Nodes[1]
	fullCopies := func() int {
		t.Helper()
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, "cellserver_replication_full_copies_total "); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		t.Fatalf("no cellserver_replication_full_copies_total in /metrics:\n%s", body)
		return 0
	}
	if n := fullCopies(); n != 1 {
		t.Fatalf("cellserver_replication_full_copies_total %d, want 1 (the replica's first)", n)
	}
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
	testkit.WaitFor(t, "the primary to give the replica a fresh full copy", func() bool { return fullCopies() == 2 })
	ha.WaitLinkUp(t, r)
	wantSameSample(t, p, r, "b:", n)
}
