package integration

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/internal/testkit/ha"
)

// replKeys is how many keys the replication tests' writer spreads its
// changes over.
const replKeys = 200

// replWriter changes keys on a primary (FW.INCR w:0 … w:199, round
// robin), at most one change per 100 µs and for at most 30 s, until
// stopped.
type replWriter struct {
	done  atomic.Bool
	count atomic.Int64 // changes the primary answered
	wg    sync.WaitGroup
}

func startWriter(n *ha.Node) *replWriter {
	w := &replWriter{}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		end := time.Now().Add(30 * time.Second)
		for i := 0; !w.done.Load() && time.Now().Before(end); i++ {
			if n.Client.Do(ctx, "FW.INCR", "w:"+strconv.Itoa(i%replKeys), int64(1<<40), 1000000).Err() == nil {
				w.count.Add(1)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	return w
}

// more waits until the writer has made n more changes.
func (w *replWriter) more(t *testing.T, n int64) {
	t.Helper()
	c := w.count.Load()
	testkit.WaitFor(t, fmt.Sprintf("%d more changes", n), func() bool { return w.count.Load() >= c+n })
}

// stop stops the writer and waits for it.
func (w *replWriter) stop() { w.done.Store(true); w.wg.Wait() }

// wantSameKeys waits until the replica r holds every key of the writer as
// the primary p does (their counts, read with cost 0), and as many keys.
func wantSameKeys(t *testing.T, p, r *ha.Node) {
	t.Helper()
	testkit.Until(t, 20*time.Second, "the replica to hold the primary's keys", func() error {
		if a, b := p.Client.DBSize(ctx).Val(), r.Client.DBSize(ctx).Val(); a != b {
			return fmt.Errorf("DBSIZE: primary %d, replica %d", a, b)
		}
		for i := range replKeys {
			args := []any{"FW.INCR", "w:" + strconv.Itoa(i), int64(1 << 40), 1000000, 0}
			a, err1 := p.Client.Do(ctx, args...).Int64Slice()
			b, err2 := r.Client.Do(ctx, args...).Int64Slice()
			if err1 != nil || err2 != nil || a[2] != b[2] {
				return fmt.Errorf("%v: primary %v %v, replica %v %v", args, a, err1, b, err2)
			}
		}
		return nil
	})
}

// TestReplicaKilledMidStream: a replica killed with SIGKILL while the
// primary streams changes to it, and restarted while they go on, takes a
// copy again and ends with exactly the primary's keys.
func TestReplicaKilledMidStream(t *testing.T) {
	t.Parallel()
	g := ha.Start(t, ha.Options{Sentinels: -1}, 1)
	p, r := g.Nodes[0], g.Nodes[1]
	w := startWriter(p)
	defer w.stop()
	w.more(t, 500) // streamed
	r.Kill()
	w.more(t, 500) // missed
	r.Restart()
	ha.WaitLinkUp(t, r)
	w.more(t, 500) // streamed again
	w.stop()
	wantSameKeys(t, p, r)
}

// fillKeys makes n keys prefix0 … prefix(n-1) on node, 1000 to a pipeline,
// and returns the longest a pipeline waited for its replies.
func fillKeys(t *testing.T, node *ha.Node, prefix string, n int) time.Duration {
	t.Helper()
	var slowest time.Duration
	for i := 0; i < n; i += 1000 {
		pipe := node.Client.Pipeline()
		for j := i; j < min(i+1000, n); j++ {
			pipe.Do(ctx, "FW.INCR", prefix+strconv.Itoa(j), 10, 1000000)
		}
		start := time.Now()
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("fill %s: %v", prefix, err)
		}
		slowest = max(slowest, time.Since(start))
	}
	return slowest
}

// wantSameSample asserts that the replica r holds as many keys as the
// primary p and, for every 997th of the n keys fillKeys made with prefix, the
// same count.
func wantSameSample(t *testing.T, p, r *ha.Node, prefix string, n int) {
	t.Helper()
	testkit.Until(t, 30*time.Second, "the replica to hold the primary's keys", func() error {
		if a, b := p.Client.DBSize(ctx).Val(), r.Client.DBSize(ctx).Val(); a != b || a < int64(n) {
			return fmt.Errorf("DBSIZE: primary %d, replica %d, want %d", a, b, n)
		}
		for i := 0; i < n; i += 997 {
			args := []any{"FW.INCR", prefix + strconv.Itoa(i), 10, 1000000, 0}
			a, err1 := p.Client.Do(ctx, args...).Int64Slice()
			b, err2 := r.Client.Do(ctx, args...).Int64Slice()
			if err1 != nil || err2 != nil || a[2] != b[2] {
				return fmt.Errorf("%v: primary %v %v, replica %v %v", args, a, err1, b, err2)
			}
		}
		return nil
	})
}

// TestPrimaryRestartedMidFullCopy: the primary, with persistence on, is
// killed with SIGKILL while a new replica takes its full copy of 300000
// keys, and restarted: it restores its keys from its store, and the
// replica, whose copy was cut short, takes a whole one again and ends
// with exactly the primary's keys.
func TestPrimaryRestartedMidFullCopy(t *testing.T) {
	t.Parallel()
	const n = 300000
	g := ha.Start(t, ha.Options{Sentinels: -1, Conf: []string{"save 1 1"}}, 0)
	p := g.Nodes[0]
	fillKeys(t, p, "f:", n)
	wantOK(t, p.Client, "SAVE")
	r := g.StartNode(t, p)
	// Polled every millisecond: the copy takes about a tenth of a second.
	for deadline := time.Now().Add(testkit.IOTimeout); ; time.Sleep(time.Millisecond) {
		m := r.Info("replication")
		if m["master_sync_in_progress"] == "1" {
			break
		}
		if m["master_link_status"] == "up" || time.Now().After(deadline) {
			t.Fatalf("the replica's full copy was not seen under way: INFO replication: master_link_status %q, master_sync_in_progress %q",
				m["master_link_status"], m["master_sync_in_progress"])
		}
	}
	p.Kill()
	if m := r.Info("replication"); m["master_link_status"] == "up" {
		t.Fatalf("the replica's link is up: its full copy ended before the primary was killed; make it larger")
	}
	p.Restart()
	ha.WaitLinkUp(t, r)
	wantSameSample(t, p, r, "f:", n)
}
