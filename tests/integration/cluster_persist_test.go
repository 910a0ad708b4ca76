package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
)

// TestClusterPersistence runs a cluster whose nodes keep snapshots: a node
// stopped with SIGTERM (which hands its keys over and saves) or killed
// with SIGKILL comes back on its directory, and a whole cluster comes
// back from its snapshots, with every limit as it was and no node holding
// keys of slots it does not own. A restored key counts only where no live
// node holds a newer copy (docs/commands.md#cluster).
func TestClusterPersistence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir(), "c": t.TempDir()}
	start := func(name string, join ...*proc) *proc {
		t.Helper()
		var addrs []string
		for _, j := range join {
			addrs = append(addrs, j.Addr)
		}
		// save "": snapshots on SAVE and at shutdown only, so that what a
		// SIGKILL loses is what the test says. The clock is frozen at t0
		// before the restore, which would drop keys expired by the real one.
		return startNodeArgs(t, []string{"--dir", dirs[name], "--save", "",
			"--debug-clock-start", strconv.FormatInt(t0, 10)}, addrs...)
	}
	const nkeys, limit = 60, 3
	key := func(i int) string { return fmt.Sprintf("{p%d}:min", i) }
	fw := func(t *testing.T, cl doer, k string) []int64 {
		t.Helper()
		var v []int64
		// TRYAGAIN while a slot is handed over: retry as an application would.
		testkit.Until(t, 20*time.Second, "FW.INCR "+k, func() (err error) {
			v, err = cl.Do(ctx, "FW.INCR", k, limit, 60).Int64Slice()
			return err
		})
		return v
	}
	// hits is each key's count in the current window, as the cluster
	// should have it; deleted names the keys DEL removed, to stay gone.
	hits := map[string]int64{}
	deleted := map[string]bool{}
	// hit runs FW.INCR on k and checks its reply against hits.
	hit := func(t *testing.T, when string, cl doer, k string) {
		t.Helper()
		v := fw(t, cl, k)
		if hits[k] < limit {
			hits[k]++
			if v[0] != 0 || v[2] != limit-hits[k] {
				t.Errorf("%s: %s: %v, want allowed with %d left", when, k, v, limit-hits[k])
			}
		} else if v[0] != 1 {
			t.Errorf("%s: %s: %v, want limited (its budget was spent)", when, k, v)
		}
	}
	// check asserts that the nodes hold every key once, on the node that
	// owns its slot, each with its state (hits).
	check := func(t *testing.T, when string, nodes ...*proc) {
		t.Helper()
		owners := settle(t, nodes...)
		byAddr := map[string]*proc{}
		for _, n := range nodes {
			byAddr[n.Addr] = n
		}
		// The restored keys of others' slots go to their owners just after
		// the join; give them a bounded moment.
		want := map[*proc]int64{}
		for i := range nkeys {
			if !deleted[key(i)] {
				slot := int(do(t, nodes[0].rdb, "CLUSTER", "KEYSLOT", key(i)).(int64))
				want[byAddr[owners[slot]]]++
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for _, n := range nodes {
			for do(t, n.rdb, "DBSIZE").(int64) != want[n] && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
		}
		for i := range nkeys {
			k := key(i)
			slot := int(do(t, nodes[0].rdb, "CLUSTER", "KEYSLOT", k).(int64))
			for _, n := range nodes {
				got := do(t, n.rdb, "CLUSTER", "COUNTKEYSINSLOT", slot).(int64)
				if n.Addr != owners[slot] && got != 0 {
					t.Errorf("%s: node %d holds %d keys of slot %d, owned by %s", when, n.Port, got, slot, owners[slot])
				}
			}
		}
		for _, n := range nodes {
			if got := do(t, n.rdb, "DBSIZE").(int64); got != want[n] {
				t.Errorf("%s: node %d holds %d keys, want the %d of its slots", when, n.Port, got, want[n])
			}
		}
		cl := clusterClient(t, nodes...)
		for i := range nkeys {
			k := key(i)
			if deleted[k] {
				if n, err := cl.Exists(ctx, k).Result(); err != nil || n != 0 {
					t.Errorf("%s: %s, deleted, exists: %d, %v", when, k, n, err)
				}
				continue
			}
			hit(t, when, cl, k)
		}
	}
	save := func(nodes ...*proc) {
		for _, n := range nodes {
			wantOK(t, n.rdb, "SAVE")
		}
	}

	a := start("a")
	b := start("b", a)
	c := start("c", a)
	settle(t, a, b, c)
	cc := clusterClient(t, a)
	for i := range nkeys {
		for range limit {
			hit(t, "spending", cc, key(i))
		}
	}
	check(t, "at start", a, b, c)

	t.Run("SIGTERM", func(t *testing.T) {
		b.stop(t) // hands its keys over, then saves: its store is left empty
		check(t, "after b stopped", a, c)
		b = start("b", a)
		check(t, "after b came back", a, b, c)
	})
	if t.Failed() {
		return
	}

	t.Run("SIGKILL", func(t *testing.T) {
		owners := settle(t, a, b, c)
		save(a, b, c)
		var onC []string
		for i := range nkeys {
			if owners[int(do(t, a.rdb, "CLUSTER", "KEYSLOT", key(i)).(int64))] == c.Addr {
				onC = append(onC, key(i))
			}
		}
		if len(onC) < 2 {
			t.Fatalf("c owns %d of %d keys; want 2 at least", len(onC), nkeys)
		}
		c.Kill()
		settle(t, a, b) // c's slots start empty on a and b
		// c's keys start empty on the survivors (docs/commands.md#cluster).
		// Hit one of them while c is down: the survivor's copy is newer
		// than c's snapshot, and stays; the others come back spent.
		hits[onC[0]] = 0
		hit(t, "while c is down", clusterClient(t, a, b), onC[0])
		// c comes back as a new member (its node file removed: with it, c
		// would own its slots again), so that some of its keys go to other
		// owners, whose deletion is checked below.
		if err := os.Remove(filepath.Join(dirs["c"], cluster.NodeFileName)); err != nil {
			t.Fatal(err)
		}
		c = start("c", a)
		check(t, "after c came back", a, b, c)
		// A key c sent to its new owner is deleted from c's store too: once
		// the owner's copy is deleted, no restart brings it back.
		owners = settle(t, a, b, c)
		for _, k := range onC[1:] {
			if owners[int(do(t, a.rdb, "CLUSTER", "KEYSLOT", k).(int64))] != c.Addr {
				cl := clusterClient(t, a)
				wantVal(t, cl, int64(1), "DEL", k)
				deleted[k] = true
				break
			}
		}
		if len(deleted) == 0 {
			t.Logf("every key c held is c's again: the deletion is not checked")
		}
	})
	if t.Failed() {
		return
	}

	t.Run("whole cluster", func(t *testing.T) {
		save(a, b, c)
		for _, n := range []*proc{a, b, c} {
			n.Kill()
		}
		a = start("a")
		b = start("b", a)
		c = start("c", a)
		check(t, "after the whole cluster came back", a, b, c)
	})
}
