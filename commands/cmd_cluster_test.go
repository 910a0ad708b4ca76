package commands

import (
	"bytes"
	"crypto/tls"
	"errors"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/engine"
)

// fakeRouter serves the slots in mine and sends the rest to other, except
// those in moving (TRYAGAIN) and down (CLUSTERDOWN).
type fakeRouter struct {
	mine, moving, down map[int]bool
	replica            map[int]bool // slots AcquireRead serves besides mine
	reads              int          // AcquireRead's calls
	held               map[int]int  // Acquire minus Release, by slot
	imported           [][]byte
	forward            bool
	top                *ClusterTopology // Topology's answer when set
	noMajority         bool             // the node sees no majority: every slot is CLUSTERDOWN The cluster is down
}

var _ Router = (*fakeRouter)(nil)

func (r *fakeRouter) Peek(slot int) (Route, string) {
	switch {
	case r.noMajority:
		return RouteClusterDown, ""
	case r.mine[slot]:
		return RouteLocal, ""
	case r.moving[slot]:
		return RouteTryAgain, ""
	case r.down[slot]:
		return RouteDown, ""
	}
	return RouteMoved, "127.0.0.1:7001"
}

func (r *fakeRouter) Acquire(slot int) (Route, string) {
	route, addr := r.Peek(slot)
	if route == RouteLocal {
		r.held[slot]++
	}
	return route, addr
}

// AcquireRead is Acquire, and also serves the slots in replica (this
// node holds a replica's copy of them, caught up); reads counts its calls.
func (r *fakeRouter) AcquireRead(slot int) (Route, string) {
	r.reads++
	if r.replica[slot] && !r.noMajority {
		r.held[slot]++
		return RouteLocal, ""
	}
	return r.Acquire(slot)
}

func (r *fakeRouter) Release(slot int) { r.held[slot]-- }

func (r *fakeRouter) Topology() ClusterTopology {
	if r.top != nil {
		return *r.top
	}
	return ClusterTopology{MyID: strings.Repeat("a", 40), Epoch: 3, SlotsOK: engine.SlotCount, Nodes: []ClusterNode{
		{ID: strings.Repeat("a", 40), IP: "127.0.0.1", Port: 7000, BusPort: 17000, Myself: true, Slots: [][2]int{{0, 5}, {10, 10}}},
		{ID: strings.Repeat("b", 40), IP: "127.0.0.1", Port: 7001, BusPort: 17001, Slots: [][2]int{{6, 9}, {11, 16383}}},
	}}
}

func (r *fakeRouter) Meet(host string, port, bus int) error {
	if host != "127.0.0.1" {
		return errors.New("no such host")
	}
	return nil
}

func (r *fakeRouter) Leave() error { return nil }

func (r *fakeRouter) Forward(addr string, args [][]byte) ([]byte, error) {
	if !r.forward {
		return nil, nil
	}
	return []byte("+forwarded to " + addr + ": " + string(bytes.Join(args, []byte(" "))) + "\r\n"), nil
}

func (r *fakeRouter) Import(args [][]byte) error {
	r.imported = append(r.imported, bytes.Join(args, []byte(" ")))
	return nil
}

// Link takes "HELLO x" then "PROOF good".
func (r *fakeRouter) Link(state []byte, args [][]byte, _ *tls.ConnectionState) ([]string, []byte, bool, error) {
	switch {
	case len(args) == 2 && string(args[0]) == "HELLO":
		return []string{"a", "b"}, []byte("hello"), false, nil
	case len(args) == 2 && string(args[0]) == "PROOF" && string(state) == "hello" && string(args[1]) == "good":
		return nil, nil, true, nil
	}
	return nil, nil, false, errors.New("bad step")
}

func newClusterHarness(t *testing.T) (*harness, *fakeRouter) {
	t.Helper()
	h := newHarness(t, "")
	r := &fakeRouter{mine: map[int]bool{}, moving: map[int]bool{}, down: map[int]bool{}, held: map[int]int{}}
	h.table = NewTable(h.host, Options{EnableDebug: true, Router: r})
	h.c = h.table.NewClient(ClientOptions{ID: 8, Writer: NewWriter(h.out), Authorized: true})
	return h, r
}

func TestClusterRouting(t *testing.T) {
	h, r := newClusterHarness(t)
	foo, bar := engine.Slot([]byte("foo")), engine.Slot([]byte("bar")) // 12182, 5061
	r.mine[foo] = true
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CL.THROTTLE", "foo", "1", "1", "60"}, ints(0, 2, 1, -1, 60)},
		{[]string{"CL.THROTTLE", "bar", "1", "1", "60"}, errReply("MOVED 5061 127.0.0.1:7001")},
		{[]string{"DEL", "foo", "{foo}x"}, ":1\r\n"},
		{[]string{"DEL", "foo", "bar"}, errReply("CROSSSLOT Keys in request don't hash to the same slot")},
		{[]string{"CLUSTER", "KEYSLOT", "{user42}:minute"}, ":14710\r\n"},
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"READONLY"}, "+OK\r\n"},
		{[]string{"ASKING"}, "+OK\r\n"},
		{[]string{"CLUSTER", "MYID"}, "$40\r\n" + strings.Repeat("a", 40) + "\r\n"},
		{[]string{"CLUSTER", "MEET", "127.0.0.1", "7002"}, "+OK\r\n"},
		{[]string{"CLUSTER", "MEET", "127.0.0.1", "x"}, errReply("ERR Invalid base port specified: x")},
		{[]string{"CLUSTER", "MEET", "10.0.0.1", "7002"}, errReply("ERR Invalid node address specified: 10.0.0.1:7002 (no such host)")},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", "16384"}, errReply("ERR Invalid slot")},
		{[]string{"CLUSTER", "NOPE"}, errReply("ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.")},
	} {
		if got := h.do(tc.args...); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.args, got, tc.want)
		}
	}
	// ML.THROTTLE is routed by every key it names: they must share a slot.
	if got, want := h.do("ML.THROTTLE", "2", "FW", "foo", "10", "60", "FW", "bar", "10", "60"), errReply("CROSSSLOT Keys in request don't hash to the same slot"); got != want {
		t.Errorf("ML.THROTTLE over two slots: got %q, want %q", got, want)
	}
	if got, want := h.do("ML.THROTTLE", "2", "FW", "{foo}a", "10", "60", "FW", "{foo}b", "10", "60"), "*3\r\n:0\r\n"+ints(0, 10, 9, -1, 40)+ints(0, 10, 9, -1, 40); got != want {
		t.Errorf("ML.THROTTLE in one slot: got %q, want %q", got, want)
	}
	if got, want := h.do("ML.THROTTLE", "1", "FW", "bar", "10", "60"), errReply("MOVED 5061 127.0.0.1:7001"); got != want {
		t.Errorf("ML.THROTTLE on another node's slot: got %q, want %q", got, want)
	}
	r.forward = true
	if got, want := h.do("FW.INCR", "bar", "10", "60"), "+forwarded to 127.0.0.1:7001: FW.INCR bar 10 60\r\n"; got != want {
		t.Errorf("forwarded: got %q, want %q", got, want)
	}
	h.do("ASKING")
	if got := h.do("FW.INCR", "bar", "10", "60"); got != errReply("MOVED 5061 127.0.0.1:7001") {
		t.Errorf("after ASKING, not forwarded: got %q", got)
	}
	r.forward = false
	r.moving[bar] = true
	if got := h.do("FW.INCR", "bar", "10", "60"); got != errReply(errTryAgain) {
		t.Errorf("a moving slot: got %q", got)
	}
	r.moving[bar], r.down[bar] = false, true
	if got := h.do("GET", "bar"); got != errReply(errClusterDown) {
		t.Errorf("a slot with no owner: got %q", got)
	}
	r.noMajority = true
	if got, want := h.do("CL.THROTTLE", "foo", "1", "1", "60"), errReply("CLUSTERDOWN The cluster is down"); got != want {
		t.Errorf("on a node that sees no majority: got %q, want %q", got, want)
	}
	for slot, n := range r.held {
		if n != 0 {
			t.Errorf("slot %d held %d times after the commands", slot, n)
		}
	}
}

func TestClusterMulti(t *testing.T) {
	h, r := newClusterHarness(t)
	r.mine[engine.Slot([]byte("foo"))] = true
	steps := []struct{ args, want string }{
		{"MULTI", "+OK\r\n"},
		{"FW.INCR {foo}a 10 60", "+QUEUED\r\n"},
		{"FW.INCR {foo}b 10 60", "+QUEUED\r\n"},
		{"EXEC", "*2\r\n" + ints(0, 10, 9, -1, 40) + ints(0, 10, 9, -1, 40)},
		{"MULTI", "+OK\r\n"},
		{"FW.INCR foo 10 60", "+QUEUED\r\n"},
		{"FW.INCR bar 10 60", errReply("CROSSSLOT Keys in request don't hash to the same slot")},
		{"EXEC", errReply("EXECABORT Transaction discarded because of previous errors.")},
		{"MULTI", "+OK\r\n"},
		{"FW.INCR bar 10 60", errReply("MOVED 5061 127.0.0.1:7001")},
		{"EXEC", errReply("EXECABORT Transaction discarded because of previous errors.")},
	}
	for _, s := range steps {
		if got := h.do(strings.Fields(s.args)...); got != s.want {
			t.Fatalf("%s: got %q, want %q", s.args, got, s.want)
		}
	}
	// A slot that moves away between MULTI and EXEC: EXEC is redirected.
	h.do("MULTI")
	h.do("FW.INCR", "foo", "10", "60")
	r.mine[engine.Slot([]byte("foo"))] = false
	if got := h.do("EXEC"); got != errReply("MOVED 12182 127.0.0.1:7001") {
		t.Fatalf("EXEC after the slot moved: got %q", got)
	}
	for slot, n := range r.held {
		if n != 0 {
			t.Errorf("slot %d held %d times after the commands", slot, n)
		}
	}
}

func TestClusterTopologyReplies(t *testing.T) {
	h, _ := newClusterHarness(t)
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	if got, want := h.do("CLUSTER", "NODES"), "$"; !strings.HasPrefix(got, want) {
		t.Fatalf("CLUSTER NODES: %q", got)
	}
	nodes := a + " 127.0.0.1:7000@17000 myself,master - 0 0 3 connected 0-5 10\n" +
		b + " 127.0.0.1:7001@17001 master - 0 0 3 connected 6-9 11-16383\n"
	if got := h.do("CLUSTER", "NODES"); got != respBulkString(nodes) {
		t.Errorf("CLUSTER NODES:\n got %q\nwant %q", got, respBulkString(nodes))
	}
	node := func(first, last int, port, id string) string {
		return "*3\r\n:" + itoaInt(first) + "\r\n:" + itoaInt(last) + "\r\n*4\r\n$9\r\n127.0.0.1\r\n:" + port + "\r\n$40\r\n" + id + "\r\n*0\r\n"
	}
	slots := "*4\r\n" + node(0, 5, "7000", a) + node(6, 9, "7001", b) + node(10, 10, "7000", a) + node(11, 16383, "7001", b)
	if got := h.do("CLUSTER", "SLOTS"); got != slots {
		t.Errorf("CLUSTER SLOTS:\n got %q\nwant %q", got, slots)
	}
	if got := h.do("CLUSTER", "INFO"); !strings.Contains(got, "cluster_state:ok\r\ncluster_slots_assigned:16384\r\n") ||
		!strings.Contains(got, "cluster_known_nodes:2\r\ncluster_size:2\r\n") {
		t.Errorf("CLUSTER INFO: %q", got)
	}
	if got := h.do("INFO", "cluster"); !strings.Contains(got, "cluster_enabled:1\r\n") {
		t.Errorf("INFO cluster: %q", got)
	}
}

func TestClusterOff(t *testing.T) {
	h := newHarness(t, "")
	h.do("FW.INCR", "{x}a", "10", "60")
	h.do("FW.INCR", "{x}b", "10", "60")
	for _, tc := range []struct{ args, want string }{
		{"CLUSTER KEYSLOT {x}a", ":16287\r\n"},
		{"CLUSTER COUNTKEYSINSLOT 16287", ":2\r\n"},
		{"CLUSTER GETKEYSINSLOT 16287 1", "*1\r\n"},
		{"CLUSTER SLOTS", errReply(errClusterDisabled)},
		{"READONLY", errReply(errClusterDisabled)},
		{"INFO cluster", "$"},
	} {
		if got := h.do(strings.Fields(tc.args)...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := h.do("INFO", "cluster"); !strings.Contains(got, "cluster_enabled:0\r\n") {
		t.Errorf("INFO cluster: %q", got)
	}
}

func respBulkString(s string) string { return "$" + itoaInt(len(s)) + "\r\n" + s + "\r\n" }

// TestClusterWhileLoading: until the keys are restored (and the node has
// joined), keyed commands and the membership subcommands answer LOADING;
// the slot arithmetic and MYID answer.
func TestClusterWhileLoading(t *testing.T) {
	h, r := newClusterHarness(t)
	r.mine[engine.Slot([]byte("k"))] = true
	h.table.SetLoading(true)
	for _, args := range []string{"CLUSTER SLOTS", "CLUSTER SHARDS", "CLUSTER NODES", "CLUSTER INFO", "CLUSTER REPLICAS x", "CLUSTER SLAVES x",
		"CLUSTER MEET 127.0.0.1 7001", "CLUSTER LEAVE", "CLUSTER IMPORT a b", "FW.INCR k 10 60"} {
		if got := h.do(strings.Fields(args)...); got != errReply(errLoading) {
			t.Errorf("%s while loading: %q, want LOADING", args, got)
		}
	}
	if len(r.imported) != 0 {
		t.Errorf("CLUSTER IMPORT ran while loading")
	}
	for args, want := range map[string]string{
		"CLUSTER KEYSLOT k":            ":" + itoaInt(engine.Slot([]byte("k"))) + "\r\n",
		"CLUSTER COUNTKEYSINSLOT 0":    ":0\r\n",
		"CLUSTER MYID":                 respBulkString(strings.Repeat("a", 40)),
		"CLUSTER GETKEYSINSLOT 0 10":   "*0\r\n",
		"CLUSTER NOSUCH":               "-ERR unknown subcommand",
		"CLUSTER COUNTKEYSINSLOT 1 2 ": errReply(errArity("cluster|countkeysinslot")),
	} {
		if got := h.do(strings.Fields(args)...); !strings.HasPrefix(got, want) {
			t.Errorf("%s while loading: %q, want %q", args, got, want)
		}
	}
	h.table.SetLoading(false)
	if got := h.do("CLUSTER", "SLOTS"); !strings.HasPrefix(got, "*4\r\n") {
		t.Errorf("CLUSTER SLOTS once loaded: %q", got)
	}
}

// TestClusterLink: CLUSTER LINK runs before AUTH, and a connection whose
// handshake succeeded is a cluster link, authenticated without the
// password, that may run CLUSTER IMPORT; no other connection may, with
// the password or without.
func TestClusterLink(t *testing.T) {
	h := newHarness(t, "pw")
	r := &fakeRouter{mine: map[int]bool{}, moving: map[int]bool{}, down: map[int]bool{}, held: map[int]int{}}
	h.table = NewTable(h.host, Options{Router: r})
	client := func() {
		h.c = h.table.NewClient(ClientOptions{ID: 9, Writer: NewWriter(h.out)})
	}
	client()
	for _, tc := range []struct{ args, want string }{
		{"CLUSTER IMPORT a b", errReply(errNoAuth)},
		{"CLUSTER MYID", errReply(errNoAuth)},
		{"CLUSTER LINK PROOF good", errReply("ERR cluster link refused: bad step")}, // no HELLO first
		{"CLUSTER LINK HELLO x", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{"CLUSTER LINK PROOF bad", errReply("ERR cluster link refused: bad step")},
		{"CLUSTER LINK PROOF good", errReply("ERR cluster link refused: bad step")}, // the failure ended it
		{"PING", errReply(errNoAuth)},
		{"AUTH pw", "+OK\r\n"},
		{"CLUSTER IMPORT a b", errReply(errNotLink)},
	} {
		if got := h.do(strings.Fields(tc.args)...); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.args, got, tc.want)
		}
	}
	if len(r.imported) != 0 {
		t.Fatalf("CLUSTER IMPORT ran on a client's connection: %q", r.imported)
	}
	client()
	for _, tc := range []struct{ args, want string }{
		{"CLUSTER LINK HELLO x", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{"CLUSTER LINK PROOF good", "+OK\r\n"},
		{"PING", "+PONG\r\n"},
		{"CLUSTER IMPORT a b", "+OK\r\n"},
	} {
		if got := h.do(strings.Fields(tc.args)...); got != tc.want {
			t.Errorf("on a link, %s: got %q, want %q", tc.args, got, tc.want)
		}
	}
	if len(r.imported) != 1 {
		t.Fatalf("CLUSTER IMPORT on a link: imported %q", r.imported)
	}
}

// TestClusterFailFlags: a member flagged pfail shows "fail?" in CLUSTER
// NODES and its slots in cluster_slots_pfail, the cluster staying ok; a
// member flagged fail shows "fail" and a disconnected link, its slots
// in cluster_slots_fail, and the cluster is fail, in CLUSTER INFO and
// INFO cluster; CLUSTER SHARDS says its health is fail.
func TestClusterFailFlags(t *testing.T) {
	h, r := newClusterHarness(t)
	a, b, d := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("d", 40)
	r.top = &ClusterTopology{MyID: a, Epoch: 7, SlotsOK: engine.SlotCount, SlotsPFail: 6000, Nodes: []ClusterNode{
		{ID: a, IP: "127.0.0.1", Port: 7000, BusPort: 17000, Myself: true, Slots: [][2]int{{0, 10383}}},
		{ID: b, IP: "127.0.0.1", Port: 7001, BusPort: 17001, PFail: true, Slots: [][2]int{{10384, 16383}}},
		{ID: d, IP: "127.0.0.1", Port: 7003, BusPort: 17003, Fail: true}, // failed, dropped: no slots
	}}
	nodes := a + " 127.0.0.1:7000@17000 myself,master - 0 0 7 connected 0-10383\n" +
		b + " 127.0.0.1:7001@17001 master,fail? - 0 0 7 connected 10384-16383\n" +
		d + " 127.0.0.1:7003@17003 master,fail - 0 0 7 disconnected\n"
	if got := h.do("CLUSTER", "NODES"); got != respBulkString(nodes) {
		t.Errorf("CLUSTER NODES:\n got %q\nwant %q", got, respBulkString(nodes))
	}
	info := h.do("CLUSTER", "INFO")
	for _, want := range []string{"cluster_state:ok\r\n", "cluster_slots_assigned:16384\r\n", "cluster_slots_ok:10384\r\n",
		"cluster_slots_pfail:6000\r\n", "cluster_slots_fail:0\r\n", "cluster_known_nodes:3\r\n", "cluster_size:2\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("CLUSTER INFO with a pfail member: no %q in %q", want, info)
		}
	}
	r.top.Nodes[1].PFail, r.top.Nodes[1].Fail = false, true
	r.top.SlotsPFail, r.top.SlotsFail = 0, 6000
	nodes = strings.Replace(nodes, "master,fail? - 0 0 7 connected", "master,fail - 0 0 7 disconnected", 1)
	if got := h.do("CLUSTER", "NODES"); got != respBulkString(nodes) {
		t.Errorf("CLUSTER NODES:\n got %q\nwant %q", got, respBulkString(nodes))
	}
	info = h.do("CLUSTER", "INFO")
	for _, want := range []string{"cluster_state:fail\r\n", "cluster_slots_ok:10384\r\n", "cluster_slots_pfail:0\r\n", "cluster_slots_fail:6000\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("CLUSTER INFO with a fail member: no %q in %q", want, info)
		}
	}
	info = h.do("INFO", "cluster")
	for _, want := range []string{"cluster_enabled:1\r\n", "cluster_state:fail\r\n", "cluster_known_nodes:3\r\n",
		"cluster_nodes_pfail:0\r\n", "cluster_nodes_fail:2\r\n", "cluster_slots_pfail:0\r\n", "cluster_slots_fail:6000\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO cluster: no %q in %q", want, info)
		}
	}
	if got := h.do("CLUSTER", "SHARDS"); strings.Count(got, "$6\r\nhealth\r\n$4\r\nfail\r\n") != 2 || strings.Count(got, "$6\r\nonline\r\n") != 1 {
		t.Errorf("CLUSTER SHARDS: want two shards of health fail and one online: %q", got)
	}
}
