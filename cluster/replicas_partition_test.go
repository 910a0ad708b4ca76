package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
)

// linkCut cuts cluster links (hand-offs, forwarded commands, replica
// streams: connections to a peer's client port, link.go) between the two
// sides of a partition, as partNet cuts gossip and Raft. A node's client
// listener is a cutListener, which learns the peer of each connection it
// accepts from the dialer's CLUSTER LINK HELLO <id>, the first command of
// every link: a link between the sides is closed at the cut, and one
// opened across it is closed once its HELLO is read. (The listener sees
// the dialer's id and not its address: every node dials from 127.0.0.1.)
type linkCut struct {
	mu    sync.Mutex
	cut   bool
	side  map[string]int // node id -> side while cut
	conns []*cutConn
	cuts  int // links closed for crossing the cut
}

func (lc *linkCut) blocked(a, b string) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.blockedLocked(a, b)
}

func (lc *linkCut) blockedLocked(a, b string) bool {
	return lc.cut && a != "" && b != "" && lc.side[a] != lc.side[b]
}

// split puts the nodes of ids on side 1, every other on side 0, and
// closes the links between them.
func (lc *linkCut) split(ids ...string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.side = map[string]int{}
	for _, id := range ids {
		lc.side[id] = 1
	}
	lc.cut = true
	keep := lc.conns[:0]
	for _, c := range lc.conns {
		if c.closed() {
			continue
		}
		if peer := c.peerID(); lc.blockedLocked(peer, c.self) {
			c.Conn.Close()
			lc.cuts++
			continue
		}
		keep = append(keep, c)
	}
	lc.conns = keep
}

func (lc *linkCut) heal() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.cut = false
}

// cutListener is a node's client listener under a linkCut.
type cutListener struct {
	net.Listener
	lc   *linkCut
	self string // the node's id
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &cutConn{Conn: c, lc: l.lc, self: l.self}
	l.lc.mu.Lock()
	l.lc.conns = append(l.lc.conns, cc)
	l.lc.mu.Unlock()
	return cc, nil
}

// cutConn is an accepted connection that reads its peer's id from the
// link handshake.
type cutConn struct {
	net.Conn
	lc   *linkCut
	self string
	mu   sync.Mutex
	head []byte // the first bytes read, until the peer is known
	peer string
	done bool
}

// helloID precedes the dialer's id in CLUSTER LINK HELLO <id> <nonce>.
var helloID = []byte("HELLO\r\n$40\r\n")

func (c *cutConn) peerID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peer
}

func (c *cutConn) closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

func (c *cutConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	if c.peer == "" && len(c.head) < 512 {
		c.head = append(c.head, b[:n]...)
		if i := bytes.Index(c.head, helloID); i >= 0 && len(c.head) >= i+len(helloID)+40 {
			c.peer = string(c.head[i+len(helloID) : i+len(helloID)+40])
			c.head = nil
		}
	}
	peer := c.peer
	c.mu.Unlock()
	if c.lc.blocked(peer, c.self) {
		c.lc.mu.Lock()
		c.lc.cuts++
		c.lc.mu.Unlock()
		c.Close()
		return 0, errPartitioned
	}
	return n, err
}

func (c *cutConn) Close() error {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	return c.Conn.Close()
}

// randomID returns a node id: 40 hex characters.
func randomID(t *testing.T) string {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// admit charges key (a fixed window of limit per hour) on n as a
// limiter command would: only where n's Acquire says it serves the slot.
// It reports whether the hit was admitted, and the route n answered.
func admit(t *testing.T, n *testNode, key []byte, limit int64) (bool, commands.Route) {
	slot := engine.Slot(key)
	r, _ := n.Acquire(slot)
	if r != commands.RouteLocal {
		return false, r
	}
	defer n.Release(slot)
	res, err := n.eng.NewView().Apply(key, limiter.FixedWindowRequest{Limit: limit, Window: 3600, Cost: 1}.Request(), nil)
	if err != nil {
		t.Error(err)
		return false, r
	}
	return !res.Limited, r
}

// TestReplicasPartition: a cluster with cluster-replicas 1, a key charged
// on its owner, and the owner cut off into the minority of a partition
// (gossip, Raft and cluster links all cut). A client beside the owner
// goes on charging the key on it, one hit per millisecond, until it
// refuses with CLUSTERDOWN; a client on the majority side charges the key
// wherever the majority serves it, until it refuses: the majority has
// taken the slot over from its replica, with the state the replica held.
// What the two sides admitted in all stays within the limit plus what the
// owner admitted that its replica never got: the hits of the last
// moments before the cut (the stream's delay; replWindow allows for a
// loaded machine) and those it admitted cut off, before it stopped
// (up to the node timeout: the price of a partition). After the network
// heals the key is limited on its owner. Without replicas (the control)
// the majority starts the slot empty and the total exceeds that bound.
func TestReplicasPartition(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		nodes, minority, replicas int
	}{
		{"3 nodes, the owner cut off alone", 3, 1, 1},
		{"5 nodes, the owner and a node without a copy cut off", 5, 2, 1},
		{"3 nodes, no replicas (control)", 3, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { testReplicasPartition(t, tc.nodes, tc.minority, tc.replicas) })
	}
}

// replWindow bounds the delay of a replica stream in the partition test:
// hits the owner admitted this long before the cut may be missing from
// its replica.
const replWindow = 100 * time.Millisecond

func testReplicasPartition(t *testing.T, size, minority, replicas int) {
	var p partNet
	var lc linkCut
	p.reserve(t, size)
	start := func(join ...string) *testNode {
		id := randomID(t)
		tr, port := p.transport(t)
		ln := &cutListener{Listener: testkit.Listen(t), lc: &lc, self: id}
		return startNodeCfg(t, ln, port, tr, nil, func(c *Config) { c.ID, c.Replicas = id, replicas }, join...)
	}
	nodes := []*testNode{start()}
	for range size - 1 {
		nodes = append(nodes, start(nodes[0].member()))
	}
	settled(t, nodes...)
	waitReplicaCopies(t, replicas, nodes...)

	// The key, its owner and the node that holds its copy.
	key := []byte("partitioned")
	slot := engine.Slot(key)
	home := owner(t, string(key), nodes...) // the key's owner before the cut
	var replica string
	for _, r := range home.Topology().Ranges {
		if r.First <= slot && slot <= r.Last && len(r.Replicas) > 0 {
			replica = r.Replicas[0]
		}
	}
	if replicas > 0 && (replica == "" || replica == home.ID()) {
		t.Fatalf("slot %d's range names replica %q (owner %s)", slot, replica, home.ID())
	}
	// The others cut off with the owner hold no copy of the key, and
	// their removal, where one can be found, moves the key's slot to
	// another member than its replica: the harder case. If the majority
	// removes such a node first, the replica's role moves before the
	// owner's removal; the old replica keeps its copy and hands it to the
	// slot's new owner (carryCopies).
	moves := func(n *testNode) bool {
		var rest []Member
		for _, mb := range home.routes.Load().m.Members {
			if mb.ID != n.ID() && mb.ID != home.ID() {
				rest = append(rest, mb)
			}
		}
		return Assign(rest).OwnerID(slot) != replica
	}
	candidates := slices.Clone(nodes)
	sort.SliceStable(candidates, func(i, j int) bool { return replicas > 0 && moves(candidates[i]) && !moves(candidates[j]) })
	minor := []*testNode{home}
	for _, n := range candidates {
		if len(minor) < minority && n != home && n.ID() != replica {
			minor = append(minor, n)
		}
	}
	var major []*testNode
	for _, n := range nodes {
		if !slices.Contains(minor, n) {
			major = append(major, n)
		}
	}
	var minorIDs []string
	for _, n := range minor {
		minorIDs = append(minorIDs, n.ID())
	}

	// limit is more than the owner admits before it stops: one hit per
	// millisecond for half a second before the cut and about the node
	// timeout after it.
	const limit = 5000
	timeout := home.cfg.NodeTimeout
	var ownerHits []time.Time // the owner's admissions, when they were answered
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		<-tick.C
		if ok, r := admit(t, home, key, limit); ok {
			ownerHits = append(ownerHits, time.Now())
		} else {
			t.Fatalf("the owner refused the key before the cut: %v", r)
		}
	}
	before := len(ownerHits)

	// The minority's client runs beside the majority's, from the cut on.
	var wg sync.WaitGroup
	var minorDown time.Time
	wg.Go(func() {
		for deadline := time.Now().Add(3*timeout + 10*time.Second); time.Now().Before(deadline); {
			<-tick.C
			ok, r := admit(t, home, key, limit)
			if ok {
				ownerHits = append(ownerHits, time.Now())
			}
			if r == commands.RouteClusterDown {
				minorDown = time.Now()
				return
			}
		}
	})
	// What the replica holds of the key at the cut, for the failure's
	// message.
	atCut := "no replica"
	if replicas > 0 && len(minor) > 1 {
		atCut = fmt.Sprintf("the removal of %.8s moves the key's slot past its replica: %v; ", minor[1].ID(), moves(minor[1]))
	}
	for _, n := range nodes {
		if n.ID() == replica {
			n.mu.Lock()
			atCut += fmt.Sprintf("replica %s at the cut: slot state %d, subscribed to %.8q, caught up %v, holds the key %v (%d records in the slot)",
				replica[:8], n.slots[slot].state.Load(), n.rsub[slot], n.rsynced[slot].Load(),
				n.eng.NewView().Exists(key, nil), len(n.eng.NewView().ExportSlot(slot)))
			n.mu.Unlock()
		}
	}
	cut := time.Now()
	p.split(minor...)
	lc.split(minorIDs...)
	majorHits, majorRefused := 0, false
	var served time.Time
	var servedBy *testNode
	for deadline := time.Now().Add(30 * time.Second); !majorRefused; {
		if time.Now().After(deadline) {
			t.Fatalf("the majority did not serve the key to its limit within 30 s: %d admitted, served by %v", majorHits, servedBy)
		}
		took := false
		for _, n := range major {
			ok, r := admit(t, n, key, limit)
			if r != commands.RouteLocal {
				continue
			}
			took = true
			if served.IsZero() {
				served, servedBy = time.Now(), n
			}
			if !ok {
				majorRefused = true
				break
			}
			majorHits++
		}
		if !took {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	if minorDown.IsZero() {
		t.Fatalf("the owner, cut off, still served the key %v after the cut", 3*timeout+10*time.Second)
	}
	inWindow := 0
	for _, at := range ownerHits {
		if at.After(cut.Add(-replWindow)) {
			inWindow++
		}
	}
	total := len(ownerHits) + majorHits
	bound := limit + inWindow
	t.Logf("cluster-replicas %d, %d of %d nodes cut off: the owner admitted %d hits before the cut and %d after it, "+
		"until it refused (CLUSTERDOWN) %v after the cut; the majority served the key %v after the cut (%s) and admitted %d; "+
		"%d in all for a limit of %d, %d past it (%d admitted by the owner from %v before the cut on); %s",
		replicas, minority, size, before, len(ownerHits)-before, minorDown.Sub(cut).Round(time.Millisecond),
		served.Sub(cut).Round(time.Millisecond), servedBy.ID()[:8], majorHits, total, limit, total-limit, inWindow, replWindow, atCut)
	if replicas == 0 {
		if total <= bound {
			t.Errorf("without replicas, %d admitted in all, want more than %d (the majority starts the slot empty)", total, bound)
		}
	} else if total > bound {
		t.Errorf("%d admitted in all, want at most %d: the limit and the %d hits the owner admitted from %v before the cut on; %s",
			total, bound, inWindow, replWindow, atCut)
	}
	if d := minorDown.Sub(cut); d > timeout+500*time.Millisecond {
		t.Errorf("the owner refused %v after the cut, want within the node timeout (%v)", d, timeout)
	}

	// Healed, the key's owner (whichever node that is again) has its
	// limit spent.
	lc.mu.Lock()
	t.Logf("%d cluster links were cut", lc.cuts)
	lc.mu.Unlock()
	p.heal()
	lc.heal()
	settled(t, nodes...)
	if ok, r := admit(t, owner(t, string(key), nodes...), key, limit); ok || r != commands.RouteLocal {
		t.Errorf("after the heal, the key on its owner: admitted %v (route %v), want refused", ok, r)
	}
}

// waitReplicaCopies waits until every node holds the replica copies it
// should, caught up (none still syncing), and all of them together
// replicas copies of every slot.
func waitReplicaCopies(t *testing.T, replicas int, nodes ...*testNode) {
	t.Helper()
	testkit.Until(t, 20*time.Second, "the replicas to catch up", func() error {
		held := 0
		for _, n := range nodes {
			tp := n.Topology()
			if tp.ReplicaSlotsSyncing != 0 {
				return fmt.Errorf("%s still syncs %d slots", n.ID()[:8], tp.ReplicaSlotsSyncing)
			}
			held += tp.ReplicaSlots
		}
		if held != replicas*engine.SlotCount {
			return fmt.Errorf("the nodes hold %d replica slots, want %d", held, replicas*engine.SlotCount)
		}
		return nil
	})
}
