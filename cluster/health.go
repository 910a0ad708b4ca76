package cluster

import (
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// A member's health as this node sees it, Redis Cluster's flags: ok, pfail
// (a probe went unanswered: CLUSTER NODES' "fail?") and fail.
const (
	healthOK uint8 = iota
	healthPFail
	healthFail
)

// failProbes is how many probes in a row a member must leave unanswered
// to be fail rather than pfail: one lost datagram makes a member pfail,
// not fail.
const failProbes = 3

// failedKeep is how long a member that failed, and that gossip has
// dropped, stays listed (CLUSTER NODES' fail, without slots) unless it
// comes back; maxFailedListed bounds how many are.
const (
	failedKeep      = 10 * time.Minute
	maxFailedListed = 64
)

// peerHealth is one other member's health, as the prober keeps it.
type peerHealth struct {
	addr   *net.UDPAddr // its gossip address, as memberlist reports it
	misses int          // probes in a row it has not answered
	state  uint8
	meta   memberMeta // what it gossiped last, to list it once gone
	gone   time.Time  // when gossip dropped it as failed; zero while a member
}

// goneNode is a member that failed and that gossip has dropped, still
// listed as fail.
type goneNode struct {
	id   string
	meta memberMeta
}

// healthView is what the prober publishes for Topology and Stats, read
// without a lock: the members that are not ok, and the failed members
// gossip has dropped, by id.
type healthView struct {
	state map[string]uint8
	gone  []goneNode
}

// healthTable is the failure reporting: every other member's health, from
// probes this node sends each of them every probe interval (memberlist's
// Ping, on its gossip port, as its own failure detection probes), so that
// a member that stops answering shows as pfail after its first
// unanswered probe, seconds before memberlist's suspicion ends and it is
// dropped (its slots then go to the others). Memberlist's own detector
// decides membership: it probes one member per interval, and it tells
// nothing of a member it suspects, so the prober probes every member
// for the flags alone.
type healthTable struct {
	mu       sync.Mutex
	peers    map[string]*peerHealth // by id
	failing  bool                   // the cluster state logged last: some slot's owner fails
	view     atomic.Pointer[healthView]
	probing  sync.WaitGroup // the probe loop
	interval time.Duration  // between probe rounds
	// ping probes a member: memberlist's Ping, which waits for the answer
	// up to its probe timeout. Tests set it, and clock.
	ping  func(id string, addr *net.UDPAddr) error
	clock func() time.Time // nil: time.Now
}

// now returns the table's time.
func (h *healthTable) now() time.Time {
	if h.clock != nil {
		return h.clock()
	}
	return time.Now()
}

// healthJoined records that member id, at gossip address addr, is live.
func (n *Node) healthJoined(id string, addr *net.UDPAddr, md memberMeta) {
	h := &n.health
	h.mu.Lock()
	p := h.peers[id]
	if p != nil && p.state != healthOK {
		n.logf("notice", "cluster: member %s (%s:%d) is back", id, md.IP, md.Port)
	}
	h.peers[id] = &peerHealth{addr: addr, meta: md}
	n.publishHealthLocked()
	h.mu.Unlock()
}

// healthLeft records that gossip has dropped member id: one that left
// (CLUSTER LEAVE) is forgotten, one that failed stays listed as fail.
func (n *Node) healthLeft(id string, md memberMeta, left bool) {
	h := &n.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if left {
		delete(h.peers, id)
		n.publishHealthLocked()
		return
	}
	p := h.peers[id]
	if p == nil {
		p = &peerHealth{}
		h.peers[id] = p
	}
	p.meta = md // as gossip had it last
	if p.state != healthFail {
		n.logf("warning", "cluster: member %s (%s:%d) is fail: dropped by gossip; its slots go to the others", id, md.IP, md.Port)
	}
	p.state, p.gone = healthFail, h.now()
	n.publishHealthLocked()
}

// healthAgreed brings the health table in line with a new agreed set
// (agree.go), was being the one before. An agreed member gossip does not
// report, and that this node has no health of (it is down, and this node
// restarted since, say), is probed at the address the set gives, so that
// it shows pfail, then fail, while it owns slots. A member the set
// dropped without leaving, the majority having found it unreachable for
// the node timeout, is fail at once where this node's probes flag it
// pfail, as Redis Cluster's PFAIL becomes FAIL on the majority's word:
// with a node timeout shorter than failProbes probes, the majority takes
// its slots before the probes alone would flag it fail. One that this
// node's probes still reach stays as they say (the leader's side of a
// partition lost it, not this node's); one that gossip does not report
// either, and that was never flagged, is forgotten.
func (n *Node) healthAgreed(was, now map[string]agreedMember) {
	live, left := n.gossipView()
	n.mu.Lock()
	leavers := make(map[string]bool, len(n.leavers))
	for id := range n.leavers {
		leavers[id] = true
	}
	n.mu.Unlock()
	h := &n.health
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := false
	for id, am := range now {
		if _, ok := live[id]; ok || h.peers[id] != nil {
			continue // gossip reports it (NotifyJoin records it), or it is known
		}
		if ip := net.ParseIP(am.IP); ip != nil {
			h.peers[id] = &peerHealth{addr: &net.UDPAddr{IP: ip, Port: am.BusPort}, meta: am.meta()}
			changed = true
		}
	}
	for id := range was {
		if _, still := now[id]; still || id == n.cfg.ID {
			continue
		}
		md, isLive := live[id]
		p := h.peers[id]
		if p == nil || isLive && md.Leaving || leavers[id] || left[id] {
			continue // unknown, or it left: healthLeft forgets it
		}
		switch {
		case p.state == healthPFail:
			p.state = healthFail
			n.logf("warning", "cluster: member %s (%s:%d) is fail: the majority removed it from the agreed members", id, p.meta.IP, p.meta.Port)
		case p.state == healthOK && !isLive:
			delete(h.peers, id)
			changed = true
			continue
		case p.state == healthOK:
			continue
		}
		if !isLive && p.gone.IsZero() {
			p.gone = h.now()
		}
		changed = true
	}
	if changed {
		n.publishHealthLocked()
	}
}

// publishHealthLocked publishes the view Topology reads, dropping the
// gone members listed too long or beyond maxFailedListed.
func (n *Node) publishHealthLocked() {
	h := &n.health
	now := h.now()
	var gone []*peerHealth
	var goneIDs []string
	for id, p := range h.peers {
		if !p.gone.IsZero() {
			if now.Sub(p.gone) > failedKeep {
				delete(h.peers, id)
				continue
			}
			gone, goneIDs = append(gone, p), append(goneIDs, id)
		}
	}
	if len(gone) > maxFailedListed {
		idx := make([]int, len(gone))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return gone[idx[a]].gone.After(gone[idx[b]].gone) })
		for _, i := range idx[maxFailedListed:] {
			delete(h.peers, goneIDs[i])
		}
	}
	v := &healthView{state: map[string]uint8{}}
	for id, p := range h.peers {
		if p.state != healthOK {
			v.state[id] = p.state
		}
		if !p.gone.IsZero() {
			v.gone = append(v.gone, goneNode{id, p.meta})
		}
	}
	h.view.Store(v)
}

// probeLoop probes every other member once per interval until Close.
func (n *Node) probeLoop() {
	defer n.health.probing.Done()
	t := time.NewTicker(n.health.interval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		n.probeRound()
	}
}

// probeRound probes every other live member at once, waits for the
// answers (at most the probe timeout), then updates their health and
// logs each change, and the cluster state's.
func (n *Node) probeRound() {
	h := &n.health
	type probe struct {
		id   string
		addr *net.UDPAddr
		ok   bool
	}
	var probes []*probe
	h.mu.Lock()
	for id, p := range h.peers {
		if p.gone.IsZero() && p.addr != nil {
			probes = append(probes, &probe{id: id, addr: p.addr})
		}
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.ok = h.ping(p.id, p.addr) == nil
		}()
	}
	wg.Wait()
	if n.stopping() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, pr := range probes {
		p := h.peers[pr.id]
		if p == nil || !p.gone.IsZero() || p.addr != pr.addr {
			continue // it left, failed or came back meanwhile
		}
		if pr.ok {
			if p.state != healthOK {
				n.logf("notice", "cluster: member %s (%s:%d) answers again", pr.id, p.meta.IP, p.meta.Port)
			}
			p.misses, p.state = 0, healthOK
			continue
		}
		p.misses++
		switch {
		case p.misses >= failProbes && p.state != healthFail:
			p.state = healthFail
			n.logf("warning", "cluster: member %s (%s:%d) is fail: %d probes in a row unanswered", pr.id, p.meta.IP, p.meta.Port, p.misses)
		case p.state == healthOK:
			p.state = healthPFail
			n.logf("warning", "cluster: member %s (%s:%d) is pfail: a probe went unanswered", pr.id, p.meta.IP, p.meta.Port)
		}
	}
	n.publishHealthLocked()
	top := n.Topology()
	failing := top.SlotsOK < len(n.slots) || top.SlotsFail > 0
	if failing != h.failing {
		h.failing = failing
		if failing {
			n.logf("warning", "cluster: cluster_state fail: %d slots without an owner, %d whose owner is fail", len(n.slots)-top.SlotsOK, top.SlotsFail)
		} else {
			n.logf("notice", "cluster: cluster_state ok: every slot's owner answers")
		}
	}
}
