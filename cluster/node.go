package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/hashicorp/memberlist"
	"github.com/redis/go-redis/v9"
)

// Status is where a slot is served, as Acquire and Peek answer.
type Status uint8

const (
	// StatusLocal: this node serves the slot.
	StatusLocal Status = iota
	// StatusMoved: the owner is another node, at the address returned.
	StatusMoved
	// StatusTryAgain: the slot is being handed over, to or from this node.
	StatusTryAgain
	// StatusDown: no live node owns the slot.
	StatusDown
)

// A slot's state on this node.
const (
	notMine uint32 = iota // another node owns it (or nobody does)
	serving               // this node owns it and answers for it
	pending               // this node owns it and waits for its previous owner's hand-off
	moving                // this node is handing it to its new owner
	stale                 // another node owns it, and this node holds keys of it restored from a snapshot, to send it
)

// slotState is one slot's state and the number of commands running on it.
type slotState struct {
	state    atomic.Uint32
	inflight atomic.Int32
}

// meta is the node metadata memberlist gossips: how to reach a member and
// what share of the slots it takes.
type meta struct {
	IP      string  `json:"ip"`
	Port    int     `json:"port"`
	BusPort int     `json:"bus"`
	Weight  float64 `json:"w"`
	Leaving bool    `json:"leaving,omitempty"`
	Started int64   `json:"started"` // Unix ms the node started at
}

// topology is the slot map and the members it was computed from, as
// published for the request path (read without locks).
type topology struct {
	m       *SlotMap
	addr    []string        // client host:port of m.Members[i]
	members map[string]meta // every live member, leaving ones included, by id
	epoch   int64
}

// Node is this process's membership in a cluster. Create it with New,
// then Start it with the engine whose slots it serves. Acquire, Release,
// Peek and Topology are safe for concurrent use, and Acquire/Release
// take no lock.
type Node struct {
	cfg Config
	eng *engine.Engine
	ml  *memberlist.Memberlist

	slots [engine.SlotCount]slotState
	top   atomic.Pointer[topology]

	mu           sync.Mutex // guards the fields below
	prev         *SlotMap   // the map of the previous reconcile
	holder       [engine.SlotCount]string
	pendingSince [engine.SlotCount]time.Time // when the slot became pending, or stale
	leaving      bool
	seen         map[string]int64 // hand-off MACs accepted, by their time, against replays
	leavers      map[string]bool  // members whose hand-off said they are leaving, ahead of gossip
	fresh        bool             // met others while alone and empty: the next reconcile sets prev from them

	// knownMu guards the members as memberlist's events report them (its
	// Members' nodes are changed in place, so they are copied in the
	// events) and this node's own metadata. It is never held while
	// calling memberlist, which calls the events with its own lock held.
	knownMu sync.Mutex
	known   map[string]meta
	self    meta

	handoffKey []byte
	peersMu    sync.Mutex
	peers      map[string]*redis.Client
	fwd        map[string]chan *fwdConn // forwarding's idle connections, by owner address

	life    sync.Mutex     // serializes Start and Close
	bg      sync.WaitGroup // rejoin
	started atomic.Bool
	moved   atomic.Int64 // keys handed to other nodes
	gained  atomic.Int64 // keys received from other nodes
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	closed  atomic.Bool
}

// Errors of Node's methods.
var (
	ErrClosed     = errors.New("cluster: node closed")
	ErrNotStarted = errors.New("cluster: node not started yet")
	ErrAlone      = errors.New("cluster: no other node to hand the slots to")
	ErrLeaveTime  = errors.New("cluster: slots still not handed over at the leave timeout")
)

// New returns a node for cfg (defaults filled in, then validated). It
// does not listen until Start.
func New(cfg Config) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	k := sha256.Sum256([]byte("cellserver hand-off\x00" + cfg.Secret))
	n := &Node{
		cfg: cfg, seen: map[string]int64{}, leavers: map[string]bool{}, known: map[string]meta{}, peers: map[string]*redis.Client{}, fwd: map[string]chan *fwdConn{},
		handoffKey: k[:], kick: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{}),
		self: meta{IP: cfg.IP, Port: cfg.Port, BusPort: cfg.BusPort, Weight: cfg.Weight, Started: time.Now().UnixMilli()},
	}
	n.top.Store(&topology{m: Assign(nil), members: map[string]meta{}})
	return n, nil
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Start starts gossip on the bus port, joins the members of Config.Join
// (when none answers, it serves alone and tries them again every second
// until it has joined, or a member has met it) and begins serving eng's
// slots as the map gives them. A node alone serves every slot, with the keys eng holds. A node
// that joined others serves nothing until the previous owners hand its
// slots over; the keys eng holds already (restored from a snapshot) are
// older than any live copy, so they count only where no live node holds
// the key: those of the slots it gains stay, and the hand-offs replace
// them key by key, and those of the slots others own are sent to their
// owners, who take the keys they do not hold (ImportIfAbsent), then
// deleted here. Start may run once, and not after Close.
func (n *Node) Start(eng *engine.Engine) error {
	n.life.Lock()
	defer n.life.Unlock()
	if n.closed.Load() {
		return ErrClosed
	}
	if n.started.Load() {
		return errors.New("cluster: node already started")
	}
	n.eng = eng
	mc := memberlist.DefaultLANConfig()
	if n.cfg.Local {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = n.cfg.ID
	mc.BindAddr, mc.BindPort = n.cfg.BindAddr, n.cfg.BusPort
	mc.AdvertiseAddr, mc.AdvertisePort = n.cfg.IP, n.cfg.BusPort
	key := sha256.Sum256([]byte("cellserver gossip\x00" + n.cfg.Secret))
	mc.SecretKey = key[:]
	mc.Delegate = (*delegate)(n)
	mc.Events = (*delegate)(n)
	mc.Logger = log.New(logWriter{n}, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("cluster: gossip on %s:%d: %w", n.cfg.BindAddr, n.cfg.BusPort, err)
	}
	n.ml = ml
	joined := 0
	var rejoin []string
	if len(n.cfg.Join) > 0 {
		var addrs []string
		for _, j := range n.cfg.Join {
			a, _ := GossipAddr(j) // Validate checked them
			addrs = append(addrs, a)
		}
		joined, err = ml.Join(addrs)
		if err != nil && joined == 0 {
			n.logf("warning", "cluster: could not join %v: %v; serving alone, and trying again every %v", n.cfg.Join, err, rejoinInterval)
			rejoin = addrs
		} else {
			n.syncMembers(addrs)
		}
	}
	n.mu.Lock()
	members := n.membersLocked()
	var others []Member
	for id, m := range members {
		if id != n.cfg.ID && !m.Leaving {
			others = append(others, Member{ID: id, Weight: m.Weight})
		}
	}
	if len(others) > 0 {
		// Whatever the others serve is theirs until they hand it over.
		n.prev = Assign(others)
		if keys := eng.NewView().DBSize(); keys > 0 {
			m, now := n.currentMapLocked(members), time.Now()
			for s := range n.slots {
				if m.OwnerID(s) != n.cfg.ID {
					n.slots[s].state.Store(stale)
					n.pendingSince[s] = now
				}
			}
			n.logf("notice", "cluster: joined with %d keys held; those of other members' slots go to their owners where they hold no newer copy", keys)
		}
	} else {
		n.prev = Assign([]Member{{ID: n.cfg.ID, Weight: 1}})
		for s := range n.slots {
			n.slots[s].state.Store(serving)
		}
	}
	n.mu.Unlock()
	n.logf("notice", "cluster: node %s gossiping on %s:%d, %d members", n.cfg.ID, n.cfg.IP, n.cfg.BusPort, len(members))
	n.reconcile()
	n.started.Store(true)
	go n.loop()
	if rejoin != nil {
		n.bg.Add(1)
		go n.rejoin(rejoin)
	}
	return nil
}

// rejoinInterval is how often a node whose cluster-join found no member
// at start tries again.
const rejoinInterval = time.Second

// rejoin tries to join the members at addrs (gossip addresses) every
// rejoinInterval until it has, or until another node has met this one:
// nodes started at once, each naming others not gossiping yet, would
// otherwise each serve every slot for ever.
func (n *Node) rejoin(addrs []string) {
	defer n.bg.Done()
	t := time.NewTicker(rejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if n.ml.NumMembers() > 1 {
			return
		}
		if _, err := n.ml.Join(addrs); err == nil {
			n.syncMembers(addrs)
			n.logf("notice", "cluster: joined through %v", n.cfg.Join)
			n.poke()
			return
		}
	}
}

// Started reports whether Start has run (and Close has not).
func (n *Node) Started() bool { return n.started.Load() && !n.closed.Load() }

// Acquire reports where slot is served; when it is this node, the slot
// stays here (a hand-off of it waits) until Release.
func (n *Node) Acquire(slot int) (Status, string) {
	sl := &n.slots[slot]
	sl.inflight.Add(1)
	if sl.state.Load() == serving {
		return StatusLocal, ""
	}
	sl.inflight.Add(-1)
	return n.Peek(slot)
}

// Release ends what Acquire began when it returned StatusLocal.
func (n *Node) Release(slot int) { n.slots[slot].inflight.Add(-1) }

// Peek reports where slot is served now, without holding it.
func (n *Node) Peek(slot int) (Status, string) {
	switch n.slots[slot].state.Load() {
	case serving:
		return StatusLocal, ""
	case pending, moving:
		return StatusTryAgain, ""
	}
	t := n.top.Load() // notMine or stale
	o := t.m.Owner[slot]
	switch {
	case o < 0:
		return StatusDown, ""
	case t.m.Members[o].ID == n.cfg.ID:
		return StatusTryAgain, "" // gained, not served yet
	}
	return StatusMoved, t.addr[o]
}

// Moved returns how many keys this node has handed to others, and how
// many it has received.
func (n *Node) Moved() (out, in int64) { return n.moved.Load(), n.gained.Load() }

// Stats are a node's counters, as Stats reads them.
type Stats struct {
	KeysOut, KeysIn int64 // as Moved returns them
	SlotsServed     int   // slots this node answers for now
	Members         int   // live members this node knows, itself included
}

// Stats reads the node's counters: atomic loads only, no lock.
func (n *Node) Stats() Stats {
	st := Stats{KeysOut: n.moved.Load(), KeysIn: n.gained.Load(), Members: len(n.top.Load().members)}
	for s := range n.slots {
		if n.slots[s].state.Load() == serving {
			st.SlotsServed++
		}
	}
	return st
}

// Meet joins the cluster of the member whose client port is port at host;
// its gossip port is busPort, or port+BusPortOffset when busPort is 0.
func (n *Node) Meet(host string, port, busPort int) error {
	if n.closed.Load() {
		return ErrClosed
	}
	if !n.started.Load() {
		return ErrNotStarted
	}
	m := net.JoinHostPort(host, strconv.Itoa(port))
	if busPort > 0 {
		m += "@" + strconv.Itoa(busPort)
	}
	a, err := GossipAddr(m)
	if err != nil {
		return err
	}
	if _, err := n.ml.Join([]string{a}); err != nil {
		return err
	}
	n.syncMembers([]string{a})
	n.poke()
	return nil
}

// syncMembers exchanges state with every member this node knows of
// besides the ones at done, which it has just joined through. The seed
// learns of a new node at once, but the others would hear of it by UDP
// gossip, which memberlist sends to a few random members only a few
// times: a member that misses it learns at its next full state exchange,
// up to PushPullInterval later (15 to 30 s), and the slots it must hand
// to the new node wait that long. A TCP exchange with each member
// removes that wait.
func (n *Node) syncMembers(done []string) {
	skip := map[string]bool{}
	for _, a := range done {
		skip[a] = true
	}
	var addrs []string
	for _, m := range n.ml.Members() {
		a := m.Address()
		if m.Name != n.cfg.ID && !skip[a] {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return
	}
	if _, err := n.ml.Join(addrs); err != nil {
		n.logf("verbose", "cluster: exchanging state with %v: %v", addrs, err)
	}
}

// Leave hands every slot this node serves to the members that own them
// once it is gone, then leaves the cluster and stops gossip. Commands on
// those slots meanwhile get TRYAGAIN, then MOVED.
func (n *Node) Leave() error {
	if n.closed.Load() {
		return ErrClosed
	}
	n.life.Lock() // a Start under way finishes first
	started := n.started.Load()
	n.life.Unlock()
	if !started {
		return ErrNotStarted
	}
	n.mu.Lock()
	if len(n.membersLocked()) <= 1 {
		n.mu.Unlock()
		return ErrAlone
	}
	n.leaving = true
	n.knownMu.Lock()
	n.self.Leaving = true
	n.knownMu.Unlock()
	n.mu.Unlock()
	if err := n.ml.UpdateNode(n.cfg.HandoffTimeout); err != nil {
		n.logf("warning", "cluster: announcing the leave: %v", err)
	}
	deadline := time.Now().Add(n.cfg.LeaveTimeout)
	for {
		n.poke()
		if n.servedSlots() == 0 && n.staleSlots() == 0 {
			break
		}
		if n.top.Load().m.Owner[0] < 0 {
			// Every other member is leaving too: nobody can take the slots.
			return ErrAlone
		}
		if time.Now().After(deadline) {
			return ErrLeaveTime
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.logf("notice", "cluster: every slot handed over; leaving")
	_ = n.ml.Leave(n.cfg.HandoffTimeout)
	return n.Close()
}

// servedSlots counts the slots this node serves or is handing over.
func (n *Node) servedSlots() int {
	c := 0
	for s := range n.slots {
		if st := n.slots[s].state.Load(); st == serving || st == moving {
			c++
		}
	}
	return c
}

// staleSlots counts the slots whose restored keys this node has still to
// send to their owners.
func (n *Node) staleSlots() int {
	c := 0
	for s := range n.slots {
		if n.slots[s].state.Load() == stale {
			c++
		}
	}
	return c
}

// Close stops gossip at once, as a crash would (the others see the node
// die and serve its slots empty), and closes the hand-off connections.
func (n *Node) Close() error {
	n.life.Lock()
	defer n.life.Unlock()
	if n.closed.Swap(true) {
		return nil
	}
	if n.ml != nil {
		close(n.stop)
		<-n.stopped
		n.bg.Wait() // a join under way ends within memberlist's TCP timeout
		_ = n.ml.Shutdown()
	}
	n.peersMu.Lock()
	for _, p := range n.peers {
		_ = p.Close()
	}
	for _, pool := range n.fwd {
		for len(pool) > 0 {
			(<-pool).c.Close()
		}
	}
	n.peersMu.Unlock()
	return nil
}

func (n *Node) poke() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *Node) loop() {
	defer close(n.stopped)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.kick:
		case <-t.C:
		}
		n.reconcile()
	}
}

// membersLocked returns every live member with its metadata, this node
// included.
func (n *Node) membersLocked() map[string]meta {
	n.knownMu.Lock()
	out := make(map[string]meta, len(n.known)+1)
	for id, md := range n.known {
		md.Leaving = md.Leaving || n.leavers[id]
		out[id] = md
	}
	out[n.cfg.ID] = n.self
	n.knownMu.Unlock()
	for id := range n.leavers {
		if _, ok := out[id]; !ok {
			delete(n.leavers, id)
		}
	}
	return out
}

// currentMapLocked computes the map over the members that own slots.
func (n *Node) currentMapLocked(members map[string]meta) *SlotMap {
	var owners []Member
	for id, m := range members {
		if !m.Leaving {
			owners = append(owners, Member{ID: id, Weight: m.Weight})
		}
	}
	return Assign(owners)
}

// reconcile brings every slot's state in line with the map of the live
// members, then hands the slots this node no longer owns to their owners,
// and sends restored keys to theirs.
func (n *Node) reconcile() {
	plan, fill := n.planHandoffs()
	for to, slots := range plan {
		n.handoff(to, slots, false)
	}
	for to, slots := range fill {
		n.handoff(to, slots, true)
	}
}

// planHandoffs recomputes the map, publishes it, moves slot states, and
// returns the slots to hand over by new owner (their state set to
// moving), and the stale slots whose keys to send, by owner.
func (n *Node) planHandoffs() (plan, fill map[string][]int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	members := n.membersLocked()
	m := n.currentMapLocked(members)
	old := n.top.Load()
	epoch := old.epoch
	if old.m.Owner != m.Owner || len(old.members) != len(members) {
		epoch++
	}
	t := &topology{m: m, members: members, epoch: epoch, addr: make([]string, len(m.Members))}
	for i, mb := range m.Members {
		md := members[mb.ID]
		t.addr[i] = net.JoinHostPort(md.IP, strconv.Itoa(md.Port))
	}
	n.top.Store(t)
	if n.fresh {
		var others []Member
		for id, md := range members {
			if id != n.cfg.ID && !md.Leaving {
				others = append(others, Member{ID: id, Weight: md.Weight})
			}
		}
		n.prev, n.fresh = Assign(others), false
	}
	now := time.Now()
	plan, fill = map[string][]int{}, map[string][]int{}
	dropped := 0
	for s := range n.slots {
		sl := &n.slots[s]
		owner := m.OwnerID(s)
		st := sl.state.Load()
		if owner == n.cfg.ID {
			switch st {
			case notMine, stale: // a stale slot's keys stay, under the hand-off's
				h := n.prev.OwnerID(s)
				if _, alive := members[h]; alive && h != n.cfg.ID {
					n.holder[s], n.pendingSince[s] = h, now
					sl.state.Store(pending)
				} else {
					sl.state.Store(serving)
				}
			case pending:
				h := n.holder[s]
				if _, alive := members[h]; !alive {
					n.logf("verbose", "cluster: slot %d: its previous owner %s is gone; serving it empty", s, h)
					sl.state.Store(serving)
				} else if now.Sub(n.pendingSince[s]) > n.cfg.PendingTimeout {
					n.logf("warning", "cluster: slot %d: no hand-off from %s in %v; serving it empty", s, h, n.cfg.PendingTimeout)
					sl.state.Store(serving)
				}
			}
			continue
		}
		switch st {
		case serving:
			if owner != "" {
				sl.state.Store(moving)
				plan[owner] = append(plan[owner], s)
			}
		case pending:
			// Lost before its hand-off came: the keys it holds already
			// (restored, or restored copies from others) go to the owner.
			if n.eng.NewView().CountKeysInSlot(s) > 0 {
				sl.state.Store(stale)
				n.pendingSince[s] = now
			} else {
				sl.state.Store(notMine)
			}
		case stale:
			switch {
			case now.Sub(n.pendingSince[s]) > n.cfg.PendingTimeout:
				dropped += n.eng.NewView().DeleteSlot(s)
				sl.state.Store(notMine)
			case owner != "":
				fill[owner] = append(fill[owner], s)
			}
		}
	}
	if dropped > 0 {
		n.logf("warning", "cluster: dropped %d restored keys their slots' owners did not take in %v", dropped, n.cfg.PendingTimeout)
	}
	n.prev = m
	return plan, fill
}

// met runs when memberlist reports a new member (CLUSTER MEET, either
// way, or a join). If this node was alone, holds no keys, and the member
// started before it, it stops serving at once, before any client can
// learn of it from the others, and becomes what a node started with
// cluster-join is: it serves nothing until the previous owners hand its
// slots over (the next reconcile takes them as the previous owners).
// Otherwise it keeps serving what it owns, and keys handed over are
// merged in.
func (n *Node) met(id string, md meta) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.eng == nil || n.fresh || len(n.top.Load().members) != 1 {
		return
	}
	if !(md.Started < n.self.Started || md.Started == n.self.Started && id < n.cfg.ID) {
		return
	}
	if n.eng.NewView().DBSize() != 0 {
		return
	}
	for s := range n.slots {
		n.slots[s].state.CompareAndSwap(serving, notMine)
	}
	n.fresh = true
	n.logf("notice", "cluster: met member %s; serving no slot until the owners hand them over", id)
}

// Close's stop also ends a wait for in-flight commands.
func (n *Node) stopping() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// handoff streams slots (all in state moving) to the member to: it waits
// for the commands running on each to finish, sends their records in
// authenticated batches, and on each batch's success deletes them here
// and lets the slots go; a batch that fails is served here again and
// retried at the next reconcile. With restored, the slots are stale ones
// (served by to, not here): their keys go as restored copies, which to
// takes only where it holds no live key; a batch that fails stays stale
// and is retried.
func (n *Node) handoff(to string, slots []int, restored bool) {
	t := n.top.Load()
	md, ok := t.members[to]
	if !ok {
		if !restored {
			n.restore(slots)
		}
		return
	}
	addr := net.JoinHostPort(md.IP, strconv.Itoa(md.Port))
	deadline := time.Now().Add(n.cfg.HandoffTimeout)
	for _, s := range slots {
		for !restored && n.slots[s].inflight.Load() != 0 {
			if time.Now().After(deadline) || n.stopping() {
				n.restore(slots)
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	v := n.eng.NewView()
	const maxBatch = 4 << 20
	var payload []byte
	var batch []int
	keys := 0
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		err := n.send(addr, to, payload, restored)
		if err != nil {
			n.logf("verbose", "cluster: handing %d slots to %s: %v; retrying", len(batch), addr, err)
			return false
		}
		if restored {
			// Under mu, as Import: a slot a hand-off has made this node
			// serve meanwhile keeps its keys.
			n.mu.Lock()
			for _, s := range batch {
				if n.slots[s].state.CompareAndSwap(stale, notMine) {
					v.DeleteSlot(s)
				}
			}
			n.mu.Unlock()
		} else {
			for _, s := range batch {
				v.DeleteSlot(s)
				n.slots[s].state.Store(notMine)
			}
		}
		n.moved.Add(int64(keys))
		payload, batch, keys = payload[:0], batch[:0], 0
		return true
	}
	for i, s := range slots {
		recs := v.ExportSlot(s)
		payload = appendSlot(payload, s, recs)
		batch = append(batch, s)
		keys += len(recs)
		if len(payload) >= maxBatch || len(batch) >= 1024 {
			if !flush() {
				n.restore(slots[i+1-len(batch):])
				return
			}
		}
	}
	if !flush() {
		n.restore(batch)
		return
	}
	if restored {
		n.logf("verbose", "cluster: sent the restored keys of %d slots to %s", len(slots), addr)
		return
	}
	n.logf("verbose", "cluster: handed %d slots to %s", len(slots), addr)
}

// restore serves slots again after a hand-off that did not happen (stale
// slots stay stale).
func (n *Node) restore(slots []int) {
	for _, s := range slots {
		n.slots[s].state.CompareAndSwap(moving, serving)
	}
}

// send delivers one hand-off message to the member to at addr; restored
// marks its keys as restored copies.
func (n *Node) send(addr, to string, payload []byte, restored bool) error {
	n.peersMu.Lock()
	p := n.peers[addr]
	if p == nil {
		p = redis.NewClient(&redis.Options{
			Addr: addr, Password: n.cfg.Password, Protocol: 2, MaxRetries: -1,
			DialTimeout: n.cfg.HandoffTimeout, ReadTimeout: n.cfg.HandoffTimeout, WriteTimeout: n.cfg.HandoffTimeout,
			DisableIdentity: true, PoolSize: 2,
		})
		n.peers[addr] = p
	}
	n.peersMu.Unlock()
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	n.mu.Lock()
	var flags []string
	if n.leaving {
		flags = append(flags, flagLeaving)
	}
	n.mu.Unlock()
	if restored {
		flags = append(flags, flagRestored)
	}
	flag := "-"
	if len(flags) > 0 {
		flag = strings.Join(flags, ",")
	}
	mac := n.sign(n.cfg.ID, to, ts, flag, payload)
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HandoffTimeout)
	defer cancel()
	return p.Do(ctx, "CLUSTER", "IMPORT", n.cfg.ID, to, ts, flag, payload, mac).Err()
}

// delegate is Node as memberlist's Delegate and EventDelegate.
type delegate Node

func (d *delegate) NodeMeta(limit int) []byte {
	n := (*Node)(d)
	n.knownMu.Lock()
	b, _ := json.Marshal(n.self)
	n.knownMu.Unlock()
	if len(b) > limit {
		return nil
	}
	return b
}

// Cellserver gossips nothing beyond memberlist's membership and metadata.
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) NotifyJoin(m *memberlist.Node) {
	n := (*Node)(d)
	n.logf("notice", "cluster: member %s joined at %s", m.Name, m.Address())
	var md meta
	if m.Name != n.cfg.ID && json.Unmarshal(m.Meta, &md) == nil && md.Port != 0 {
		n.met(m.Name, md) // before the member counts for Import
	}
	d.NotifyUpdate(m)
}

func (d *delegate) NotifyLeave(m *memberlist.Node) {
	n := (*Node)(d)
	n.logf("notice", "cluster: member %s left or failed", m.Name)
	n.knownMu.Lock()
	md, ok := n.known[m.Name]
	delete(n.known, m.Name)
	n.knownMu.Unlock()
	if ok {
		n.dropPeer(net.JoinHostPort(md.IP, strconv.Itoa(md.Port)))
	}
	n.poke()
}

// dropPeer closes the hand-off client and the idle forwarding connections
// to the member at addr, which has gone: under churn they would pile up.
// A hand-off or a forward using them meanwhile fails and is retried or
// answered as the member's absence dictates; a member that comes back at
// addr gets new ones.
func (n *Node) dropPeer(addr string) {
	n.peersMu.Lock()
	p, pool := n.peers[addr], n.fwd[addr]
	delete(n.peers, addr)
	delete(n.fwd, addr)
	n.peersMu.Unlock()
	if p != nil {
		_ = p.Close()
	}
	for len(pool) > 0 {
		select {
		case fc := <-pool:
			fc.c.Close()
		default:
		}
	}
}

// NotifyUpdate records m's metadata; a node without cellserver's
// metadata is ignored.
func (d *delegate) NotifyUpdate(m *memberlist.Node) {
	n := (*Node)(d)
	var md meta
	if m.Name == n.cfg.ID || json.Unmarshal(m.Meta, &md) != nil || md.Port == 0 {
		return
	}
	n.knownMu.Lock()
	n.known[m.Name] = md
	n.knownMu.Unlock()
	n.poke()
}

func (n *Node) logf(level, format string, args ...any) {
	if n.cfg.Logf != nil {
		n.cfg.Logf(level, format, args...)
	}
}

// logWriter sends memberlist's log lines to Config.Logf at debug level.
type logWriter struct{ n *Node }

func (w logWriter) Write(b []byte) (int, error) {
	if w.n.cfg.Logf != nil {
		w.n.cfg.Logf("debug", "memberlist: %s", b)
	}
	return len(b), nil
}

var _ io.Writer = logWriter{}
