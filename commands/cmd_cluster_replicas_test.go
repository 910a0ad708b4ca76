package commands

import (
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// shardNodeReply is one node of a CLUSTER SHARDS entry, in RESP2.
func shardNodeReply(id string, port int, role string, offset int, health string) string {
	return "*14\r\n$2\r\nid\r\n" + respBulkString(id) + "$4\r\nport\r\n:" + itoaInt(port) + "\r\n" +
		"$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n" + respBulkString(role) +
		"$18\r\nreplication-offset\r\n:" + itoaInt(offset) + "\r\n$6\r\nhealth\r\n" + respBulkString(health)
}

// shardReply is one CLUSTER SHARDS entry: its ranges (first and last
// each), then its nodes.
func shardReply(ranges []int, nodes ...string) string {
	s := "*4\r\n$5\r\nslots\r\n*" + itoaInt(len(ranges)) + "\r\n"
	for _, n := range ranges {
		s += ":" + itoaInt(n) + "\r\n"
	}
	return s + "$5\r\nnodes\r\n*" + itoaInt(len(nodes)) + "\r\n" + strings.Join(nodes, "")
}

// slotsEntry is one CLUSTER SLOTS range: first, last, then its nodes as
// [ip, port, id, {}], given as port and id pairs.
func slotsEntry(first, last int, nodes ...string) string {
	s := "*" + itoaInt(2+len(nodes)/2) + "\r\n:" + itoaInt(first) + "\r\n:" + itoaInt(last) + "\r\n"
	for i := 0; i < len(nodes); i += 2 {
		s += "*4\r\n$9\r\n127.0.0.1\r\n:" + nodes[i] + "\r\n" + respBulkString(nodes[i+1]) + "*0\r\n"
	}
	return s
}

// TestClusterRepliesWithoutReplicas: with no Ranges (cluster-replicas 0,
// or a Router that reports none), CLUSTER SLOTS, SHARDS, NODES, INFO and
// INFO cluster are byte for byte what they were before replicas; and
// Ranges without replicas that match the nodes' slots answer SLOTS and
// SHARDS alike.
func TestClusterRepliesWithoutReplicas(t *testing.T) {
	h, r := newClusterHarness(t)
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	slots := "*4\r\n" + slotsEntry(0, 5, "7000", a) + slotsEntry(6, 9, "7001", b) + slotsEntry(10, 10, "7000", a) + slotsEntry(11, 16383, "7001", b)
	shards := "*2\r\n" + shardReply([]int{0, 5, 10, 10}, shardNodeReply(a, 7000, "master", 0, "online")) +
		shardReply([]int{6, 9, 11, 16383}, shardNodeReply(b, 7001, "master", 0, "online"))
	nodes := respBulkString(a + " 127.0.0.1:7000@17000 myself,master - 0 0 3 connected 0-5 10\n" +
		b + " 127.0.0.1:7001@17001 master - 0 0 3 connected 6-9 11-16383\n")
	info := respBulkString("cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\n" +
		"cluster_slots_fail:0\r\ncluster_known_nodes:2\r\ncluster_size:2\r\ncluster_current_epoch:3\r\ncluster_my_epoch:3\r\n" +
		"cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n" +
		"cluster_slots_held:0\r\ncluster_sees_majority:1\r\n")
	check := func(when string) {
		t.Helper()
		for _, tc := range []struct{ args, want string }{
			{"CLUSTER SLOTS", slots}, {"CLUSTER SHARDS", shards}, {"CLUSTER NODES", nodes}, {"CLUSTER INFO", info},
		} {
			if got := h.do(strings.Fields(tc.args)...); got != tc.want {
				t.Errorf("%s, %s:\n got %q\nwant %q", when, tc.args, got, tc.want)
			}
		}
		if got := h.do("INFO", "cluster"); strings.Contains(got, "replica") || !strings.HasSuffix(got, "cluster_sees_majority:1\r\n\r\n") {
			t.Errorf("%s, INFO cluster: %q", when, got)
		}
	}
	check("no Ranges")
	top := r.Topology()
	top.Ranges = []ClusterRange{{0, 5, a, nil}, {6, 9, b, nil}, {10, 10, a, nil}, {11, 16383, b, nil}}
	r.top = &top
	h.do("CLUSTER", "INFO")
	for _, tc := range []struct{ args, want string }{{"CLUSTER SLOTS", slots}, {"CLUSTER SHARDS", shards}, {"CLUSTER NODES", nodes}} {
		if got := h.do(strings.Fields(tc.args)...); got != tc.want {
			t.Errorf("Ranges without replicas, %s:\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
}

// replicaTopology is four nodes as a (myself) sees them, with
// cluster-replicas 2 (one range has a single replica listed): e is flagged
// fail and owns nothing. a streams its slots to b (caught up) and
// receives b's 11-100 (caught up) and d's 101-16383 (still syncing).
func replicaTopology() *ClusterTopology {
	a, b, d, e := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("d", 40), strings.Repeat("e", 40)
	return &ClusterTopology{MyID: a, Epoch: 7, SlotsOK: engine.SlotCount, Replicas: 2,
		Nodes: []ClusterNode{
			{ID: a, IP: "127.0.0.1", Port: 7000, BusPort: 17000, Myself: true, Slots: [][2]int{{0, 5}, {10, 10}}},
			{ID: b, IP: "127.0.0.1", Port: 7001, BusPort: 17001, Slots: [][2]int{{6, 9}, {11, 100}}},
			{ID: d, IP: "127.0.0.1", Port: 7003, BusPort: 17003, PFail: true, Slots: [][2]int{{101, 16383}}},
			{ID: e, IP: "127.0.0.1", Port: 7004, BusPort: 17004, Fail: true},
		},
		Ranges: []ClusterRange{
			{0, 5, a, []string{b}},
			{6, 9, b, []string{e, d}},
			{10, 10, a, []string{b}},
			{11, 100, b, []string{a}},
			{101, 16383, d, []string{a, b}},
		},
		ReplOut:             []ReplicaStream{{ID: b, Slots: 7, Synced: 7, Offset: 100, Lag: 3, LastMs: 200}},
		ReplIn:              []ReplicaStream{{ID: b, Slots: 90, Synced: 90, Offset: 40, LastMs: 300}, {ID: d, Slots: 16283, Synced: 100, Offset: 7, LastMs: 900}},
		ReplicaSlots:        190,
		ReplicaSlotsSyncing: 16183,
	}
}

// TestClusterReplicaReplies: with Ranges, CLUSTER SLOTS lists each
// range's owner then its replicas not flagged fail; CLUSTER SHARDS groups
// ranges by owner and replicas, with the offsets and health this node
// knows; CLUSTER NODES keeps one master line per node; CLUSTER REPLICAS
// and SLAVES list the nodes holding copies of a node's ranges.
func TestClusterReplicaReplies(t *testing.T) {
	h, r := newClusterHarness(t)
	r.top = replicaTopology()
	a, b, d, e := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("d", 40), strings.Repeat("e", 40)

	slots := "*5\r\n" + slotsEntry(0, 5, "7000", a, "7001", b) + slotsEntry(6, 9, "7001", b, "7003", d) +
		slotsEntry(10, 10, "7000", a, "7001", b) + slotsEntry(11, 100, "7001", b, "7000", a) +
		slotsEntry(101, 16383, "7003", d, "7000", a, "7001", b)
	if got := h.do("CLUSTER", "SLOTS"); got != slots {
		t.Errorf("CLUSTER SLOTS:\n got %q\nwant %q", got, slots)
	}

	shards := "*4\r\n" +
		shardReply([]int{0, 5, 10, 10}, shardNodeReply(a, 7000, "master", 103, "online"), shardNodeReply(b, 7001, "replica", 100, "online")) +
		shardReply([]int{6, 9}, shardNodeReply(b, 7001, "master", 0, "online"), shardNodeReply(e, 7004, "replica", 0, "fail"),
			shardNodeReply(d, 7003, "replica", 0, "online")) +
		shardReply([]int{11, 100}, shardNodeReply(b, 7001, "master", 40, "online"), shardNodeReply(a, 7000, "replica", 40, "loading")) +
		shardReply([]int{101, 16383}, shardNodeReply(d, 7003, "master", 7, "online"), shardNodeReply(a, 7000, "replica", 7, "loading"),
			shardNodeReply(b, 7001, "replica", 0, "online"))
	if got := h.do("CLUSTER", "SHARDS"); got != shards {
		t.Errorf("CLUSTER SHARDS:\n got %q\nwant %q", got, shards)
	}
	// As the owner, a replica whose stream has slots not yet synced, or
	// that has no stream yet, is loading.
	r.top.ReplOut[0].Synced = 6
	if got := h.do("CLUSTER", "SHARDS"); !strings.Contains(got, shardNodeReply(b, 7001, "replica", 100, "loading")) {
		t.Errorf("CLUSTER SHARDS, a replica of a's syncing: %q", got)
	}
	r.top.ReplOut = nil
	if got := h.do("CLUSTER", "SHARDS"); !strings.Contains(got, shardNodeReply(b, 7001, "replica", 0, "loading")) {
		t.Errorf("CLUSTER SHARDS, no stream to a's replica: %q", got)
	}
	r.top = replicaTopology()

	nodes := respBulkString(a + " 127.0.0.1:7000@17000 myself,master - 0 0 7 connected 0-5 10\n" +
		b + " 127.0.0.1:7001@17001 master - 0 0 7 connected 6-9 11-100\n" +
		d + " 127.0.0.1:7003@17003 master,fail? - 0 0 7 connected 101-16383\n" +
		e + " 127.0.0.1:7004@17004 master,fail - 0 0 7 disconnected\n")
	if got := h.do("CLUSTER", "NODES"); got != nodes {
		t.Errorf("CLUSTER NODES:\n got %q\nwant %q", got, nodes)
	}

	for _, sub := range []string{"REPLICAS", "SLAVES", "replicas"} {
		for _, tc := range []struct{ id, want string }{
			{a, "*1\r\n" + respBulkString(b+" 127.0.0.1:7001@17001 slave "+a+" 0 0 7 connected")},
			{b, "*3\r\n" + respBulkString(e+" 127.0.0.1:7004@17004 slave,fail "+b+" 0 0 7 disconnected") +
				respBulkString(d+" 127.0.0.1:7003@17003 slave,fail? "+b+" 0 0 7 connected") +
				respBulkString(a+" 127.0.0.1:7000@17000 myself,slave "+b+" 0 0 7 connected")},
			{d, "*2\r\n" + respBulkString(a+" 127.0.0.1:7000@17000 myself,slave "+d+" 0 0 7 connected") +
				respBulkString(b+" 127.0.0.1:7001@17001 slave "+d+" 0 0 7 connected")},
			{e, "*0\r\n"},
			{"nosuchnode", errReply("ERR Unknown node nosuchnode")},
		} {
			if got := h.do("CLUSTER", sub, tc.id); got != tc.want {
				t.Errorf("CLUSTER %s %.8s:\n got %q\nwant %q", sub, tc.id, got, tc.want)
			}
		}
	}
	if got, want := h.do("CLUSTER", "REPLICAS"), errReply(errArity("cluster|replicas")); got != want {
		t.Errorf("CLUSTER REPLICAS with no id: got %q, want %q", got, want)
	}
	if got, want := h.do("CLUSTER", "SLAVES", a, b), errReply(errArity("cluster|slaves")); got != want {
		t.Errorf("CLUSTER SLAVES with two ids: got %q, want %q", got, want)
	}
	long := strings.Repeat("x", 1000)
	if got, want := h.do("CLUSTER", "REPLICAS", long), errReply("ERR Unknown node "+long[:128]); got != want {
		t.Errorf("CLUSTER REPLICAS of a long id: got %q, want %q", got, want)
	}
	r.top.Ranges = nil // no replicas: every node has none
	if got := h.do("CLUSTER", "REPLICAS", a); got != "*0\r\n" {
		t.Errorf("CLUSTER REPLICAS without Ranges: %q", got)
	}
}

// TestClusterReplicaInfo: CLUSTER INFO and INFO cluster report the
// replica figures when the cluster keeps replicas.
func TestClusterReplicaInfo(t *testing.T) {
	h, r := newClusterHarness(t)
	r.top = replicaTopology()
	r.top.ReplOut = append(r.top.ReplOut, ReplicaStream{ID: strings.Repeat("d", 40), Slots: 7, Synced: 7, Offset: 5, Lag: 12})
	want := "cluster_replicas:2\r\ncluster_replica_slots:190\r\ncluster_replica_slots_syncing:16183\r\n" +
		"cluster_replication_streams_out:2\r\ncluster_replication_streams_in:2\r\ncluster_replication_max_lag_changes:12\r\n"
	if got := h.do("CLUSTER", "INFO"); !strings.HasSuffix(got, "cluster_sees_majority:1\r\n"+want+"\r\n") ||
		!strings.Contains(got, "cluster_current_epoch:7\r\ncluster_my_epoch:7\r\n") {
		t.Errorf("CLUSTER INFO: %q, want it to end with %q", got, want)
	}
	if got := h.do("INFO", "cluster"); !strings.Contains(got, "cluster_current_epoch:7\r\ncluster_sees_majority:1\r\n"+want) {
		t.Errorf("INFO cluster: %q, want %q", got, want)
	}
	// cluster-replicas set, nothing streamed yet: the figures are there, 0.
	r.top = &ClusterTopology{MyID: strings.Repeat("a", 40), Replicas: 1, Nodes: r.top.Nodes[:1]}
	zero := "cluster_replicas:1\r\ncluster_replica_slots:0\r\ncluster_replica_slots_syncing:0\r\n" +
		"cluster_replication_streams_out:0\r\ncluster_replication_streams_in:0\r\ncluster_replication_max_lag_changes:0\r\n"
	if got := h.do("CLUSTER", "INFO"); !strings.Contains(got, zero) {
		t.Errorf("CLUSTER INFO with cluster-replicas 1 and no streams: %q", got)
	}
}

// TestClusterReadOnly: on a connection that sent READONLY, a command that
// changes nothing (a read, or a limiter call of cost 0) is routed by
// AcquireRead, which serves a replica's slots too; a write still goes to
// the owner, and so does everything once READWRITE or RESET ended
// READONLY, and a command queued in MULTI.
func TestClusterReadOnly(t *testing.T) {
	h, r := newClusterHarness(t)
	bar := engine.Slot([]byte("bar")) // 5061
	r.replica = map[int]bool{bar: true}
	moved := errReply("MOVED 5061 127.0.0.1:7001")
	steps := []struct {
		args, want string
		reads      int // AcquireRead's calls so far
	}{
		{"GET {bar}g", moved, 0},
		{"CL.THROTTLE bar 1 1 60 0", moved, 0},
		{"READONLY", "+OK\r\n", 0},
		{"GET {bar}g", "$-1\r\n", 1},
		{"TTL {bar}g", ":-2\r\n", 2},
		{"CL.THROTTLE bar 5 1 60 0", ints(0, 6, 6, -1, 0), 3},
		{"FW.INCR {bar}f 10 60 0", ints(0, 10, 10, -1, 0), 4},
		{"CL.THROTTLE bar 5 1 60", moved, 4}, // charges: a write
		{"FW.INCR bar 10 60", moved, 4},
		{"DEL bar", moved, 4},
		{"PING", "+PONG\r\n", 4},
		{"MULTI", "+OK\r\n", 4},
		{"GET {bar}g", moved, 4}, // queued: routed as a write
		{"DISCARD", "+OK\r\n", 4},
		{"READWRITE", "+OK\r\n", 4},
		{"GET {bar}g", moved, 4},
		{"READONLY", "+OK\r\n", 4},
		{"GET {bar}g", "$-1\r\n", 5},
		{"RESET", "+RESET\r\n", 5},
		{"GET {bar}g", moved, 5},
	}
	for _, s := range steps {
		if got := h.do(strings.Fields(s.args)...); got != s.want {
			t.Fatalf("%s: got %q, want %q", s.args, got, s.want)
		}
		if r.reads != s.reads {
			t.Fatalf("after %s: AcquireRead called %d times, want %d", s.args, r.reads, s.reads)
		}
	}
	for slot, n := range r.held {
		if n != 0 {
			t.Errorf("slot %d held %d times after the commands", slot, n)
		}
	}
	// CLIENT LIST and CLIENT INFO show READONLY as Redis does: flag r.
	for _, s := range []struct{ cmd, flags string }{{"READONLY", "r"}, {"READWRITE", "N"}} {
		h.do(s.cmd)
		if got := h.do("CLIENT", "INFO"); !strings.Contains(got, " flags="+s.flags+" db=0 ") {
			t.Errorf("CLIENT INFO after %s: %q, want flags=%s", s.cmd, got, s.flags)
		}
	}
}

// TestClusterReadOnlyAllocs: a cost-0 call served from a replica's copy on
// a READONLY connection allocates nothing, as any limiter call.
func TestClusterReadOnlyAllocs(t *testing.T) {
	h, r := newClusterHarness(t)
	bar := engine.Slot([]byte("bar"))
	r.mine[bar] = true
	h.do("CL.THROTTLE", "bar", "15", "30", "60") // the key exists (a cost-0 call on none allocates, on any node)
	r.mine[bar] = false
	r.replica = map[int]bool{bar: true}
	h.do("READONLY")
	for _, words := range [][]string{{"CL.THROTTLE", "bar", "15", "30", "60", "0"}, {"GET", "bar"}} {
		args := make([][]byte, len(words))
		for i, w := range words {
			args[i] = []byte(w)
		}
		call := func() {
			h.host.clock.Advance(1e6)
			h.table.Dispatch(h.c, args)
			h.c.W.Flush()
			h.out.Reset()
		}
		for range 500 {
			call()
		}
		if n := testing.AllocsPerRun(1000, call); n != 0 {
			t.Errorf("%v: %v allocations per call, want 0", words, n)
		}
	}
	if r.reads == 0 || r.held[bar] != 0 {
		t.Errorf("AcquireRead called %d times, slot held %d after", r.reads, r.held[bar])
	}
}
