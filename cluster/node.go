package cluster

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/loglimit"
	"github.com/hashicorp/memberlist"
	"github.com/redis/go-redis/v9"
)

// Node is this process's membership in a cluster. Create it with New,
// then Start it with the engine whose slots it serves. Acquire, Release,
// Peek and Topology are safe for concurrent use, and Acquire/Release
// take no lock.
type Node struct {
	cfg Config
	eng *engine.Engine
	ml  *memberlist.Memberlist

	shared atomic.Pointer[sharedHolder] // the state the cluster shares (shared.go); nil: none
	// agree is the member set a majority agreed on (agree.go), nil when
	// Config.RequireMajority is off; gossipTr is the gossip transport
	// its Raft shares.
	agree    *agreement
	gossipTr *limitedTransport
	// down is set while this node has not seen a majority for the node
	// timeout: it answers no slot (Acquire's one extra atomic load).
	down atomic.Bool

	slots  [engine.SlotCount]slotState
	routes atomic.Pointer[routeTable] // the map the request path reads, replaced whole by reconcile
	// awayAddr is, for a slot in state away, its previous owner's client
	// address, which serves it.
	awayAddr [engine.SlotCount]atomic.Pointer[string]
	nHeld    atomic.Int32 // len(held)
	chunk    int          // a hand-off message's payload bound: maxChunk, less in tests

	mu         sync.Mutex // guards the fields below
	prevMap    *SlotMap   // the map of the previous reconcile
	lastMap    *SlotMap   // currentMapLocked's last map, and the members it is of
	lastMapKey string
	prevOwner  [engine.SlotCount]string    // the member whose hand-off a pending slot waits for
	stateSince [engine.SlotCount]time.Time // when the slot became pending, or stale
	leaving    bool                        // Leave has begun: hand-offs carry the leaving flag
	held       map[int]heldSlot            // the slots this node serves though it owns them not: they could not move
	// releases are the slots this node lost before their hand-off came,
	// their previous owner gone, by the owner to release them to
	// (handoff.go's releaseTo).
	releases map[int]release
	// carries are the replica copies this node holds of slots whose
	// owner failed, to send to the member that took each over
	// (carryCopies); awaitCarry are the slots this node took over with a
	// copy less complete, and waits for such a copy for (carryWait).
	carries    map[int]release
	awaitCarry map[int]bool
	// retiredAt holds, for a copy this node keeps after losing its
	// replica role (planHandoffs), since when it keeps it.
	retiredAt map[int]time.Time
	// seenMACs holds the MACs of the hand-offs accepted, with their time,
	// against replays.
	seenMACs map[string]int64
	// leavers are the members whose hand-off said they are leaving, ahead
	// of gossip.
	leavers map[string]bool
	// prevFromMembers is set when this node, alone and empty, met others:
	// the next reconcile takes them as the previous owners (prevMap).
	prevFromMembers bool
	// selfAddedAt is the Raft index at which the agreed set last added
	// this node (0: not in it): a change means the others took its slots
	// meanwhile, and what it served is stale.
	selfAddedAt uint64

	// gossipedMu guards the members as memberlist's events report them
	// (its Members' nodes are changed in place, so they are copied in the
	// events) and this node's own metadata. It is never held while
	// calling memberlist, which calls the events with its own lock held.
	gossipedMu sync.Mutex
	gossiped   map[string]memberMeta // other live members, by id
	leftClean  map[string]bool       // members gone by a clean leave, not a failure
	selfMeta   memberMeta            // what this node gossips of itself

	handoffKey     []byte                   // HMAC key of hand-off messages, from the cluster secret
	linkKey        []byte                   // HMAC key of the link handshake (link.go), from the cluster secret
	linkLog        loglimit.Limit           // rate-limits failed handshakes' log lines (link.go)
	linkClock      func() time.Time         // linkLog's clock; nil: time.Now (tests set it)
	connsMu        sync.Mutex               // guards handoffClients and fwdIdle
	handoffClients map[string]*redis.Client // hand-off connections, by member client address
	fwdIdle        map[string]chan *fwdConn // forwarding's idle connections, by owner address

	lifeMu       sync.Mutex     // serializes Start and Close
	rejoining    sync.WaitGroup // the rejoin goroutine, when Start could not join
	meets        chan meetReq   // CLUSTER MEETs waiting for meetLoop
	started      atomic.Bool
	keysOut      atomic.Int64  // keys handed to other nodes
	keysIn       atomic.Int64  // keys received from other nodes
	reconcileNow chan struct{} // poke's signal to loop: reconcile without waiting for the tick
	stop         chan struct{} // closed by Close
	stopped      chan struct{} // closed when loop has returned
	closed       atomic.Bool

	health healthTable // every other member's health, from probes (health.go)
	// identityNote is what New has to say of the node file, logged at
	// Start (New's caller may not log yet); releasing is the releases to
	// restarted members under way (identity.go).
	identityNote string
	releasing    sync.WaitGroup

	// Replicas (replicas.go). repl is the streams both ways. On a
	// replica, rsub is the owner each slot in state replica is subscribed
	// to ("" none) and rsubAt when (both under mu); rsynced says its full
	// copy has come, rstale that it must be asked for again.
	repl    replication
	rsub    [engine.SlotCount]string
	rsubAt  [engine.SlotCount]time.Time
	rsynced [engine.SlotCount]atomic.Bool
	rstale  [engine.SlotCount]atomic.Bool
	// repFor is the map repOf holds the replicas of (under mu).
	repFor *SlotMap
	repOf  []*[engine.SlotCount]int16
}

// Node is package commands' Router: Dispatch routes keyed commands through
// it, and CLUSTER's subcommands call it.
var _ commands.Router = (*Node)(nil)

// Errors of Node's methods.
var (
	ErrClosed     = errors.New("cluster: node closed")
	ErrNotStarted = errors.New("cluster: node not started yet")
	ErrAlone      = errors.New("cluster: no other node to hand the slots to")
	ErrLeaveTime  = errors.New("cluster: slots still not handed over at the leave timeout")
)

// New returns a node for cfg (defaults filled in, then validated), with
// the id kept in cfg.NodeFile when it names one (identity.go), and
// writes the node file when its content changes. It does not listen
// until Start.
func New(cfg Config) (*Node, error) {
	prev, found, err := cfg.loadIdentity()
	if err != nil {
		return nil, err
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	note, err := cfg.saveIdentity(prev, found)
	if err != nil {
		return nil, err
	}
	k := sha256.Sum256([]byte("cellserver hand-off\x00" + cfg.Secret))
	lk := sha256.Sum256([]byte("cellserver link\x00" + cfg.Secret))
	n := &Node{
		cfg: cfg, chunk: maxChunk, seenMACs: map[string]int64{}, held: map[int]heldSlot{}, releases: map[int]release{}, carries: map[int]release{}, awaitCarry: map[int]bool{}, retiredAt: map[int]time.Time{}, leavers: map[string]bool{}, gossiped: map[string]memberMeta{}, leftClean: map[string]bool{}, handoffClients: map[string]*redis.Client{}, fwdIdle: map[string]chan *fwdConn{},
		handoffKey: k[:], linkKey: lk[:], reconcileNow: make(chan struct{}, 1), meets: make(chan meetReq, maxPendingMeets),
		stop: make(chan struct{}), stopped: make(chan struct{}),
		selfMeta: memberMeta{IP: cfg.IP, Port: cfg.Port, BusPort: cfg.BusPort, TLSPort: cfg.TLSPort, Weight: cfg.Weight, Started: time.Now().UnixNano()},
	}
	n.routes.Store(&routeTable{m: Assign(nil), members: map[string]memberMeta{}})
	n.health.peers = map[string]*peerHealth{}
	n.identityNote = note
	if cfg.RequireMajority {
		rk := sha256.Sum256([]byte("cellserver raft\x00" + cfg.Secret))
		n.agree = newAgreement(n, rk[:])
	}
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
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.closed.Load() {
		return ErrClosed
	}
	if n.started.Load() {
		return errors.New("cluster: node already started")
	}
	n.eng = eng
	n.startReplication()
	mc := memberlist.DefaultLANConfig()
	if n.cfg.Local {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = n.cfg.ID
	// A node restarted with its id (Config.NodeFile) at another address
	// takes its name back once the old one is declared dead, rather than
	// after memberlist forgets it (GossipToTheDeadTime, 15 to 30 s).
	mc.DeadNodeReclaimTime = time.Nanosecond
	mc.BindAddr, mc.BindPort = n.cfg.BindAddr, n.cfg.BusPort
	mc.AdvertiseAddr, mc.AdvertisePort = n.cfg.IP, n.cfg.BusPort
	key := sha256.Sum256([]byte("cellserver gossip\x00" + n.cfg.Secret))
	mc.SecretKey = key[:]
	mc.Delegate = (*delegate)(n)
	mc.Events = (*delegate)(n)
	mc.Logger = log.New(logWriter{n}, "", 0)
	tr, err := n.gossipTransport(mc)
	if err != nil {
		return fmt.Errorf("cluster: gossip on %s:%d: %w", n.cfg.BindAddr, n.cfg.BusPort, err)
	}
	mc.Transport = tr
	n.gossipTr = tr
	if n.agree != nil {
		if err := n.agree.start(tr); err != nil {
			_ = tr.Shutdown()
			return err
		}
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		if n.agree != nil {
			n.agree.shutdownRaft()
		}
		_ = tr.Shutdown()
		return fmt.Errorf("cluster: gossip on %s:%d: %w", n.cfg.BindAddr, n.cfg.BusPort, err)
	}
	n.ml = ml
	n.health.interval = mc.ProbeInterval
	n.health.ping = func(id string, addr *net.UDPAddr) error { _, err := ml.Ping(id, addr); return err }
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
	if n.agree != nil && (len(n.cfg.Join) == 0 || rejoin != nil) {
		n.agree.bootstrap() // joined no one: a cluster of one
		// Its map, until Raft commits the same (an election away).
		n.routes.Store(&routeTable{m: Assign([]Member{{ID: n.cfg.ID, Weight: n.cfg.Weight}}),
			members: map[string]memberMeta{n.cfg.ID: n.selfMeta}, addr: []string{net.JoinHostPort(n.cfg.IP, strconv.Itoa(n.cfg.Port))}})
	}
	if len(others) > 0 {
		// Whatever the others serve is theirs until they hand it over.
		n.prevMap = Assign(others)
		// With agreement, the previous owners are the agreed others, once
		// a configuration with this node comes.
		n.prevFromMembers = n.agree != nil
		if keys := eng.NewView().DBSize(); keys > 0 {
			m, now := n.currentMapLocked(members), time.Now()
			for s := range n.slots {
				if m.OwnerID(s) != n.cfg.ID {
					n.slots[s].state.Store(stale)
					n.stateSince[s] = now
				}
			}
			n.logf("notice", "cluster: joined with %d keys held; those of other members' slots go to their owners where they hold no newer copy", keys)
		}
	} else {
		n.prevMap = Assign([]Member{{ID: n.cfg.ID, Weight: 1}})
		for s := range n.slots {
			n.slots[s].state.Store(serving)
		}
	}
	n.mu.Unlock()
	if n.identityNote != "" {
		n.logf("notice", "%s", n.identityNote)
	}
	n.logf("notice", "cluster: node %s gossiping on %s:%d, %d members", n.cfg.ID, n.cfg.IP, n.cfg.BusPort, len(members))
	n.reconcile()
	n.started.Store(true)
	if n.agree != nil {
		n.agree.run()
	}
	go n.loop()
	go n.meetLoop()
	n.health.probing.Add(1)
	go n.probeLoop()
	if rejoin != nil {
		n.rejoining.Add(1)
		go n.rejoin(rejoin)
	}
	return nil
}

// Started reports whether Start has run (and Close has not).
func (n *Node) Started() bool { return n.started.Load() && !n.closed.Load() }

// Close stops gossip at once, as a crash would (the others see the node
// die and serve its slots empty), and closes the hand-off connections.
func (n *Node) Close() error {
	n.lifeMu.Lock()
	defer n.lifeMu.Unlock()
	if n.closed.Swap(true) {
		return nil
	}
	if n.ml != nil {
		close(n.stop)
		<-n.stopped
		n.stopReplication()
		n.rejoining.Wait()      // a join under way ends within memberlist's TCP timeout
		n.health.probing.Wait() // a probe round ends within the probe timeout
		n.releasing.Wait()      // a release ends within the hand-off timeout
		if n.agree != nil {
			n.agree.close()
		}
		// A CLUSTER MEET under way is not waited for (see meetLoop).
		_ = n.ml.Shutdown()
	}
	n.connsMu.Lock()
	for _, p := range n.handoffClients {
		_ = p.Close()
	}
	for _, pool := range n.fwdIdle {
		for len(pool) > 0 {
			(<-pool).c.Close()
		}
	}
	n.connsMu.Unlock()
	return nil
}

func (n *Node) poke() {
	select {
	case n.reconcileNow <- struct{}{}:
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
		case <-n.reconcileNow:
		case <-t.C:
		}
		n.reconcile()
	}
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
