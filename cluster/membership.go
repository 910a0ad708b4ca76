package cluster

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// memberMeta is the node metadata memberlist gossips: how to reach a member and
// what share of the slots it takes.
type memberMeta struct {
	IP      string  `json:"ip"`
	Port    int     `json:"port"`
	BusPort int     `json:"bus"`
	Weight  float64 `json:"w"`
	Leaving bool    `json:"leaving,omitempty"`
	Started int64   `json:"started"`       // Unix ns the node started at: which of two nodes is older (met)
	TLSPort int     `json:"tls,omitempty"` // its TLS port, for links over TLS
}

// delegate is Node as memberlist's Delegate and EventDelegate.
type delegate Node

func (d *delegate) NodeMeta(limit int) []byte {
	n := (*Node)(d)
	n.gossipedMu.Lock()
	b, _ := json.Marshal(n.selfMeta)
	n.gossipedMu.Unlock()
	if len(b) > limit {
		return nil
	}
	return b
}

// Beyond memberlist's membership and metadata, cellserver gossips only
// the shared state (shared.go): a change as a message, the whole copy in
// the push-pull exchange.
func (d *delegate) NotifyMsg(b []byte) {
	if len(b) > 0 && b[0] == msgShared {
		(*Node)(d).mergeShared(b[1:])
	}
}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte {
	if s := (*Node)(d).sharedState(); s != nil {
		return s.State()
	}
	return nil
}
func (d *delegate) MergeRemoteState(buf []byte, join bool) { (*Node)(d).mergeShared(buf) }

func (d *delegate) NotifyJoin(m *memberlist.Node) {
	n := (*Node)(d)
	n.logf("notice", "cluster: member %s joined at %s", m.Name, m.Address())
	var md memberMeta
	if m.Name != n.cfg.ID && json.Unmarshal(m.Meta, &md) == nil && md.Port != 0 {
		n.met(m.Name, md) // before the member counts for Import
		n.healthJoined(m.Name, &net.UDPAddr{IP: append(net.IP(nil), m.Addr...), Port: int(m.Port)}, md)
	}
	n.gossipedMu.Lock()
	delete(n.leftClean, m.Name)
	n.gossipedMu.Unlock()
	d.NotifyUpdate(m)
}

func (d *delegate) NotifyLeave(m *memberlist.Node) {
	n := (*Node)(d)
	n.logf("notice", "cluster: member %s left or failed", m.Name)
	n.mu.Lock() // before it leaves gossiped, which reconcile prunes leavers by
	handedOver := n.leavers[m.Name]
	n.mu.Unlock()
	n.gossipedMu.Lock()
	md, ok := n.gossiped[m.Name]
	delete(n.gossiped, m.Name)
	// A member that gossiped its leave, or handed over as leaving, left
	// cleanly: the agreed set drops it at once (agree.go), and it owns
	// nothing meanwhile. Memberlist's m.State cannot tell: it keeps a
	// member's state in a field of its own that shadows Node.State, which
	// it never sets.
	if ok && md.Leaving || handedOver {
		n.leftClean[m.Name] = true
	}
	n.gossipedMu.Unlock()
	if ok {
		n.dropPeer(net.JoinHostPort(md.IP, strconv.Itoa(md.Port)))
		n.healthLeft(m.Name, md, md.Leaving || handedOver)
	}
	n.poke()
}

// NotifyUpdate records m's metadata; a node without cellserver's
// metadata is ignored.
func (d *delegate) NotifyUpdate(m *memberlist.Node) {
	n := (*Node)(d)
	var md memberMeta
	if m.Name == n.cfg.ID || json.Unmarshal(m.Meta, &md) != nil || md.Port == 0 {
		return
	}
	n.gossipedMu.Lock()
	old, had := n.gossiped[m.Name]
	n.gossiped[m.Name] = md
	n.gossipedMu.Unlock()
	if had && old.Started != md.Started {
		n.restarted(m.Name) // back under its id before it was seen gone (identity.go)
	}
	n.poke()
}

// met runs when memberlist reports a new member (CLUSTER MEET, either
// way, or a join). If this node was alone, holds no keys, and the member
// started before it, it stops serving at once, before any client can
// learn of it from the others, and becomes what a node started with
// cluster-join is: it serves nothing until the previous owners hand its
// slots over (the next reconcile takes them as the previous owners).
// Otherwise it keeps serving what it owns, and keys handed over are
// merged in.
func (n *Node) met(id string, md memberMeta) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.eng == nil || n.prevFromMembers || len(n.routes.Load().members) > 1 {
		return
	}
	if !(md.Started < n.selfMeta.Started || md.Started == n.selfMeta.Started && id < n.cfg.ID) {
		return
	}
	if n.eng.NewView().DBSize() != 0 {
		return
	}
	for s := range n.slots {
		n.slots[s].state.CompareAndSwap(serving, notMine)
	}
	n.prevFromMembers = true
	if n.agree != nil && n.agree.bootstrapped.Load() {
		n.agree.reset.Store(true) // its Raft, a cluster of one, waits to be added instead
	}
	n.logf("notice", "cluster: met member %s; serving no slot until the owners hand them over", id)
}

// gossipView returns the live members as gossip reports them, this node
// included, and the members gone by a clean leave.
func (n *Node) gossipView() (live map[string]memberMeta, left map[string]bool) {
	n.gossipedMu.Lock()
	defer n.gossipedMu.Unlock()
	live = make(map[string]memberMeta, len(n.gossiped)+1)
	for id, md := range n.gossiped {
		live[id] = md
	}
	live[n.cfg.ID] = n.selfMeta
	left = make(map[string]bool, len(n.leftClean))
	for id := range n.leftClean {
		left[id] = true
	}
	return live, left
}

// routeMembersLocked is membersLocked with, under agreement, the agreed
// members gossip does not report live: they own their slots until the
// majority removes them, and clients are sent to them meanwhile.
func (n *Node) routeMembersLocked() map[string]memberMeta {
	out := n.membersLocked()
	if n.agree == nil {
		return out
	}
	agreed, _, _ := n.agree.agreed()
	for id, am := range agreed {
		if _, ok := out[id]; !ok {
			out[id] = am.meta()
		}
	}
	return out
}

// dropPeer closes the hand-off client and the idle forwarding connections
// to the member at addr, which has gone: under churn they would pile up.
// A hand-off or a forward using them meanwhile fails and is retried or
// answered as the member's absence dictates; a member that comes back at
// addr gets new ones.
func (n *Node) dropPeer(addr string) {
	n.connsMu.Lock()
	p, pool := n.handoffClients[addr], n.fwdIdle[addr]
	delete(n.handoffClients, addr)
	delete(n.fwdIdle, addr)
	n.connsMu.Unlock()
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

// maxPendingMeets bounds the CLUSTER MEETs waiting for meetLoop.
const maxPendingMeets = 16

// meetReq is one CLUSTER MEET waiting for meetLoop.
type meetReq struct {
	member string // as given: host:port[@busport]
	addr   string // its gossip address
}

// Meet starts joining the cluster of the member whose client port is port
// at host; its gossip port is busPort, or port+BusPortOffset when busPort
// is 0. It returns once the address is checked, before anything is
// dialed, as Redis's CLUSTER MEET does: the join runs in meetLoop, which
// logs its failure, so that the reply says nothing of what answers at
// the address (CLUSTER MEET is no port scanner). Up to maxPendingMeets
// wait their turn; one more is dropped, with a warning in the log.
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
	select {
	case n.meets <- meetReq{member: m, addr: a}:
	default:
		n.logf("warning", "cluster: CLUSTER MEET %s dropped: %d meets already waiting", m, maxPendingMeets)
	}
	return nil
}

// meetLoop runs the CLUSTER MEETs, one at a time, until Close. Close
// does not wait for a meet under way, whose dial of an address that never
// answers would hold a shutdown for memberlist's TCP timeout (10 s); such
// a meet ends within that time, and does nothing once Close has begun.
func (n *Node) meetLoop() {
	for {
		var m meetReq
		select {
		case <-n.stop:
			return
		case m = <-n.meets:
		}
		_, err := n.ml.Join([]string{m.addr})
		if n.stopping() {
			return
		}
		if err != nil {
			n.logf("warning", "cluster: CLUSTER MEET %s: %v", m.member, err)
			continue
		}
		n.syncMembers([]string{m.addr})
		n.logf("notice", "cluster: met %s", m.member)
		n.poke()
	}
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
	// The members as the events copied them: memberlist's Members()
	// returns nodes it changes in place, racing with a read here.
	var addrs []string
	n.gossipedMu.Lock()
	for _, md := range n.gossiped {
		if a := net.JoinHostPort(md.IP, strconv.Itoa(md.BusPort)); !skip[a] {
			addrs = append(addrs, a)
		}
	}
	n.gossipedMu.Unlock()
	if len(addrs) == 0 {
		return
	}
	if _, err := n.ml.Join(addrs); err != nil {
		n.logf("verbose", "cluster: exchanging state with %v: %v", addrs, err)
	}
}

// rejoinInterval is how often a node whose cluster-join found no member
// at start tries again.
const rejoinInterval = time.Second

// rejoin tries to join the members at addrs (gossip addresses) every
// rejoinInterval until it has, or until another node has met this one:
// nodes started at once, each naming others not gossiping yet, would
// otherwise each serve every slot for ever.
func (n *Node) rejoin(addrs []string) {
	defer n.rejoining.Done()
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

// Leave hands every slot this node serves to the members that own them
// once it is gone, then leaves the cluster and stops gossip. Commands on
// those slots meanwhile get TRYAGAIN, then MOVED.
func (n *Node) Leave() error {
	if n.closed.Load() {
		return ErrClosed
	}
	n.lifeMu.Lock() // a Start under way finishes first
	started := n.started.Load()
	n.lifeMu.Unlock()
	if !started {
		return ErrNotStarted
	}
	n.mu.Lock()
	if len(n.membersLocked()) <= 1 {
		n.mu.Unlock()
		return ErrAlone
	}
	n.leaving = true
	n.gossipedMu.Lock()
	n.selfMeta.Leaving = true
	n.gossipedMu.Unlock()
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
		if n.routes.Load().m.Owner[0] < 0 {
			// Every other member is leaving too: nobody can take the
			// slots. Say so at once rather than let the others wait to
			// see this node fail: each of them may be waiting for the
			// same.
			n.logf("warning", "cluster: every other member is leaving too; leaving with %d slots not handed over", n.servedSlots())
			_ = n.ml.Leave(n.cfg.HandoffTimeout)
			return ErrAlone
		}
		if held := int(n.nHeld.Load()); held > 0 && n.servedSlots() == held && n.staleSlots() == 0 {
			// What is left could not move (handoff.go's held slots): say
			// so now rather than at the leave timeout.
			_ = n.ml.Leave(n.cfg.HandoffTimeout)
			return fmt.Errorf("%w: %d slots whose keys their owners did not take", ErrLeaveTime, held)
		}
		if time.Now().After(deadline) {
			return ErrLeaveTime
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.logf("notice", "cluster: every slot handed over; leaving")
	if n.agree != nil {
		n.agree.awaitRemoval(deadline)
	}
	_ = n.ml.Leave(n.cfg.HandoffTimeout)
	return n.Close()
}

// membersLocked returns every live member with its metadata, this node
// included.
func (n *Node) membersLocked() map[string]memberMeta {
	n.gossipedMu.Lock()
	out := make(map[string]memberMeta, len(n.gossiped)+1)
	for id, md := range n.gossiped {
		md.Leaving = md.Leaving || n.leavers[id]
		out[id] = md
	}
	out[n.cfg.ID] = n.selfMeta
	n.gossipedMu.Unlock()
	for id := range n.leavers {
		if _, ok := out[id]; !ok {
			delete(n.leavers, id)
		}
	}
	return out
}
