package cluster

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
)

// startReplicaNodes starts k nodes with cluster-replicas r on one
// in-process gossip network, and waits for them to settle.
func startReplicaNodes(t *testing.T, g *testkit.Gossip, k, r int) []*testNode {
	t.Helper()
	set := func(c *Config) { c.Replicas = r }
	start := func(join ...string) *testNode {
		tr, port := g.Transport(t)
		return startNodeCfg(t, testkit.Listen(t), port, tr, nil, set, join...)
	}
	nodes := []*testNode{start()}
	for range k - 1 {
		nodes = append(nodes, start(nodes[0].member()))
	}
	settled(t, nodes...)
	return nodes
}

// slotsIn returns the first k slots n holds in state st, failing the test
// when it holds fewer.
func slotsIn(t *testing.T, n *testNode, st uint32, k int) []int {
	t.Helper()
	var out []int
	for s := 0; s < engine.SlotCount && len(out) < k; s++ {
		if n.slots[s].state.Load() == st {
			out = append(out, s)
		}
	}
	if len(out) < k {
		t.Fatalf("%s holds %d slots in state %d, want %d", n.addr, len(out), st, k)
	}
	return out
}

// fw charges key's fixed window (limit 5 a day) on n's engine, as FW.INCR
// would, and returns what remains.
func fw(t *testing.T, n *testNode, key string, cost int64) int64 {
	t.Helper()
	res, err := n.eng.NewView().Apply([]byte(key), &limiter.Request{Kind: limiter.KindFixedWindow,
		FixedWindow: limiter.FixedWindowRequest{Limit: 5, Window: 86400, Cost: cost}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Remaining
}

// keyOwnedBy returns a key whose slot n owns, the i-th such, and panics
// (failing the test) when n's map gives n no slot.
func keyOwnedBy(n *testNode, i int) string {
	t := n.routes.Load()
	for k := 0; k < 1<<22; k++ {
		key := fmt.Sprintf("k%d", k)
		if t.m.OwnerID(engine.Slot([]byte(key))) == n.ID() {
			if i == 0 {
				return key
			}
			i--
		}
	}
	panic(fmt.Sprintf("keyOwnedBy: %s owns no slot in its map of %d members", n.ID(), len(t.m.Members)))
}

// TestReplicaPlacement: with one replica, each slot's replica is the
// member that owns it in the map without its owner, never the owner
// itself, and every node holds the copies of the slots it is replica of,
// caught up.
func TestReplicaPlacement(t *testing.T) {
	var g testkit.Gossip
	nodes := startReplicaNodes(t, &g, 3, 1)
	rt := nodes[0].routes.Load()
	if rt.rep == nil {
		t.Fatal("no replicas in the map")
	}
	for _, o := range rt.m.Members {
		var others []Member
		for _, mb := range rt.m.Members {
			if mb.ID != o.ID {
				others = append(others, mb)
			}
		}
		without := Assign(others)
		for s := range engine.SlotCount {
			if rt.m.OwnerID(s) != o.ID {
				continue
			}
			ids := rt.replicaIDs(s)
			if len(ids) != 1 || ids[0] != without.OwnerID(s) || ids[0] == o.ID {
				t.Fatalf("slot %d of %s: replicas %v, want [%s]", s, o.ID, ids, without.OwnerID(s))
			}
		}
	}
	testkit.Until(t, 10*time.Second, "every replica's copy", func() error {
		total := 0
		for _, n := range nodes {
			top := n.Topology()
			if top.ReplicaSlotsSyncing != 0 {
				return fmt.Errorf("%s: %d slots caught up, %d syncing", n.ID(), top.ReplicaSlots, top.ReplicaSlotsSyncing)
			}
			total += top.ReplicaSlots
		}
		if total != engine.SlotCount {
			return fmt.Errorf("the nodes hold copies of %d slots, want %d", total, engine.SlotCount)
		}
		return nil
	})
}

// TestReplicaTakesOverWithState: keys charged on each node's slots reach
// their replicas; a node killed (Close, as a crash) is removed by the
// majority, and the survivors serve its slots with the state they hold:
// the keys are still limited, not reset. It fails with Replicas 0.
func TestReplicaTakesOverWithState(t *testing.T) {
	var g testkit.Gossip
	nodes := startReplicaNodes(t, &g, 3, 1)
	victim := nodes[2]
	var keys []string
	for i := range 20 {
		key := keyOwnedBy(victim, i)
		for range 5 {
			fw(t, victim, key, 1)
		}
		if left := fw(t, victim, key, 0); left != 0 {
			t.Fatalf("%s: %d left after 5 of 5", key, left)
		}
		keys = append(keys, key)
	}
	// The replicas hold the keys (the stream's delay), and a READONLY read
	// is answered there.
	testkit.Until(t, 5*time.Second, "the keys on their replicas", func() error {
		for _, key := range keys {
			s := engine.Slot([]byte(key))
			found := false
			for _, n := range nodes[:2] {
				if n.slots[s].state.Load() == replica && n.eng.NewView().Exists([]byte(key), nil) {
					if r, _ := n.AcquireRead(s); r != commands.RouteLocal {
						return fmt.Errorf("%s holds %s but AcquireRead answers %v", n.ID(), key, r)
					}
					n.Release(s)
					found = true
				}
			}
			if !found {
				return fmt.Errorf("no replica holds %s", key)
			}
		}
		return nil
	})
	_ = victim.Close()
	limitedAfterFailover(t, nodes[:2], keys, 20*time.Second, "the failover")
}

// limitedAfterFailover waits (up to within) until survivors serve every
// slot between them, then fails t for each key (spent: 0 left) that
// has anything left on the survivor serving it: its state was lost in
// what happened (after).
func limitedAfterFailover(t *testing.T, survivors []*testNode, keys []string, within time.Duration, after string) {
	t.Helper()
	testkit.Until(t, within, "the survivors to serve every slot", func() error {
		served := 0
		for _, n := range survivors {
			served += n.servedSlots()
		}
		if served != engine.SlotCount {
			return fmt.Errorf("%d slots served", served)
		}
		return nil
	})
	for _, key := range keys {
		s := engine.Slot([]byte(key))
		for _, n := range survivors {
			if r, _ := n.Peek(s); r != commands.RouteLocal {
				continue
			}
			if left := fw(t, n, key, 0); left != 0 {
				t.Errorf("%s (slot %d) after %s: %d left on %.8s, want 0 (its state lost)", key, s, after, left, n.ID())
			}
		}
	}
}

// TestReplicaCatchesUpRestartedOwner: a node restarted with its id and
// an empty engine, at once (before the others act on its absence) and
// again after they took its slots, gets its slots' state back from the
// node that held it, the replica, before it serves them: its keys are
// still limited on it. Without replicas the quick restart's slots come
// back empty (released), and the keys are not limited.
func TestReplicaCatchesUpRestartedOwner(t *testing.T) {
	set := func(c *Config) { c.Replicas = 1 }
	a := startNodeCfg(t, testkit.Listen(t), gossipPort(t), nil, nil, set)
	c := startNodeCfg(t, testkit.Listen(t), gossipPort(t), nil, nil, set, a.member())
	file := filepath.Join(t.TempDir(), NodeFileName)
	ln := testkit.Listen(t)
	addr, bus := ln.Addr().String(), gossipPort(t)
	b, crash := startNodeFileCfg(t, ln, bus, file, set, a.member())
	settled(t, a, b, c)
	var keys []string
	for i := range 20 {
		k := keyOwnedBy(b, i)
		exhaust(t, b, k)
		keys = append(keys, k)
	}
	held := func() error {
		for _, k := range keys {
			s := engine.Slot([]byte(k))
			ok := false
			for _, n := range []*testNode{a, c} {
				ok = ok || n.slots[s].state.Load() == replica && n.rsynced[s].Load() && n.eng.NewView().Exists([]byte(k), nil)
			}
			if !ok {
				return fmt.Errorf("no caught-up replica holds %s", k)
			}
		}
		return nil
	}
	testkit.Until(t, 10*time.Second, "the keys on their replicas", held)
	for round, wait := range []bool{false, true} {
		crash()
		if wait {
			testkit.Until(t, 20*time.Second, "the survivors to take b's slots", func() error {
				if _, ok := a.routes.Load().members[b.ID()]; ok {
					return fmt.Errorf("b is still a member")
				}
				return nil
			})
			settled(t, a, c)
		}
		ln2, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		b2, crash2 := startNodeFileCfg(t, ln2, bus, file, set, a.member())
		settled(t, a, b2, c)
		if owners := spentOnOwners(t, keys, a, b2, c); owners[keys[0]] != b2 {
			t.Errorf("round %d: %s is served by %s, not b", round, keys[0], owners[keys[0]].addr)
		}
		b, crash = b2, crash2
		testkit.Until(t, 10*time.Second, "the keys on their replicas again", held)
	}
}

// TestReplicaStreamLinkFails: the links of an owner's streams are cut
// while keys are charged; the owner dials again, copies every slot anew,
// and the replicas end up with the owner's state for every key.
func TestReplicaStreamLinkFails(t *testing.T) {
	var g testkit.Gossip
	nodes := startReplicaNodes(t, &g, 3, 1)
	owner := nodes[0]
	var keys []string
	for i := range 40 {
		keys = append(keys, keyOwnedBy(owner, i))
	}
	testkit.Until(t, 10*time.Second, "the owner's streams", func() error {
		owner.repl.mu.Lock()
		defer owner.repl.mu.Unlock()
		if len(owner.repl.outs) != 2 {
			return fmt.Errorf("%d streams", len(owner.repl.outs))
		}
		for _, o := range owner.repl.outs {
			if !o.up.Load() {
				return fmt.Errorf("stream to %s not up", o.id)
			}
		}
		return nil
	})
	for round := range 3 {
		for i, k := range keys {
			if i%3 == round {
				fw(t, owner, k, 1)
			}
		}
		owner.repl.mu.Lock()
		for _, o := range owner.repl.outs {
			if fc := o.conn.Load(); fc != nil {
				fc.c.Close() // the link fails under the sender
			}
		}
		owner.repl.mu.Unlock()
		for i, k := range keys {
			if i%2 == round%2 {
				fw(t, owner, k, 1)
			}
		}
	}
	testkit.Until(t, 10*time.Second, "the replicas to hold the owner's state", func() error {
		for _, k := range keys {
			want := fw(t, owner, k, 0)
			s := engine.Slot([]byte(k))
			for _, n := range nodes[1:] {
				if n.slots[s].state.Load() != replica {
					continue
				}
				if !n.rsynced[s].Load() {
					return fmt.Errorf("%s: slot %d not caught up", n.ID(), s)
				}
				res, err := n.eng.NewView().Apply([]byte(k), &limiter.Request{Kind: limiter.KindFixedWindow,
					FixedWindow: limiter.FixedWindowRequest{Limit: 5, Window: 86400, Cost: 0}}, nil)
				if err != nil || res.Remaining != want {
					return fmt.Errorf("%s on its replica: %d left, %v; the owner says %d", k, res.Remaining, err, want)
				}
			}
		}
		return nil
	})
}

// TestReplicaCloseWhileSubscribed: a subscription that arrives while the
// node closes (its server still takes links until gossip stops) starts no
// stream that Close would wait for for ever.
func TestReplicaCloseWhileSubscribed(t *testing.T) {
	var g testkit.Gossip
	nodes := startReplicaNodes(t, &g, 3, 1)
	a, b := nodes[0], nodes[1]
	slot := slotsIn(t, a, serving, 1)[0]
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = a.subscribeFrom(b.ID(), []int{slot})
			time.Sleep(10 * time.Microsecond)
		}
	}()
	done := make(chan struct{})
	go func() { _ = a.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s while a replica subscribed")
	}
}

// TestReplicaTwoFailuresKeepState: two of five nodes fail at once, with
// one replica per slot: an owner, and a node that holds no copy of the
// owner's keys tested here. Whichever removal the majority agrees first,
// the keys are still limited afterwards:
//   - "in place": keys whose slot the map without both gives to their
//     replica, which takes them over with their state;
//   - "moved": keys whose slot it gives to another member. Removing the
//     second node first moves the replica's role there, and the old
//     replica keeps its copy until the new one catches up (which it
//     cannot: the owner is down); removing the owner first makes the
//     replica the owner, which hands the slot over. Either way the new
//     owner serves with the state (carryCopies, or the hand-off).
func TestReplicaTwoFailuresKeepState(t *testing.T) {
	for _, moved := range []bool{false, true} {
		name := "in place"
		if moved {
			name = "moved"
		}
		t.Run(name, func(t *testing.T) { testTwoFailures(t, moved) })
	}
}

func testTwoFailures(t *testing.T, moved bool) {
	var g testkit.Gossip
	nodes := startReplicaNodes(t, &g, 5, 1)
	victim := nodes[4]
	rt := victim.routes.Load()
	// The other node to fail: the one whose failure with the victim's
	// leaves the most of the victim's slots with their replica (or moves
	// the most of them elsewhere).
	var other *testNode
	var keys []string
	for _, c := range nodes[:4] {
		var rest []Member
		for _, mb := range rt.m.Members {
			if mb.ID != victim.ID() && mb.ID != c.ID() {
				rest = append(rest, mb)
			}
		}
		after := Assign(rest)
		var ks []string
		for i := 0; len(ks) < 20 && i < 20000; i++ {
			key := fmt.Sprintf("two%d", i)
			s := engine.Slot([]byte(key))
			if rt.m.OwnerID(s) != victim.ID() || rt.isReplica(s, c.ID()) || rt.isReplica(s, after.OwnerID(s)) != !moved {
				continue
			}
			ks = append(ks, key)
		}
		if len(ks) > len(keys) {
			other, keys = c, ks
		}
	}
	if len(keys) == 0 {
		t.Skipf("no slot of the victim fits with these ids (moved %v)", moved)
	}
	failTogether(t, nodes, victim, other, keys, 1, fmt.Sprintf("the failures of %.8s and %.8s", victim.ID(), other.ID()))
}

// failTogether charges keys, owned by victim, 5 times each, waits until
// copies of them are caught up on at least copies members, closes victim
// and other at once, as crashes, and checks that the keys are still
// limited on the survivors (after names the failures in messages).
func failTogether(t *testing.T, nodes []*testNode, victim, other *testNode, keys []string, copies int, after string) {
	t.Helper()
	for _, key := range keys {
		for range 5 {
			fw(t, victim, key, 1)
		}
	}
	testkit.Until(t, 5*time.Second, "the keys on their replicas", func() error {
		for _, key := range keys {
			s := engine.Slot([]byte(key))
			held := 0
			for _, n := range nodes {
				if n != victim && n.slots[s].state.Load() == replica && n.rsynced[s].Load() && n.eng.NewView().Exists([]byte(key), nil) {
					held++
				}
			}
			if held < copies {
				return fmt.Errorf("%d replicas hold %s, want %d", held, key, copies)
			}
		}
		return nil
	})
	_ = victim.Close()
	_ = other.Close()
	var survivors []*testNode
	for _, n := range nodes {
		if n != victim && n != other {
			survivors = append(survivors, n)
		}
	}
	limitedAfterFailover(t, survivors, keys, 30*time.Second, after)
}

// TestTwoReplicasOwnerAndReplicaFail: with cluster-replicas 2, an owner
// and its first replica fail at once, so both of the slot's nearest copies
// go; whichever removal the majority agrees first, the second replica
// takes the keys over with their state, and they are still limited.
func TestTwoReplicasOwnerAndReplicaFail(t *testing.T) {
	var g testkit.Gossip
	nodes := startReplicaNodes(t, &g, 5, 2)
	victim := nodes[4]
	rt := victim.routes.Load()
	// The other node to fail: the first replica of the most keys of the
	// victim's tested here.
	byFirst := map[string][]string{}
	for i := 0; i < 20000; i++ {
		key := fmt.Sprintf("tworep%d", i)
		s := engine.Slot([]byte(key))
		if rt.m.OwnerID(s) != victim.ID() {
			continue
		}
		if ids := rt.replicaIDs(s); len(ids) == 2 && len(byFirst[ids[0]]) < 20 {
			byFirst[ids[0]] = append(byFirst[ids[0]], key)
		}
	}
	var other *testNode
	var keys []string
	for _, n := range nodes[:4] {
		if ks := byFirst[n.ID()]; len(ks) > len(keys) {
			other, keys = n, ks
		}
	}
	if other == nil {
		t.Fatal("no key of the victim has two replicas")
	}
	failTogether(t, nodes, victim, other, keys, 2, fmt.Sprintf("the failures of the owner %.8s and its first replica %.8s", victim.ID(), other.ID()))
}

// TestPendingEndsWhenAwaitedMemberSubscribes: a slot pending the hand-off
// of a member that then asks to copy it as its replica stops waiting and
// is served (that member holds no owner's state to hand over); a slot
// pending another member's hand-off, or a copy of a failed owner's state,
// goes on waiting.
func TestPendingEndsWhenAwaitedMemberSubscribes(t *testing.T) {
	var g testkit.Gossip
	nodes := startReplicaNodes(t, &g, 3, 1)
	a, b, c := nodes[0], nodes[1], nodes[2]
	mine := slotsIn(t, a, serving, 3)
	a.mu.Lock()
	for i, s := range mine {
		a.slots[s].state.Store(pending)
		a.prevOwner[s], a.stateSince[s] = b.ID(), time.Now()
		switch i {
		case 1:
			a.prevOwner[s] = c.ID()
		case 2:
			a.awaitCarry[s] = true
		}
	}
	a.mu.Unlock()
	if err := a.subscribeFrom(b.ID(), mine); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	got := []uint32{a.slots[mine[0]].state.Load(), a.slots[mine[1]].state.Load(), a.slots[mine[2]].state.Load()}
	for _, s := range mine { // as it was, for the nodes' Close
		a.slots[s].state.Store(serving)
		delete(a.awaitCarry, s)
	}
	a.mu.Unlock()
	if want := []uint32{serving, pending, pending}; !slices.Equal(got, want) {
		t.Errorf("states after b subscribed: %v, want %v (serving %d, pending %d)", got, want, serving, pending)
	}
}

// TestCarryGivesUp: a replica's copy of a failed owner's slot goes to
// the slot's new owner as a carry copy, again at each reconcile while
// carryWait lasts, and to the next owner if the owner changes; once the
// owner has not taken it within carryWait, it is carried no longer (it
// was sent five times a second for ever to an owner that refused it).
func TestCarryGivesUp(t *testing.T) {
	var g testkit.Gossip
	nodes := startReplicaNodes(t, &g, 3, 1)
	a := nodes[0]
	gone := strings.Repeat("9", 40) // the failed owner the copy came from
	slots := slotsIn(t, a, replica, 3)
	m := a.routes.Load().m
	now := time.Now()
	a.mu.Lock()
	for i, s := range slots {
		a.rsub[s] = gone
		a.rsynced[s].Store(true)
		switch i {
		case 0: // still within carryWait
			a.carries[s] = release{to: m.OwnerID(s), since: now}
		case 1: // sent to an owner since replaced
			a.carries[s] = release{to: strings.Repeat("8", 40), since: now.Add(-time.Minute)}
		case 2: // not taken within carryWait
			a.carries[s] = release{to: m.OwnerID(s), since: now.Add(-carryWait - time.Second)}
		}
	}
	a.mu.Unlock()
	_, _, _, carry := a.planHandoffs()
	var carried []int
	for _, ss := range carry {
		carried = append(carried, ss...)
	}
	a.mu.Lock()
	_, kept := a.carries[slots[2]]
	rsub := a.rsub[slots[2]]
	a.mu.Unlock()
	if !slices.Contains(carried, slots[0]) || !slices.Contains(carried, slots[1]) || slices.Contains(carried, slots[2]) {
		t.Errorf("carried %v of slots %v: want the first two, not the third", carried, slots)
	}
	if kept || rsub == gone {
		t.Errorf("the copy not taken within carryWait: still carried %v, from %.8q", kept, rsub)
	}
}
