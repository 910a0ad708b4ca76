package integration

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// TestClusterReportsKilledNode: a node killed with SIGKILL is flagged by
// the survivors within seconds, before gossip drops it: CLUSTER NODES
// shows it fail? or fail, and once it is fail CLUSTER INFO says
// cluster_state:fail with its slots in cluster_slots_fail, and INFO
// cluster says the same; once gossip has dropped it and the survivors own
// its slots, the cluster is ok again and the node stays listed as fail,
// without slots.
func TestClusterReportsKilledNode(t *testing.T) {
	a := startNode(t)
	b := startNode(t, a.Addr)
	c := startNode(t, a.Addr)
	settle(t, a, b, c)
	cid, err := c.rdb.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	line := func() string { // c's line in a's CLUSTER NODES
		nodes, err := a.rdb.Do(ctx, "CLUSTER", "NODES").Text()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(nodes, "\n") {
			if strings.HasPrefix(l, cid+" ") {
				return l
			}
		}
		return ""
	}
	if l := line(); !strings.Contains(l, " master - ") || !strings.Contains(l, " connected ") {
		t.Fatalf("c before the kill: %q", l)
	}
	c.Kill()
	killed := time.Now()
	var failSeen bool
	testkit.Until(t, 20*time.Second, "a to flag c fail while c owns slots", func() error {
		l := line()
		if !strings.Contains(l, ",fail ") || !strings.Contains(l, " disconnected ") {
			return fmt.Errorf("c is %q", l)
		}
		if strings.HasSuffix(l, " disconnected") {
			return errors.New("c was dropped before it was seen fail with slots")
		}
		info, _ := a.rdb.Do(ctx, "CLUSTER", "INFO").Text()
		if !strings.Contains(info, "cluster_state:fail\r\n") || strings.Contains(info, "cluster_slots_fail:0\r\n") {
			return fmt.Errorf("CLUSTER INFO with c fail: %q", info)
		}
		cl, _ := a.rdb.Info(ctx, "cluster").Result()
		if !strings.Contains(cl, "cluster_state:fail\r\n") || !strings.Contains(cl, "cluster_nodes_fail:1\r\n") {
			return fmt.Errorf("INFO cluster with c fail: %q", cl)
		}
		failSeen = true
		return nil
	})
	t.Logf("c flagged fail with its slots %v after the kill", time.Since(killed).Round(time.Millisecond))
	if !failSeen {
		return
	}
	settle(t, a, b)
	info, _ := a.rdb.Do(ctx, "CLUSTER", "INFO").Text()
	if !strings.Contains(info, "cluster_state:ok\r\n") || !strings.Contains(info, "cluster_known_nodes:3\r\n") {
		t.Errorf("CLUSTER INFO once c is dropped: %q", info)
	}
	if f := strings.Fields(line()); len(f) != 8 || f[2] != "master,fail" || f[7] != "disconnected" {
		t.Errorf("c once dropped: %q, want master,fail, disconnected and no slots", f)
	}
}
