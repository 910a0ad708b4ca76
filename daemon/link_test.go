package daemon

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

var ctx = context.Background()

// A password changed at run time (CONFIG SET requirepass) leaves the
// cluster alone: its links authenticate with the cluster secret. A node
// joins a node whose password was changed, and the keys move to it with
// their state, then leaves, and they move back; a limit spent before
// stays spent throughout, asked at any node (forwarding on), and at no
// time is a request over a limit admitted.
func TestClusterIgnoresClientPassword(t *testing.T) {
	pa := testkit.FreePair(t, cluster.BusPortOffset)
	cfgA := clusterConfig(pa)
	cfgA.RequirePass, cfgA.ClusterForward = "old", true
	start(t, cfgA)
	a := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(pa)), Password: "old", MaxRetries: -1})
	t.Cleanup(func() { _ = a.Close() })
	testkit.WaitFor(t, "node A", func() bool { return a.Ping(ctx).Err() == nil })
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
		for range 3 {
			if v, err := a.Do(ctx, "FW.INCR", keys[i], "3", "600").Slice(); err != nil || v[0].(int64) != 0 {
				t.Fatalf("FW.INCR %s: %v %v", keys[i], v, err)
			}
		}
	}
	if err := a.ConfigSet(ctx, "requirepass", "new").Err(); err != nil {
		t.Fatal(err)
	}
	a = redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(pa)), Password: "new", MaxRetries: -1})
	t.Cleanup(func() { _ = a.Close() })

	// limited asks, at node c (which forwards), that every key is limited.
	limited := func(c *redis.Client, when string) {
		t.Helper()
		for _, k := range keys {
			v, err := c.Do(ctx, "FW.INCR", k, "3", "600").Slice()
			if err != nil || v[0].(int64) != 1 {
				t.Fatalf("%s: FW.INCR %s: %v %v; want it limited", when, k, v, err)
			}
		}
	}
	pb := testkit.FreePair(t, cluster.BusPortOffset)
	cfgB := clusterConfig(pb)
	cfgB.RequirePass, cfgB.ClusterForward = "new", true
	cfgB.ClusterJoin = []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(pa))}
	stopB := start(t, cfgB)
	b := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(pb)), Password: "new", MaxRetries: -1})
	t.Cleanup(func() { _ = b.Close() })
	testkit.Until(t, 15*time.Second, "the nodes to meet", func() error {
		for _, c := range []*redis.Client{a, b} {
			if info, err := c.ClusterInfo(ctx).Result(); err != nil || !strings.Contains(info, "cluster_known_nodes:2\r\n") {
				return fmt.Errorf("CLUSTER INFO: %q %v", info, err)
			}
		}
		return nil
	})
	// Every slot is handed over (no TRYAGAIN left at either node).
	testkit.Until(t, 15*time.Second, "node B to take its slots", func() error {
		for _, k := range keys {
			for _, c := range []*redis.Client{a, b} {
				if err := c.Do(ctx, "FW.INCR", k, "3", "600").Err(); err != nil {
					return fmt.Errorf("FW.INCR %s: %v", k, err)
				}
			}
		}
		return nil
	})
	if n, err := b.DBSize(ctx).Result(); err != nil || n == 0 || n == int64(len(keys)) {
		t.Fatalf("B holds %d of the %d keys (%v); want a share", n, len(keys), err)
	}
	limited(a, "after the join, at A")
	limited(b, "after the join, at B")
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	limited(a, "after B left")
}

// A connection that cannot prove the cluster secret gets nothing: its
// CLUSTER LINK proof is refused, and it may neither run commands without
// AUTH nor, with it, take a hand-off.
func TestClusterLinkRefusesWithoutSecret(t *testing.T) {
	port := testkit.FreePair(t, cluster.BusPortOffset)
	cfg := clusterConfig(port)
	cfg.RequirePass = "pw"
	start(t, cfg)
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })
	testkit.WaitFor(t, "the node", func() bool { return fmt.Sprint(c.Ping(ctx).Err()) == "NOAUTH Authentication required." })
	hello, err := c.Do(ctx, "CLUSTER", "LINK", "HELLO", strings.Repeat("c", 40), strings.Repeat("0", 32)).StringSlice()
	if err != nil || len(hello) != 3 {
		t.Fatalf("HELLO: %q %v", hello, err)
	}
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"CLUSTER", "LINK", "PROOF", strings.Repeat("0", 64)}, "ERR cluster link refused: cluster: link not authenticated"},
		{[]any{"PING"}, "NOAUTH Authentication required."},
		{[]any{"CLUSTER", "IMPORT", hello[0], hello[0], "0", "-", "", "00"}, "NOAUTH Authentication required."},
		{[]any{"AUTH", "pw"}, ""},
		{[]any{"CLUSTER", "IMPORT", hello[0], hello[0], "0", "-", "", "00"}, "ERR CLUSTER IMPORT is taken on a cluster link only (CLUSTER LINK)"},
	} {
		err := c.Do(ctx, tc.args...).Err()
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
