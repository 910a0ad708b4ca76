package integration

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/internal/testkit/ha"
	"github.com/redis/go-redis/v9"
)

// The storm of TestClusterReplicasFailover: one client sends FW.INCR on
// one key of the node to be killed, at most one request per millisecond,
// with a limit of stormLimit, and the owner is killed with SIGKILL once
// stormKillAt have been admitted. The owner streams its slots' changes to
// their replicas about every millisecond, so what the replica that takes
// the slot over lacks is at most what the owner admitted in the last
// moments before it died: the bound asserted is the limit plus the
// admissions the client got in the stormWindow before the kill, a window
// wide enough for a loaded machine's scheduling (the stream's delay grows
// under load) and at most 100 admissions at this pace, short of the 150 a
// node that took the slot over empty would grant again.
const (
	stormLimit  = 300
	stormKillAt = 150
	stormWindow = 100 * time.Millisecond
)

// TestClusterReplicasFailover: three nodes with cluster-replicas 1 and a
// 2 s node timeout. Keys of every limiter kind (SW.HIT in both modes,
// ML.THROTTLE, LB.QUEUE) are driven into their limited state on every
// node; a storm of requests through go-redis's ClusterClient (with the
// README's ClusterStateReloadInterval of 1 s) runs on a key of one node,
// which is killed with SIGKILL halfway to the key's limit. The survivors
// agree to remove it, the replicas of its slots take them over with
// their state, and the storm goes on until the new owner refuses: it has
// admitted at most the limit plus what the replication window lets
// through, and every key driven before is still limited, whichever node
// serves it now. The killed node, restarted with its id (kept in its
// dir), gets its slots back with their state: the keys are still
// limited. The same storm with cluster-replicas 0, whose survivors
// serve the dead node's slots empty, admits the limit again: the control
// that shows the bound can fail.
func TestClusterReplicasFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Run("replicas 1", func(t *testing.T) { testReplicasFailover(t, 1) })
	t.Run("replicas 0", func(t *testing.T) { testReplicasFailover(t, 0) })
}

func testReplicasFailover(t *testing.T, replicas int) {
	// Each node keeps its id in its dir (cluster-node.json), so the
	// killed node comes back as itself; save "": no snapshots, so that it
	// comes back with nothing but its id. The clock is frozen at t0 from
	// the start, for the restarted node too.
	start := func(join ...string) *proc {
		return startNodeArgs(t, []string{"--cluster-replicas", strconv.Itoa(replicas), "--dir", t.TempDir(), "--save", "",
			"--debug-clock-start", strconv.FormatInt(t0, 10)}, join...)
	}
	a := start()
	b := start(a.Addr)
	c := start(a.Addr)
	nodes := []*proc{a, b, c}
	owners := settle(t, nodes...)
	if replicas > 0 {
		waitReplicas(t, replicas, nodes...)
	}
	cc := clusterClient(t, a, b, c)

	// One set of keys of every kind per node, each set under a hash tag
	// its node owns (ML.THROTTLE's two keys share the slot).
	keys := map[*proc][]haKey{}
	for _, n := range nodes {
		tag := ownedKey(t, owners, n, "{kinds%d}")
		keys[n] = haKeys(ha.Cellserver, tag+":")
		haDrive(t, goRedis(cc), keys[n])
	}
	stormKey := ownedKey(t, owners, c, "storm%d")
	if replicas > 0 {
		// The keys just driven are on the replicas too before the kill
		// (the storm's key is not: its loss is what the storm measures).
		waitReplicas(t, replicas, nodes...)
	}

	storm := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{a.Addr, b.Addr, c.Addr},
		ClusterStateReloadInterval: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = storm.Close() })
	var admitted []time.Time // when each admission's reply came
	var killed, firstRefusal time.Time
	refusedAfter, errs := 0, 0
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(60 * time.Second)
	for refusedAfter < 20 { // the new owner refuses: the limit is reached there
		if time.Now().After(deadline) {
			t.Fatalf("the storm still admitted 60 s on: %d admissions, %d errors, killed at %v", len(admitted), errs, killed)
		}
		<-tick.C
		v, err := storm.Do(ctx, "FW.INCR", stormKey, stormLimit, 1000000).Int64Slice()
		switch {
		case err != nil:
			errs++
		case v[0] == 0:
			admitted = append(admitted, time.Now())
		case !killed.IsZero():
			if refusedAfter == 0 {
				firstRefusal = time.Now()
			}
			refusedAfter++
		default:
			t.Fatalf("the storm was refused before the kill, after %d admissions: %v", len(admitted), v)
		}
		if killed.IsZero() && len(admitted) == stormKillAt {
			_ = c.Signal(os.Kill)
			killed = time.Now()
		}
	}
	c.Kill() // reaped
	inWindow := 0
	for _, at := range admitted {
		if at.After(killed.Add(-stormWindow)) && at.Before(killed.Add(stormWindow)) {
			inWindow++
		}
	}
	bound := stormLimit + inWindow
	t.Logf("cluster-replicas %d: the storm had %d admissions for a limit of %d (%d in the %v before the kill), "+
		"%d errors; the key's new owner refused it %v after the kill",
		replicas, len(admitted), stormLimit, inWindow, stormWindow, errs, firstRefusal.Sub(killed).Round(time.Millisecond))
	if replicas == 0 {
		// The control: the survivors start the dead node's slots empty.
		if len(admitted) <= bound {
			t.Errorf("without replicas, %d admissions, want more than %d (the limit again after the kill)", len(admitted), bound)
		}
		cc.ReloadState(ctx)
		var v any
		testkit.Until(t, 20*time.Second, "a survivor to serve the killed node's keys", func() (err error) {
			v, err = cc.Do(ctx, keys[c][0].read...).Result()
			return err
		})
		if haStillLimited(v) {
			t.Errorf("without replicas, %v on a survivor: %v; want the key fresh", keys[c][0].read, v)
		}
		return
	}
	if len(admitted) > bound {
		t.Errorf("%d admissions, want at most %d: the limit and the %d admitted in the %v before the kill",
			len(admitted), bound, inWindow, stormWindow)
	}
	if len(admitted) < stormLimit {
		t.Errorf("%d admissions, want at least the limit %d", len(admitted), stormLimit)
	}
	// Every key is still limited, on whichever survivor serves it now.
	after := settle(t, a, b)
	cc.ReloadState(ctx)
	for _, n := range nodes {
		haCheck(t, fmt.Sprintf("keys of node %d", n.Port), goRedis(cc), keys[n], true)
	}
	moved := 0
	for s := range after {
		if owners[s] == c.Addr {
			moved++
		}
	}
	t.Logf("the survivors took over %d slots of the killed node", moved)

	// Restarted with its id, the killed node gets its slots back, with
	// their state, before it serves them.
	c.Restart()
	restarted := time.Now()
	testkit.Until(t, 30*time.Second, "the restarted node to join", func() error {
		info, err := c.rdb.Info(ctx, "persistence").Result()
		if err != nil || !strings.Contains(info, "loading:0\r\n") {
			return fmt.Errorf("INFO persistence: %v", err)
		}
		return nil
	})
	if back := settle(t, a, b, c); !slices.Equal(back, owners) {
		t.Errorf("the map after the restart is not the map before the kill")
	}
	t.Logf("the restarted node served its slots again %v after its restart", time.Since(restarted).Round(time.Millisecond))
	cc.ReloadState(ctx)
	for _, n := range nodes {
		haCheck(t, fmt.Sprintf("keys of node %d after the restart", n.Port), goRedis(cc), keys[n], true)
	}
	if v, err := cc.Do(ctx, "FW.INCR", stormKey, stormLimit, 1000000, 0).Int64Slice(); err != nil || v[2] != 0 {
		t.Errorf("the storm's key after the restart: %v, %v; want none remaining", v, err)
	}
}

// ownedKey returns the first key made of format and a number (from 0)
// whose slot n owns in owners, failing t when n owns none.
func ownedKey(t *testing.T, owners []string, n *proc, format string) string {
	t.Helper()
	for i := 0; i < 1<<22; i++ {
		k := fmt.Sprintf(format, i)
		if owners[engine.Slot([]byte(k))] == n.Addr {
			return k
		}
	}
	t.Fatalf("%s owns no slot", n.Addr)
	return ""
}

// waitReplicas waits until every node's CLUSTER SLOTS gives every range
// its owner and replicas other members (Redis's format: [first, last,
// owner, replica...]), no node's INFO cluster says it still syncs a
// replica's copy, and the nodes hold replicas copies of every slot
// between them (cluster_replica_slots: copies caught up).
func waitReplicas(t *testing.T, replicas int, nodes ...*proc) {
	t.Helper()
	testkit.Until(t, 30*time.Second, fmt.Sprintf("every slot to have %d replicas, caught up", replicas), func() error {
		copies := 0
		for _, n := range nodes {
			slots, err := n.rdb.Do(ctx, "CLUSTER", "SLOTS").Slice()
			if err != nil {
				return err
			}
			for _, r := range slots {
				r := r.([]any)
				if len(r) != 3+replicas {
					return fmt.Errorf("node %d: range %v-%v has %d replicas", n.Port, r[0], r[1], len(r)-3)
				}
				seen := map[string]bool{}
				for _, nd := range r[2:] {
					nd := nd.([]any)
					addr := fmt.Sprintf("%s:%d", nd[0], nd[1])
					if seen[addr] {
						return fmt.Errorf("node %d: range %v-%v names %s twice", n.Port, r[0], r[1], addr)
					}
					seen[addr] = true
				}
			}
			info, err := n.rdb.Info(ctx, "cluster").Result()
			if err != nil {
				return err
			}
			if f := infoField(info, "cluster_replica_slots_syncing"); f != "0" {
				return fmt.Errorf("node %d: cluster_replica_slots_syncing %q", n.Port, f)
			}
			held, err := strconv.Atoi(infoField(info, "cluster_replica_slots"))
			if err != nil {
				return fmt.Errorf("node %d: cluster_replica_slots: %v", n.Port, err)
			}
			copies += held
		}
		if copies != replicas*engine.SlotCount {
			return fmt.Errorf("the nodes hold %d replica copies of slots, want %d", copies, replicas*engine.SlotCount)
		}
		return nil
	})
}

// infoField returns the value of field in INFO's text, "" when it has
// none.
func infoField(info, field string) string {
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return v
		}
	}
	return ""
}
