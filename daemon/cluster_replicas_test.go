package daemon

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// Three nodes with cluster-replicas 1, as clients see them: CLUSTER SLOTS
// gives every range an owner and one replica; CLUSTER SHARDS has a master
// and a replica in every shard; CLUSTER REPLICAS lists each node's
// replicas; CLUSTER INFO and /metrics report the replica slots; and a
// cost-0 call on a READONLY connection to a key's replica reads the state
// the owner streamed there.
func TestClusterReplicasSeenByClients(t *testing.T) {
	ctx := context.Background()
	var ports []int
	var clients []*redis.Client
	metricsAddr := freeAddr(t)
	for i := range 3 {
		p := testkit.FreePair(t, cluster.BusPortOffset)
		cfg := clusterConfig(p)
		cfg.ClusterReplicas = 1
		if i == 0 {
			cfg.MetricsAddr = metricsAddr
		} else {
			cfg.ClusterJoin = []string{"127.0.0.1:" + strconv.Itoa(ports[0])}
		}
		start(t, cfg)
		ports = append(ports, p)
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(p)})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	infoField := func(info, name string) int {
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return -1
	}
	testkit.Until(t, 60*time.Second, "every slot copied to its replica", func() error {
		synced := 0
		for _, c := range clients {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if infoField(info, "cluster_known_nodes") != 3 || infoField(info, "cluster_size") != 3 || infoField(info, "cluster_replica_slots_syncing") != 0 {
				return fmt.Errorf("%q", info)
			}
			synced += infoField(info, "cluster_replica_slots")
		}
		if synced != 16384 {
			return fmt.Errorf("%d replica slots synced, want 16384", synced)
		}
		return nil
	})

	raw, err := clients[0].Do(ctx, "CLUSTER", "SLOTS").Slice()
	if err != nil || len(raw) == 0 {
		t.Fatalf("CLUSTER SLOTS: %v %v", raw, err)
	}
	covered := 0
	for _, r := range raw {
		e := r.([]any)
		if len(e) != 4 {
			t.Fatalf("CLUSTER SLOTS range %v: want an owner and one replica", e)
		}
		if owner, rep := e[2].([]any)[2], e[3].([]any)[2]; owner == rep {
			t.Fatalf("CLUSTER SLOTS range %v: the owner is its own replica", e)
		}
		covered += int(e[1].(int64)-e[0].(int64)) + 1
	}
	if covered != 16384 {
		t.Errorf("CLUSTER SLOTS covers %d slots", covered)
	}

	shards, err := clients[1].ClusterShards(ctx).Result()
	if err != nil || len(shards) < 3 {
		t.Fatalf("CLUSTER SHARDS: %d shards, %v", len(shards), err)
	}
	for _, s := range shards {
		if len(s.Nodes) != 2 || s.Nodes[0].Role != "master" || s.Nodes[1].Role != "replica" || s.Nodes[1].Health != "online" {
			t.Errorf("CLUSTER SHARDS: shard %+v, want a master and an online replica", s)
		}
	}

	for _, c := range clients {
		id, err := c.ClusterMyID(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		lines, err := clients[2].Do(ctx, "CLUSTER", "REPLICAS", id).StringSlice()
		if err != nil || len(lines) == 0 {
			t.Fatalf("CLUSTER REPLICAS %s: %v %v", id, lines, err)
		}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) != 8 || !strings.HasSuffix(f[2], "slave") || f[3] != id {
				t.Errorf("CLUSTER REPLICAS %s: line %q", id, l)
			}
		}
	}

	body := getMetrics(t, metricsAddr)
	for _, want := range []string{`cellserver_cluster_replica_slots{state="syncing"} 0`, "cellserver_cluster_sees_majority 1", "cellserver_cluster_replication_lag_changes{peer="} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// A key charged on its owner is read, after READONLY, on its replica.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{clients[0].Options().Addr}})
	t.Cleanup(func() { _ = cc.Close() })
	const key = "user42"
	for range 5 {
		if err := cc.Do(ctx, "FW.INCR", key, 5, 86400).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slot, err := clients[0].ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var replicaAddr string
	for _, r := range raw {
		e := r.([]any)
		if e[0].(int64) <= slot && slot <= e[1].(int64) {
			rep := e[3].([]any)
			replicaAddr = fmt.Sprintf("%s:%d", rep[0], rep[1])
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: replicaAddr})
	t.Cleanup(func() { _ = rc.Close() })
	conn := rc.Conn()
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.ReadOnly(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 10*time.Second, "the charged key's state on its replica", func() error {
		got, err := conn.Do(ctx, "FW.INCR", key, 5, 86400, 0).Int64Slice()
		if err != nil || len(got) != 5 || got[2] != 0 {
			return fmt.Errorf("cost-0 FW.INCR on the replica %s: %v %v", replicaAddr, got, err)
		}
		return nil
	})
	if err := conn.Do(ctx, "FW.INCR", key, 5, 86400).Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Errorf("a charging FW.INCR on the replica: %v, want MOVED", err)
	}
}
