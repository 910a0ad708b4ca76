package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
	"github.com/hashicorp/memberlist"
	"github.com/tidwall/redcon"
)

const t0 = int64(1_700_000_040_000_000_000)

// testNode is a Node with its own engine (clock frozen at t0) and a
// minimal RESP server on its client port that takes CLUSTER IMPORT, as
// cellserver's would.
type testNode struct {
	*Node
	eng     *engine.Engine
	addr    string
	maxBulk atomic.Int64 // the longest argument its client port takes; 0: any
}

func startNode(t *testing.T, join ...string) *testNode {
	t.Helper()
	return startNodeWith(t, nil, join...)
}

// startNodeWith is startNode with fill run on the engine before Start.
func startNodeWith(t *testing.T, fill func(*engine.Engine), join ...string) *testNode {
	t.Helper()
	return startNodeOn(t, testkit.Listen(t), gossipPort(t), nil, fill, join...)
}

// startGossipNode is startNode gossiping on g, in the test's process,
// rather than on a UDP and TCP port.
func startGossipNode(t *testing.T, g *testkit.Gossip, join ...string) *testNode {
	t.Helper()
	tr, port := g.Transport(t)
	return startNodeOn(t, testkit.Listen(t), port, tr, nil, join...)
}

// gossipPort returns a port free for memberlist's TCP and UDP. Memberlist
// takes a port number, not a listener: see testkit.FreePort.
func gossipPort(t *testing.T) int { return testkit.FreePair(t, 0) }

// startNodeOn is startNodeWith on a given client listener and gossip port,
// and gossip transport (nil: memberlist's own on that port).
func startNodeOn(t *testing.T, ln net.Listener, bus int, tr memberlist.NodeAwareTransport, fill func(*engine.Engine), join ...string) *testNode {
	t.Helper()
	return startNodeCfg(t, ln, bus, tr, fill, nil, join...)
}

// startNodeCfg is startNodeOn with set run on the configuration before New.
func startNodeCfg(t *testing.T, ln net.Listener, bus int, tr memberlist.NodeAwareTransport, fill func(*engine.Engine), set func(*Config), join ...string) *testNode {
	t.Helper()
	eng, err := engine.New(engine.Config{Shards: 16, Clock: engine.NewManualClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	if fill != nil {
		fill(eng)
	}
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.BusPort = "127.0.0.1", ln.Addr().(*net.TCPAddr).Port, bus
	cfg.Secret, cfg.Join, cfg.Local, cfg.Transport = "s3cret", join, true, tr
	cfg.NodeTimeout = time.Second
	if set != nil {
		set(&cfg)
	}
	// Memberlist's suspicion timers may fire after Shutdown: a closed
	// node's lines are dropped, as t.Logf panics once the test is over.
	var closed atomic.Bool
	self := ln.Addr().String()
	cfg.Logf = func(level, format string, args ...any) {
		if level != "debug" && !closed.Load() {
			t.Logf("%s: "+format, append([]any{self}, args...)...) // which node said it
		}
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{Node: n, eng: eng, addr: ln.Addr().String()}
	srv := redcon.NewServer("", tn.serve, nil, nil)
	go func() { _ = srv.Serve(ln) }()
	if err := n.Start(eng); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.Close()
		closed.Store(true)
		_ = srv.Close()
		_ = eng.Close()
	})
	return tn
}

// linkConn is a test server connection's link state.
type linkConn struct {
	state []byte
	peer  bool
}

// serve is the test node's client port: CLUSTER LINK and, on a link,
// CLUSTER IMPORT, whose arguments may be no longer than maxBulk when it is
// set (proto-max-bulk-len: cellserver's parser closes the connection with
// a protocol error).
func (n *testNode) serve(conn redcon.Conn, cmd redcon.Command) {
	lc, _ := conn.Context().(*linkConn)
	if lc == nil {
		lc = &linkConn{}
		conn.SetContext(lc)
	}
	if max := n.maxBulk.Load(); max > 0 {
		for _, a := range cmd.Args {
			if int64(len(a)) > max {
				conn.WriteError("ERR Protocol error: invalid bulk length")
				conn.Close()
				return
			}
		}
	}
	if len(cmd.Args) < 2 || !strings.EqualFold(string(cmd.Args[0]), "cluster") {
		conn.WriteError("ERR unknown command")
		return
	}
	switch strings.ToLower(string(cmd.Args[1])) {
	case "link":
		reply, next, ok, err := n.Link(lc.state, cmd.Args[2:], nil)
		lc.state = next
		switch {
		case err != nil:
			conn.WriteError("ERR " + err.Error())
		case ok:
			lc.peer = true
			conn.WriteString("OK")
		default:
			conn.WriteArray(len(reply))
			for _, r := range reply {
				conn.WriteBulkString(r)
			}
		}
	case "import":
		if !lc.peer {
			conn.WriteError("ERR not a link")
			return
		}
		if err := n.Import(cmd.Args[2:]); err != nil {
			conn.WriteError("ERR " + err.Error())
			return
		}
		conn.WriteString("OK")
	default:
		conn.WriteError("ERR unknown command")
	}
}

// member names n as cluster-join does: client address and gossip port.
func (n *testNode) member() string { return fmt.Sprintf("%s@%d", n.addr, n.cfg.BusPort) }

// settled waits until the nodes all see the same members and map, no
// hand-off is under way, and every slot is served by exactly one of them,
// its owner in the map.
func settled(t *testing.T, nodes ...*testNode) {
	t.Helper()
	testkit.Until(t, 15*time.Second, fmt.Sprintf("the %d nodes to settle", len(nodes)), func() error {
		first := nodes[0].routes.Load()
		for _, n := range nodes {
			// The map's members too: gossip sees a joiner before the
			// agreement admits it to the map.
			if tp := n.routes.Load(); len(tp.members) != len(nodes) || len(tp.m.Members) != len(nodes) || tp.m.Owner != first.m.Owner {
				return fmt.Errorf("%s sees %d members, %d in its map, and its own map", n.addr, len(tp.members), len(tp.m.Members))
			}
		}
		for s := range engine.SlotCount {
			serving := 0
			for _, n := range nodes {
				if st := n.slots[s].state.Load(); st == moving || st == pending {
					n.mu.Lock()
					h, ac := n.prevOwner[s], n.awaitCarry[s]
					n.mu.Unlock()
					var others []string
					for _, o := range nodes {
						o.mu.Lock()
						others = append(others, fmt.Sprintf("%.8s %d sub %.8q synced %v", o.ID(), o.slots[s].state.Load(), o.rsub[s], o.rsynced[s].Load()))
						o.mu.Unlock()
					}
					return fmt.Errorf("slot %d is still being handed over (%s: state %d, waiting for %.8q, for a copy %v; owner %.8s; %v)", s, n.addr, st, h, ac, first.m.OwnerID(s), others)
				}
				if st, _ := n.Peek(s); st == commands.RouteLocal {
					serving++
					// Not the previous owner, still serving it because its
					// hand-off failed and waits for a retry.
					if first.m.OwnerID(s) != n.ID() {
						return fmt.Errorf("slot %d is served by %s, not its owner", s, n.addr)
					}
				}
			}
			if serving != 1 {
				return fmt.Errorf("slot %d is served by %d nodes", s, serving)
			}
		}
		return nil
	})
}

// spend runs fixed-window hits on key in n's engine: limit 5 per 60 s.
func spend(t *testing.T, n *testNode, key string) limiter.Result {
	t.Helper()
	r, err := n.eng.NewView().Apply([]byte(key), limiter.FixedWindowRequest{Limit: 5, Window: 60, Cost: 1}.Request(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// exhaust spends the whole budget of key (spend's limit) on n.
func exhaust(t *testing.T, n *testNode, key string) {
	t.Helper()
	for range 5 {
		spend(t, n, key)
	}
}

// owner returns the node that serves key's slot.
func owner(t *testing.T, key string, nodes ...*testNode) *testNode {
	t.Helper()
	for _, n := range nodes {
		if st, _ := n.Peek(engine.Slot([]byte(key))); st == commands.RouteLocal {
			return n
		}
	}
	t.Fatalf("no node serves %s", key)
	return nil
}

// spentOnOwners asserts that each of keys, spent to its limit before, is
// limited on the node of nodes that serves it now, and returns that node
// for each.
func spentOnOwners(t *testing.T, keys []string, nodes ...*testNode) map[string]*testNode {
	t.Helper()
	owners := map[string]*testNode{}
	for _, k := range keys {
		o := owner(t, k, nodes...)
		owners[k] = o
		if r := spend(t, o, k); !r.Limited {
			t.Errorf("%s on its owner %s: %+v, want limited (its budget was spent)", k, o.addr, r)
		}
	}
	return owners
}

// TestHandoffOnJoinAndLeave: keys spent on a lone node keep their state
// when a second node joins and takes some of their slots, and again when
// it leaves and hands them back.
// The join is also run on a gossip network in the test's process
// (testkit.Gossip), without the leave: memberlist's mock transport keeps a
// node that shut down on its network, and a send to it then blocks.
func TestHandoffOnJoinAndLeave(t *testing.T) {
	t.Run("udp", func(t *testing.T) { testHandoffOnJoin(t, startNode, true) })
	t.Run("in-process", func(t *testing.T) {
		var g testkit.Gossip
		testHandoffOnJoin(t, func(t *testing.T, join ...string) *testNode { return startGossipNode(t, &g, join...) }, false)
	})
}

func testHandoffOnJoin(t *testing.T, startNode func(t *testing.T, join ...string) *testNode, leave bool) {
	a := startNode(t)
	var keys []string
	for i := range 40 {
		k := fmt.Sprintf("user%d", i)
		keys = append(keys, k)
		exhaust(t, a, k)
	}
	b := startNode(t, a.member())
	stop := watchOverlap(t, a, b)
	settled(t, a, b)
	stop()
	counts := a.routes.Load().m.Count()
	if c := counts[b.ID()]; c < 7000 || c > 9400 {
		t.Errorf("the joiner owns %d slots, want about half", c)
	}
	onB := 0
	for k, o := range spentOnOwners(t, keys, a, b) {
		if o == b {
			onB++
		}
		other := a
		if o == a {
			other = b
		}
		if other.eng.NewView().Exists([]byte(k), nil) {
			t.Errorf("%s is still on the node that handed it over", k)
		}
	}
	if onB == 0 || onB == len(keys) {
		t.Errorf("%d of %d keys moved, want some", onB, len(keys))
	}
	if out := a.Stats().KeysOut; out != int64(onB) {
		t.Errorf("a handed over %d keys, want %d", out, onB)
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.SlotsServed+sb.SlotsServed != engine.SlotCount || sb.SlotsServed != counts[b.ID()] ||
		sa.Members != 2 || sb.Members != 2 || sa.KeysOut != int64(onB) || sb.KeysIn != int64(onB) {
		t.Errorf("Stats: a %+v, b %+v; want the %d slots split as the map says (b %d), 2 members, %d keys moved",
			sa, sb, engine.SlotCount, counts[b.ID()], onB)
	}
	bAddr := net.JoinHostPort(b.cfg.IP, strconv.Itoa(b.cfg.Port))
	holdsB := func() bool {
		a.connsMu.Lock()
		defer a.connsMu.Unlock()
		return a.handoffClients[bAddr] != nil
	}
	if !holdsB() {
		t.Fatalf("a has no hand-off client for b (%s) after handing it keys", bAddr)
	}
	if !leave {
		return
	}
	stop = watchOverlap(t, a, b)
	if err := b.Leave(); err != nil {
		t.Fatal(err)
	}
	defer stop()
	testkit.Until(t, testkit.IOTimeout, "a to serve alone after the leave", func() error {
		if len(a.routes.Load().members) != 1 || a.servedSlots() != engine.SlotCount || holdsB() {
			return fmt.Errorf("a serves %d slots, and holds a client for b: %v", a.servedSlots(), holdsB())
		}
		return nil
	})
	for _, k := range keys {
		if r := spend(t, a, k); !r.Limited {
			t.Errorf("%s after the leave: %+v, want limited", k, r)
		}
	}
}

// TestCrashedNodeSlotsStartEmpty: a node that stops without leaving is
// declared dead by memberlist; once the majority has agreed to remove it
// (cluster-node-timeout later), the survivors take its slots and serve
// them empty.
func TestCrashedNodeSlotsStartEmpty(t *testing.T) {
	a := startNode(t)
	b := startNode(t, a.member())
	c := startNode(t, a.member())
	settled(t, a, b, c)
	var key string
	for i := 0; ; i++ {
		key = fmt.Sprintf("crash%d", i)
		if owner(t, key, a, b, c) == b {
			break
		}
	}
	exhaust(t, b, key)
	_ = b.Close() // no leave, no hand-off
	testkit.Until(t, 20*time.Second, "the survivors to serve every slot", func() error {
		if n := a.servedSlots() + c.servedSlots(); n != engine.SlotCount {
			return fmt.Errorf("a and c serve %d slots", n)
		}
		return nil
	})
	if r := spend(t, owner(t, key, a, c), key); r.Limited || r.Remaining != 4 {
		t.Errorf("%s on the survivor: %+v, want a fresh key (remaining 4)", key, r)
	}
}

// TestJoinWithRestoredKeys: a node that joins others with keys already in
// its engine (a restored snapshot) keeps them only where no live node
// holds the key: a key the live owner holds keeps the owner's state, one
// it does not hold comes back with the restored state, on whichever node
// owns its slot, and the joiner keeps no key of a slot it does not own.
func TestJoinWithRestoredKeys(t *testing.T) {
	a := startNode(t)
	var live, lost []string
	for i := range 20 {
		live = append(live, fmt.Sprintf("live%d", i))
		lost = append(lost, fmt.Sprintf("lost%d", i))
		exhaust(t, a, live[i]) // spent on the live owner
	}
	b := startNodeWith(t, func(e *engine.Engine) {
		v := e.NewView()
		hit := func(k string, n int64) {
			if _, err := v.Apply([]byte(k), limiter.FixedWindowRequest{Limit: 5, Window: 60, Cost: n}.Request(), nil); err != nil {
				t.Fatal(err)
			}
		}
		for i := range live {
			hit(live[i], 1) // stale: the live owner's copy is newer
			hit(lost[i], 5) // held by no live node
		}
	}, a.member())
	settled(t, a, b)
	testkit.WaitFor(t, "b to drop the restored keys of the slots it does not own", func() bool { return b.staleSlots() == 0 })
	v := b.eng.NewView()
	for s := range engine.SlotCount {
		if st, _ := b.Peek(s); st != commands.RouteLocal && v.CountKeysInSlot(s) != 0 {
			t.Errorf("b holds %d keys of slot %d, which it does not serve", v.CountKeysInSlot(s), s)
		}
	}
	spentOnOwners(t, append(live, lost...), a, b)
	if out := b.Stats().KeysOut; out == 0 {
		t.Errorf("b sent no restored key")
	}
}

// watchOverlap checks, until the returned stop is called, that no slot is
// served by two nodes at one instant: for each slot it reads x, then y,
// then x again, and reports a slot x served at the first and third reads
// and y at the second.
func watchOverlap(t *testing.T, x, y *testNode) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			default:
			}
			for s := range engine.SlotCount {
				if st, _ := x.Peek(s); st != commands.RouteLocal {
					continue
				}
				if st, _ := y.Peek(s); st != commands.RouteLocal {
					continue
				}
				if st, _ := x.Peek(s); st == commands.RouteLocal {
					t.Errorf("slot %d is served by both nodes", s)
					return
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// TestLifecycle: a node not started yet neither meets nor leaves, and one
// closed before it started never starts (a server stopped while it loads
// its keys).
func TestLifecycle(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.BusPort, cfg.Secret = "127.0.0.1", 7000, gossipPort(t), "s3cret"
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Meet("127.0.0.1", 7001, 0); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Meet before Start: %v, want ErrNotStarted", err)
	}
	if err := n.Leave(); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Leave before Start: %v, want ErrNotStarted", err)
	}
	if n.Started() {
		t.Errorf("Started before Start")
	}
	_ = n.Close()
	eng, err := engine.New(engine.Config{Shards: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if err := n.Start(eng); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}

// TestJoinRetries: a node whose cluster-join names a member not up yet
// serves alone, then joins it once it is up; keys it served meanwhile
// keep their state.
func TestJoinRetries(t *testing.T) {
	ln, bus := testkit.Listen(t), gossipPort(t)
	later := fmt.Sprintf("%s@%d", ln.Addr(), bus)
	b := startNode(t, later) // nothing gossips at later yet
	if st, _ := b.Peek(0); st != commands.RouteLocal {
		t.Fatalf("b, alone, does not serve slot 0: %v", st)
	}
	var keys []string
	for i := range 20 {
		keys = append(keys, fmt.Sprintf("early%d", i))
		exhaust(t, b, keys[i])
	}
	a := startNodeOn(t, ln, bus, nil, nil)
	settled(t, a, b)
	onA := 0
	for _, o := range spentOnOwners(t, keys, a, b) {
		if o == a {
			onA++
		}
	}
	if onA == 0 {
		t.Errorf("no key moved to a")
	}
}
