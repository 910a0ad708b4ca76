package bench

// The cost and the worth of cluster replicas (cluster-replicas), on three
// cellserver processes on 127.0.0.1 with cluster-node-timeout
// BENCH_NODE_TIMEOUT ms (2000 unless set):
//
// BenchmarkClusterReplicaDelay measures the replication delay under load:
// with cluster-replicas 1 and redis-benchmark --cluster running FW.INCR
// on random keys against the cluster (when redis-benchmark is
// installed), a probe sends FW.INCR on one key to its owner, then asks
// the slot's replica, on a connection that sent READONLY, for the key's
// state (the same call with cost 0) until the replica shows the hit. The
// delay is from the owner's reply to the replica's first reply that
// shows it: an upper bound (it includes a round trip to the replica).
// It reports p50_ms, p99_ms and max_ms over BENCH_DELAY_PROBES (1000)
// probes, and the round trip of one more read of the replica after each
// probe (rtt_p50_ms, rtt_p99_ms), the part of the delay that is the
// probe's own. The load runs 50 connections with -P BENCH_DELAY_PIPELINE
// (16) requests in flight each.
//
// BenchmarkClusterReplicaKill measures kill-to-serving: a key of one node
// is driven into its limited state (FW.INCR, limit 5), a client sends
// the key's call every 5 ms through go-redis's ClusterClient with the
// README's settings (ClusterStateReloadInterval 1 s), and the node is
// killed with SIGKILL. It reports kill_to_reply_ms, until the first
// reply that is correct (from a survivor, refusing: the key's state
// kept), and wrong_replies, the replies meanwhile that admitted the key
// (its state lost), for cluster-replicas 1 and, in the same run, 0.
//
// Run: bench/cluster_replicas.sh, or
//
//	go test -run xxx -bench 'ClusterReplica(Delay|Kill)' -benchtime 1x ./bench/

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// benchNodeTimeout is the cluster-node-timeout of the replica benchmarks'
// nodes, in ms.
func benchNodeTimeout() string {
	if s := os.Getenv("BENCH_NODE_TIMEOUT"); s != "" {
		return s
	}
	return "2000"
}

// replicaCluster starts three nodes with cluster-replicas replicas and
// waits until they agree on the map and, with replicas, every range
// names its replicas and none is still syncing.
func replicaCluster(b *testing.B, replicas int) []*benchNode {
	args := []string{"--cluster-replicas", strconv.Itoa(replicas), "--cluster-node-timeout", benchNodeTimeout()}
	a := startBenchNode(b, args...)
	nodes := []*benchNode{a,
		startBenchNode(b, append(args, "--cluster-join", a.addr)...),
		startBenchNode(b, append(args, "--cluster-join", a.addr)...)}
	ctx := context.Background()
	testkit.Until(b, 30*time.Second, "the three nodes to agree, and their replicas to sync", func() error {
		first, copies := "", 0
		for _, n := range nodes {
			info, err := n.rdb.Do(ctx, "CLUSTER", "INFO").Text()
			if err != nil || !strings.Contains(info, "cluster_state:ok\r\n") || !strings.Contains(info, "cluster_size:3\r\n") {
				return fmt.Errorf("%s: CLUSTER INFO %q, %v", n.addr, info, err)
			}
			c := dialResp(b, n.addr)
			slots := rawCall(b, c, "CLUSTER", "SLOTS")
			c.c.Close()
			if first == "" {
				first = slots
			} else if slots != first {
				return fmt.Errorf("%s: CLUSTER SLOTS differs from %s's", n.addr, nodes[0].addr)
			}
			if replicas > 0 {
				held, err := replicasSynced(n, replicas)
				if err != nil {
					return err
				}
				copies += held
			}
		}
		if copies != replicas*engine.SlotCount {
			return fmt.Errorf("the nodes hold %d replica slots, want %d", copies, replicas*engine.SlotCount)
		}
		return nil
	})
	return nodes
}

// replicasSynced returns how many slots n holds a replica's copy of,
// caught up (INFO cluster's cluster_replica_slots), or why n's CLUSTER
// SLOTS does not give every range replicas replicas, or n's INFO
// cluster says it still syncs some.
func replicasSynced(n *benchNode, replicas int) (int, error) {
	ctx := context.Background()
	slots, err := n.rdb.Do(ctx, "CLUSTER", "SLOTS").Slice()
	if err != nil {
		return 0, err
	}
	for _, r := range slots {
		if r, _ := r.([]any); len(r) != 3+replicas {
			return 0, fmt.Errorf("%s: a range with %d replicas", n.addr, len(r)-3)
		}
	}
	info, err := n.rdb.Info(ctx, "cluster").Result()
	if err != nil {
		return 0, err
	}
	if !strings.Contains(info, "cluster_replica_slots_syncing:0\r\n") {
		return 0, fmt.Errorf("%s still syncs replica slots", n.addr)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "cluster_replica_slots:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("%s: no cluster_replica_slots in INFO cluster", n.addr)
}

// slotNodes returns the addresses CLUSTER SLOTS on n names for slot:
// its owner, then its replicas.
func slotNodes(b *testing.B, n *benchNode, slot int) []string {
	slots, err := n.rdb.Do(context.Background(), "CLUSTER", "SLOTS").Slice()
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range slots {
		r := r.([]any)
		if r[0].(int64) <= int64(slot) && int64(slot) <= r[1].(int64) {
			var out []string
			for _, nd := range r[2:] {
				nd := nd.([]any)
				out = append(out, fmt.Sprintf("%s:%d", nd[0], nd[1]))
			}
			return out
		}
	}
	b.Fatalf("no range holds slot %d", slot)
	return nil
}

func BenchmarkClusterReplicaDelay(b *testing.B) {
	probes := 1000
	if s := os.Getenv("BENCH_DELAY_PROBES"); s != "" {
		probes, _ = strconv.Atoi(s)
	}
	nodes := replicaCluster(b, 1)
	if path, err := exec.LookPath("redis-benchmark"); err == nil {
		_, port, _ := strings.Cut(nodes[0].addr, ":")
		pipeline := "16"
		if s := os.Getenv("BENCH_DELAY_PIPELINE"); s != "" {
			pipeline = s
		}
		load := exec.Command(path, "--cluster", "-p", port, "-c", "50", "-P", pipeline, "-r", "100000", "-n", "1000000000", "-q",
			"FW.INCR", "{tag}:__rand_int__", "1000000000", "3600")
		out := &testkit.SyncBuffer{}
		load.Stdout, load.Stderr = out, out
		if err := load.Start(); err != nil {
			b.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- load.Wait() }()
		b.Cleanup(func() {
			_ = load.Process.Kill()
			<-exited
		})
		time.Sleep(time.Second) // under way
		defer func() {
			select {
			case err := <-exited:
				exited <- err
				b.Errorf("the load ended before the probes did: %v\n%s", err, testkit.Tail(out.String(), 5))
			default:
			}
		}()
	} else {
		b.Log("no redis-benchmark: the delay is measured without load")
	}
	key := "delay:probe"
	where := slotNodes(b, nodes[0], engine.Slot([]byte(key)))
	if len(where) != 2 {
		b.Fatalf("the probe's slot is on %v, want an owner and a replica", where)
	}
	owner, replica := dialResp(b, where[0]), dialResp(b, where[1])
	if got := rawCall(b, replica, "READONLY"); got != "+OK\r\n" {
		b.Fatalf("READONLY on the replica: %q", got)
	}
	hit := []string{"FW.INCR", key, "1000000000", "3600"}
	read := []string{"FW.INCR", key, "1000000000", "3600", "0"}
	var delays, rtts []time.Duration
	for i := range probes {
		want := rawCall(b, owner, hit...)
		at := time.Now()
		for {
			got := rawCall(b, replica, read...)
			if remaining(got) <= remaining(want) {
				break
			}
			if strings.HasPrefix(got, "-") || time.Since(at) > 10*time.Second {
				b.Fatalf("probe %d: the replica answers %q, the owner answered %q", i, got, want)
			}
		}
		delays = append(delays, time.Since(at))
		// One more read: the round trip to the replica, part of each
		// delay measured.
		at = time.Now()
		rawCall(b, replica, read...)
		rtts = append(rtts, time.Since(at))
		time.Sleep(time.Millisecond)
	}
	slices.Sort(delays)
	slices.Sort(rtts)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(delays[len(delays)/2]), "p50_ms")
	b.ReportMetric(ms(delays[len(delays)*99/100]), "p99_ms")
	b.ReportMetric(ms(delays[len(delays)-1]), "max_ms")
	b.ReportMetric(ms(rtts[len(rtts)/2]), "rtt_p50_ms")
	b.ReportMetric(ms(rtts[len(rtts)*99/100]), "rtt_p99_ms")
}

func BenchmarkClusterReplicaKill(b *testing.B) {
	redis.SetLogger(quietLogger{})
	runs := 3
	if s := os.Getenv("BENCH_KILL_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	for i := range runs {
		for _, replicas := range []int{1, 0} {
			b.Run(fmt.Sprintf("replicas-%d/%d", replicas, i+1), func(b *testing.B) {
				d, wrong := killToServing(b, replicas)
				b.ReportMetric(float64(d.Milliseconds()), "kill_to_reply_ms")
				b.ReportMetric(float64(wrong), "wrong_replies")
			})
		}
	}
}

// killToServing runs one kill: see BenchmarkClusterReplicaKill.
func killToServing(b *testing.B, replicas int) (time.Duration, int) {
	ctx := context.Background()
	nodes := replicaCluster(b, replicas)
	victim := nodes[2]
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("kill:%d", i)
		if slotNodes(b, nodes[0], engine.Slot([]byte(k)))[0] == victim.addr {
			key = k
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].addr, nodes[1].addr, victim.addr},
		ClusterStateReloadInterval: time.Second})
	defer cc.Close()
	call := func() ([]int64, error) {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return cc.Do(c, "FW.INCR", key, 5, 3600).Int64Slice()
	}
	for range 5 {
		var v []int64
		// TRYAGAIN while a slot is still handed over after the joins.
		testkit.Until(b, 10*time.Second, "FW.INCR "+key, func() (err error) {
			v, err = call()
			return err
		})
		if v[0] != 0 {
			b.Fatalf("driving the key: %v", v)
		}
	}
	if v, err := call(); err != nil || v[0] != 1 {
		b.Fatalf("the key is not limited: %v, %v", v, err)
	}
	time.Sleep(100 * time.Millisecond) // on the replica
	victim.proc.Kill()
	kill := time.Now()
	wrong := 0
	for time.Since(kill) < 90*time.Second {
		v, err := call()
		switch {
		case err != nil:
		case v[0] == 1:
			return time.Since(kill), wrong
		default:
			wrong++
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatal(errors.New("no correct reply within 90 s of the kill"))
	return 0, wrong
}

// remaining returns the third integer of a limiter's raw reply (its
// remaining budget), or the largest int64 for a reply that is none.
func remaining(reply string) int64 {
	f := strings.Split(reply, "\r\n")
	if len(f) < 4 || !strings.HasPrefix(f[3], ":") {
		return math.MaxInt64
	}
	n, err := strconv.ParseInt(f[3][1:], 10, 64)
	if err != nil {
		return math.MaxInt64
	}
	return n
}
