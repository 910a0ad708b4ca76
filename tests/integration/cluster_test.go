package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// The cluster tests start real cellserver processes on loopback, each on
// its client port p and gossip port p+10000, with DEBUG CLOCK on.

// proc is one cellserver process of a cluster.
type proc struct {
	*testkit.Process
	rdb *redis.Client
}

// startNode starts a cluster node that joins the members of join (client
// addresses), and freezes its clock at t0.
func startNode(t *testing.T, join ...string) *proc {
	t.Helper()
	return startNodeArgs(t, nil, join...)
}

// startNodeArgs is startNode with more settings.
func startNodeArgs(t *testing.T, extra []string, join ...string) *proc {
	t.Helper()
	// A 2 s node timeout: a node that dies is removed (and its slots
	// move) about 3 s later, not 17 s as with the default.
	args := []string{"--cluster-enabled", "yes", "--cluster-secret", "test-secret", "--cluster-node-timeout", "2000",
		"--enable-debug-command", "yes", "--loglevel", "verbose"}
	if len(join) > 0 {
		args = append(args, "--cluster-join", strings.Join(join, ","))
	}
	args = append(args, extra...)
	p := &proc{Process: testkit.StartProcess(t, testkit.Build(t, testkit.Cellserver), cluster.BusPortOffset, args...)}
	p.rdb = redis.NewClient(&redis.Options{Addr: p.Addr, ReadTimeout: testkit.IOTimeout, MaxRetries: -1})
	t.Cleanup(func() { _ = p.rdb.Close() })
	testkit.WaitFor(t, fmt.Sprintf("node %d to answer", p.Port), func() bool { return p.rdb.Ping(ctx).Err() == nil })
	// A node with persistence joins once its keys are restored, and
	// answers LOADING until then.
	testkit.WaitFor(t, fmt.Sprintf("node %d to load its keys and join", p.Port), func() bool {
		info, err := p.rdb.Info(ctx, "persistence").Result()
		return err == nil && strings.Contains(info, "loading:0\r\n")
	})
	setClock(t, p.rdb, t0)
	return p
}

// stop sends SIGTERM and waits for the process to exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.Signal(syscall.SIGTERM)
	if err := p.Wait(); err != nil {
		t.Fatalf("node %d exited with %v", p.Port, err)
	}
}

// slotOwners returns, per slot, the address CLUSTER SLOTS names on p.
func slotOwners(t *testing.T, p *proc) []string {
	t.Helper()
	// Read as a raw reply (go-redis's ClusterSlots is deprecated): each
	// range is [first, last, [ip, port, id, {}]].
	slots, err := p.rdb.Do(ctx, "CLUSTER", "SLOTS").Slice()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS on %d: %v", p.Port, err)
	}
	out := make([]string, 16384)
	for _, r := range slots {
		r := r.([]any)
		node := r[2].([]any)
		addr := fmt.Sprintf("%s:%d", node[0], node[1])
		for i := r[0].(int64); i <= r[1].(int64); i++ {
			out[i] = addr
		}
	}
	return out
}

// settle waits until every node of nodes names the same owner for every
// slot, each one of nodes, and every node serves a key of each of its
// slots it is asked about (no TRYAGAIN left for the probe keys).
func settle(t *testing.T, nodes ...*proc) []string {
	t.Helper()
	var owners []string
	addrs := map[string]bool{}
	for _, n := range nodes {
		addrs[n.Addr] = true
	}
	var why string // what the last poll found wrong
	agreed := func() bool {
		owners = slotOwners(t, nodes[0])
		for s, o := range owners {
			if !addrs[o] {
				why = fmt.Sprintf("node %d names %q for slot %d", nodes[0].Port, o, s)
				return false
			}
		}
		for _, n := range nodes[1:] {
			if got := slotOwners(t, n); !reflect.DeepEqual(got, owners) {
				for s := range got {
					if got[s] != owners[s] {
						why = fmt.Sprintf("slot %d: node %d names %s, node %d %s", s, nodes[0].Port, owners[s], n.Port, got[s])
						break
					}
				}
				return false
			}
		}
		for _, n := range nodes {
			// cluster_size, the members owning slots: cluster_known_nodes
			// also counts a killed node, listed as fail for a while.
			info, err := n.rdb.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, fmt.Sprintf("cluster_size:%d\r\n", len(nodes))) {
				why = fmt.Sprintf("CLUSTER INFO on node %d: %v %q", n.Port, err, info)
				return false
			}
		}
		return true
	}
	// Allow for a machine busy with other work.
	testkit.Until(t, 30*time.Second, fmt.Sprintf("%d nodes to agree on the slot map", len(nodes)), func() error {
		if agreed() {
			return nil
		}
		return errors.New(why)
	})
	return owners
}

// clusterClient returns a go-redis ClusterClient seeded with p.
func clusterClient(t *testing.T, nodes ...*proc) *redis.ClusterClient {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ReadTimeout: testkit.IOTimeout,
		MaxRedirects: 16, MinRetryBackoff: 5 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestCluster runs a cluster of real processes: three nodes serve the
// limiter commands through go-redis's ClusterClient with the same replies
// as a single server; limits are exact with clients spread over every
// node; a fourth node joins and takes about a quarter of the slots, with
// the keys' state; a node stops on SIGTERM and loses nothing; redis-cli -c
// and redis-benchmark --cluster work.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	a := startNode(t)
	b := startNode(t, a.Addr)
	c := startNodeArgs(t, []string{"--cluster-forward", "yes"}, a.Addr)
	owners := settle(t, a, b, c)
	counts := map[string]int{}
	for _, o := range owners {
		counts[o]++
	}
	for addr, n := range counts {
		if n < 4800 || n > 6100 {
			t.Errorf("%s owns %d slots, want about 16384/3", addr, n)
		}
	}
	cc := clusterClient(t, a)
	ref := startServer(t) // the single-server reference
	refc := ref.client(t)
	setClock(t, refc, t0)

	t.Run("replies", func(t *testing.T) {
		for _, args := range [][]any{
			{"CL.THROTTLE", "user123", 15, 30, 60},
			{"CL.THROTTLE", "user123", 15, 30, 60, 20},
			{"TB.TAKE", "{u1}:tb", 5, 1, 10},
			{"TB.TAKE", "{u1}:tb", 5, 1, 10, 4},
			{"TB.TAKE", "{u1}:tb", 5, 1, 10},
			{"SW.HIT", "{u1}:sw", 3, 60},
			{"SW.HIT", "{u1}:sw", 3, 60, 2},
			{"SW.HIT", "{u1}:sw", 3, 60},
			{"FW.INCR", "{u2}:fw", 2, 60},
			{"FW.INCR", "{u2}:fw", 2, 60},
			{"FW.INCR", "{u2}:fw", 2, 60},
			{"LB.QUEUE", "{u2}:lb", 2, 1, 10},
			{"LB.QUEUE", "{u2}:lb", 2, 1, 10},
			{"LB.QUEUE", "{u2}:lb", 2, 1, 10},
			{"GET", "{u2}:fw"},
			{"PTTL", "{u2}:fw"},
			// ML.THROTTLE's keys move (movablekeys): the client sends it
			// anywhere and follows MOVED to the owner of their one slot.
			{"ML.THROTTLE", 2, "FW", "{u3}:day", 3, 86400, "TB", "{u3}:sec", 2, 1, 1},
			{"ML.THROTTLE", 2, "FW", "{u3}:day", 3, 86400, "TB", "{u3}:sec", 2, 1, 1},
			{"ML.THROTTLE", 2, "FW", "{u3}:day", 3, 86400, "TB", "{u3}:sec", 2, 1, 1},
		} {
			want, werr := refc.Do(ctx, args...).Result()
			got, gerr := cc.Do(ctx, args...).Result()
			if !reflect.DeepEqual(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
				t.Errorf("%v: cluster %#v, %v; single server %#v, %v", args, got, gerr, want, werr)
			}
		}
		wantInts(t, cc, ints(0, 16, 15, -1, 2), "CL.THROTTLE", "user456", 15, 30, 60)
		// go-redis parses CLUSTER SHARDS and CLUSTER NODES too.
		shards, err := a.rdb.ClusterShards(ctx).Result()
		if err != nil || len(shards) != 3 || len(shards[0].Nodes) != 1 || shards[0].Nodes[0].Role != "master" {
			t.Errorf("CLUSTER SHARDS: %+v, %v", shards, err)
		}
		id := do(t, a.rdb, "CLUSTER", "MYID").(string)
		self := fmt.Sprintf("%s %s@%d myself,master - ", id, a.Addr, a.Port+10000)
		if nodes, err := a.rdb.ClusterNodes(ctx).Result(); err != nil || len(id) != 40 || strings.Count(nodes, "\n") != 3 || !strings.Contains(nodes, self) {
			t.Errorf("CLUSTER NODES: %.300q, %v; want a line starting %q", nodes, err, self)
		}
		if info := do(t, a.rdb, "CLUSTER", "INFO").(string); !strings.HasPrefix(info, "cluster_state:ok\r\ncluster_slots_assigned:16384\r\n") {
			t.Errorf("CLUSTER INFO: %q", info)
		}
		wantErr(t, cc, "CROSSSLOT Keys in request don't hash to the same slot", "DEL", "{u1}:tb", "{u2}:fw")
		// Every node refuses a multi-limit call whose keys span two slots,
		// before charging anything, whichever node owns them.
		for _, n := range []*proc{a, b, c} {
			wantErr(t, n.rdb, "CROSSSLOT Keys in request don't hash to the same slot", "ML.THROTTLE", 2, "FW", "{u1}:ml", 10, 60, "FW", "{u2}:ml", 10, 60)
		}
		wantVal(t, cc, int64(0), "EXISTS", "{u1}:ml")
		wantVal(t, cc, int64(0), "EXISTS", "{u2}:ml")
		wantVal(t, cc, int64(2), "DEL", "{u1}:tb", "{u1}:sw")
		// A node that does not own a key answers MOVED to its owner (c
		// forwards instead: see below).
		slot := int(do(t, a.rdb, "CLUSTER", "KEYSLOT", "{u2}:fw").(int64))
		for _, n := range []*proc{a, b} {
			if owners[slot] != n.Addr {
				wantErr(t, n.rdb, fmt.Sprintf("MOVED %d %s", slot, owners[slot]), "FW.INCR", "{u2}:fw", 2, 60)
			}
		}
	})

	t.Run("ioredis and node-redis", func(t *testing.T) {
		node, err := exec.LookPath("node")
		_, modErr := os.Stat(filepath.Join(clientsDir, "node", "node_modules", "ioredis"))
		needClient(t, "node with ioredis and node-redis (npm ci in tests/clients/node)", err == nil && modErr == nil)
		script := filepath.Join(clientsDir, "node", "cluster.js")
		out, err := exec.Command(node, script, strconv.Itoa(a.Port)).CombinedOutput()
		if err != nil {
			t.Fatalf("node %s: %v\n%s", script, err, out)
		}
		var got map[string][][]int64
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for client, prefix := range map[string]string{"ioredis": "io", "noderedis": "nr"} {
			var want [][]int64
			for _, c := range [][]any{
				{"CL.THROTTLE", "{js}:gcra", 15, 30, 60}, {"TB.TAKE", "{js}:tb", 5, 1, 10},
				{"SW.HIT", "{js}:sw", 3, 60}, {"FW.INCR", "{js}:fw", 2, 60},
			} {
				c[1] = prefix + c[1].(string)
				v, err := refc.Do(ctx, c...).Int64Slice()
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, v)
			}
			if !reflect.DeepEqual(got[client], want) {
				t.Errorf("%s: %v, want %v (a single server's)", client, got[client], want)
			}
		}
	})

	// Clients spread over every node admit exactly the limit per key.
	const keys, limit, perClient = 30, 7, 10
	exact := func(t *testing.T, prefix string) {
		var wg sync.WaitGroup
		allowed := make([][keys]int64, 6)
		for i := range allowed {
			cl := clusterClient(t, []*proc{a, b, c}[i%3])
			wg.Go(func() {
				for range perClient {
					for k := range keys {
						// TRYAGAIN is a right answer while a slot is handed
						// over; go-redis's own retries last about a second,
						// and an application retries on after that.
						v, err := cl.Do(ctx, "FW.INCR", fmt.Sprintf("{%s%d}:min", prefix, k), limit, 60).Int64Slice()
						for end := time.Now().Add(30 * time.Second); err != nil && strings.HasPrefix(err.Error(), "TRYAGAIN") && time.Now().Before(end); {
							time.Sleep(20 * time.Millisecond)
							v, err = cl.Do(ctx, "FW.INCR", fmt.Sprintf("{%s%d}:min", prefix, k), limit, 60).Int64Slice()
						}
						if err != nil {
							t.Errorf("FW.INCR: %v", err)
							return
						}
						if v[0] == 0 {
							allowed[i][k]++
						}
					}
				}
			})
		}
		wg.Wait()
		for k := range keys {
			var sum int64
			for i := range allowed {
				sum += allowed[i][k]
			}
			if sum != limit {
				t.Errorf("key %d: %d hits allowed across the cluster, want exactly %d", k, sum, limit)
			}
		}
	}
	t.Run("exact", func(t *testing.T) { exact(t, "x") })

	// Every key of the exact run has spent its budget.
	spent := func(t *testing.T, cl *redis.ClusterClient, when string) {
		t.Helper()
		for k := range keys {
			wantInts(t, cl, ints(1, limit, 0, 60, 60), "FW.INCR", fmt.Sprintf("{x%d}:min", k), limit, 60)
		}
	}

	var d *proc
	top := t // the nodes live as long as the whole test
	t.Run("join", func(t *testing.T) {
		// d starts alone, so that its clock is frozen before it takes
		// keys, then meets the cluster through b (gossip port +10000).
		d = startNode(top)
		// A client storm runs through the join: still exactly the limit
		// per key (retries on MOVED and TRYAGAIN are go-redis's).
		storm := make(chan struct{})
		go func() {
			defer close(storm)
			exact(t, "storm")
		}()
		wantOK(t, d.rdb, "CLUSTER", "MEET", "127.0.0.1", b.Port)
		after := settle(t, a, b, c, d)
		<-storm
		// d takes its exact share, a quarter; exact shares make the others
		// pass some between them too (docs/commands.md#cluster): over
		// 3,000 draws of four random ids, 0 to 1,301 slots (a median of
		// 299), so a bound on the share that goes to d would fail with
		// some ids.
		moved, toD := 0, 0
		for s := range after {
			if after[s] != owners[s] {
				moved++
				if after[s] == d.Addr {
					toD++
				}
			}
		}
		if toD != 16384/4 || moved > 16384/4*14/10 {
			t.Errorf("%d slots moved, %d of them to the 4th node; want 16384/4 to it, and at most 1.4 times that in all", moved, toD)
		}
		owners = after
		cc.ReloadState(ctx)
		spent(t, cc, "after the join")
		if n := do(t, d.rdb, "DBSIZE").(int64); n == 0 {
			t.Errorf("the new node holds no keys")
		}
		info := do(t, d.rdb, "INFO", "cluster").(string)
		if !strings.Contains(info, "cluster_enabled:1") || strings.Contains(info, "cluster_keys_handed_in:0\r\n") {
			t.Errorf("INFO cluster on the new node: %q", info)
		}
	})

	t.Run("leave", func(t *testing.T) {
		var before int64
		for _, n := range []*proc{a, b, c, d} {
			before += do(t, n.rdb, "DBSIZE").(int64)
		}
		b.stop(t)
		settle(t, a, c, d)
		var after int64
		for _, n := range []*proc{a, c, d} {
			after += do(t, n.rdb, "DBSIZE").(int64)
		}
		if after != before {
			t.Errorf("%d keys before b left, %d after", before, after)
		}
		cc.ReloadState(ctx)
		spent(t, cc, "after the leave")
	})

	t.Run("forward", func(t *testing.T) {
		// c relays what others own; a, without cluster-forward, redirects.
		moved, owners := 0, slotOwners(t, a)
		for k := range keys {
			key := fmt.Sprintf("{x%d}:min", k)
			wantInts(t, c.rdb, ints(1, limit, 0, 60, 60), "FW.INCR", key, limit, 60)
			slot := int(do(t, a.rdb, "CLUSTER", "KEYSLOT", key).(int64))
			if owner := owners[slot]; owner != a.Addr {
				moved++
				wantErr(t, a.rdb, fmt.Sprintf("MOVED %d %s", slot, owner), "FW.INCR", key, limit, 60)
			}
		}
		if moved == 0 {
			t.Errorf("no key of %d lives off node a", keys)
		}
	})

	t.Run("redis-cli -c", func(t *testing.T) {
		cli := testkit.LookTool(t, "redis-cli")
		for _, n := range []*proc{a, c, d} {
			out, errOut, err := runTool(t, cli, "-c", "-p", strconv.Itoa(n.Port), "FW.INCR", "{cli}:k", "10", "60")
			if err != nil || errOut != "" {
				t.Fatalf("redis-cli -c: %v %q", err, errOut)
			}
			_ = out
		}
		out, _, err := runTool(t, cli, "-c", "-p", strconv.Itoa(a.Port), "FW.INCR", "{cli}:k", "10", "60")
		if want := "0\n10\n6\n-1\n60\n"; err != nil || out != want {
			t.Errorf("redis-cli -c, 4th call: %q, %v; want %q", out, err, want)
		}
	})

	t.Run("redis-benchmark --cluster", func(t *testing.T) {
		bench := testkit.LookTool(t, "redis-benchmark")
		args := []string{"--cluster", "-p", strconv.Itoa(c.Port), "-n", "3000", "-c", "6", "-r", "1000", "-q",
			"FW.INCR", "{tag}:__rand_int__", "1000000", "60"}
		out, errOut, err := runTool(t, bench, args...)
		all := out + errOut
		if err != nil || strings.Contains(all, "rror") || !strings.Contains(out, "requests per second") {
			t.Fatalf("redis-benchmark %q: %v\n%s", args, err, testkit.Tail(all, 10))
		}
	})
	_ = errors.New
}
