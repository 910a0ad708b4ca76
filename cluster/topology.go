package cluster

import (
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
)

// A slot's state on this node.
const (
	notMine uint32 = iota // another node owns it (or nobody does)
	serving               // this node owns it and answers for it
	pending               // this node owns it and waits for its previous owner's hand-off
	moving                // this node is handing it to its new owner
	stale                 // another node owns it, and this node holds keys of it restored from a snapshot, to send it
	away                  // this node owns it, and its previous owner serves it, having failed to hand it over (held)
	replica               // another node owns it, and this node holds a copy of its state streamed from the owner (replicas.go)
)

// slotState is one slot's state and the number of commands running on it.
type slotState struct {
	state    atomic.Uint32
	inflight atomic.Int32
}

// routeTable is the slot map and the members it was computed from, as
// published for the request path (read without locks).
type routeTable struct {
	m       *SlotMap
	addr    []string              // client host:port of m.Members[i]
	members map[string]memberMeta // every live member, leaving ones included, by id
	epoch   int64
	// rep is each slot's replicas (Config.Replicas), indexes into
	// m.Members, first to last (-1: none); nil without replicas.
	rep []*[engine.SlotCount]int16
}

// Acquire reports where slot is served; when it is this node, the slot
// stays here (a hand-off of it waits) until Release.
func (n *Node) Acquire(slot int) (commands.Route, string) {
	if n.down.Load() {
		return commands.RouteClusterDown, ""
	}
	sl := &n.slots[slot]
	sl.inflight.Add(1)
	if sl.state.Load() == serving {
		return commands.RouteLocal, ""
	}
	sl.inflight.Add(-1)
	return n.Peek(slot)
}

// Release ends what Acquire began when it returned commands.RouteLocal.
func (n *Node) Release(slot int) { n.slots[slot].inflight.Add(-1) }

// Peek reports where slot is served now, without holding it.
func (n *Node) Peek(slot int) (commands.Route, string) {
	if n.down.Load() {
		return commands.RouteClusterDown, ""
	}
	switch n.slots[slot].state.Load() {
	case serving:
		return commands.RouteLocal, ""
	case pending, moving:
		return commands.RouteTryAgain, ""
	case away:
		if a := n.awayAddr[slot].Load(); a != nil {
			return commands.RouteMoved, *a
		}
	}
	t := n.routes.Load() // notMine or stale
	o := t.m.Owner[slot]
	switch {
	case o < 0:
		return commands.RouteDown, ""
	case t.m.Members[o].ID == n.cfg.ID:
		return commands.RouteTryAgain, "" // gained, not served yet
	}
	return commands.RouteMoved, t.addr[o]
}

// Stats are a node's counters, as Stats reads them.
type Stats struct {
	KeysOut     int64 // keys this node has handed to other nodes
	KeysIn      int64 // keys this node has received from them
	SlotsServed int   // slots this node answers for now
	Members     int   // live members this node knows, itself included
	// SlotsHeld counts the slots this node serves although another owns
	// them: their keys could not be handed over (a record the owner did
	// not take), and the hand-off is tried again later.
	SlotsHeld int
	// NodesPFail and NodesFail count the members this node flags pfail
	// and fail (health.go), the failed ones gossip has dropped included;
	// SlotsPFail and SlotsFail count the slots those members own.
	NodesPFail, NodesFail int
	SlotsPFail, SlotsFail int
	// StateOK is CLUSTER INFO's cluster_state: every slot has an owner,
	// and no owner is fail.
	StateOK bool
}

// Stats reads the node's counters: atomic loads only, no lock (the
// health figures come from Topology, which takes none either).
func (n *Node) Stats() Stats {
	st := Stats{KeysOut: n.keysOut.Load(), KeysIn: n.keysIn.Load(), Members: len(n.routes.Load().members), SlotsHeld: int(n.nHeld.Load())}
	top := n.Topology()
	for _, nd := range top.Nodes {
		switch {
		case nd.PFail:
			st.NodesPFail++
		case nd.Fail:
			st.NodesFail++
		}
	}
	st.SlotsPFail, st.SlotsFail = top.SlotsPFail, top.SlotsFail
	st.StateOK = top.SlotsOK == engine.SlotCount && top.SlotsFail == 0
	for s := range n.slots {
		if n.slots[s].state.Load() == serving {
			st.SlotsServed++
		}
	}
	return st
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

// currentMapLocked computes the map over the members that own slots, or
// returns the last one computed when they and their weights are the same:
// reconcile asks five times a second, and Assign sorts 256 pairs per
// member (about 6 ms for 50 members).
func (n *Node) currentMapLocked(members map[string]memberMeta) *SlotMap {
	owners := n.ownersLocked(members, "")
	sort.Slice(owners, func(i, j int) bool { return owners[i].ID < owners[j].ID })
	var key strings.Builder
	for _, o := range owners {
		key.WriteString(o.ID)
		key.WriteByte(':')
		key.WriteString(strconv.FormatFloat(o.Weight, 'g', -1, 64))
		key.WriteByte(',')
	}
	if k := key.String(); n.lastMap != nil && k == n.lastMapKey {
		return n.lastMap
	}
	n.lastMapKey, n.lastMap = key.String(), Assign(owners)
	return n.lastMap
}

// ownersLocked returns the members that own slots, but skip: the agreed
// set under agreement, else the live members, less those leaving.
func (n *Node) ownersLocked(members map[string]memberMeta, skip string) []Member {
	var owners []Member
	if n.agree != nil {
		agreed, _, _ := n.agree.agreed()
		for id, am := range agreed {
			if id != skip && !members[id].Leaving && !n.leavers[id] && !n.isLeftClean(id) {
				owners = append(owners, Member{ID: id, Weight: am.Weight})
			}
		}
		return owners
	}
	for id, m := range members {
		if id != skip && !m.Leaving {
			owners = append(owners, Member{ID: id, Weight: m.Weight})
		}
	}
	return owners
}

// reconcile brings every slot's state in line with the map of the live
// members, then hands the slots this node no longer owns to their owners,
// and sends restored keys to theirs.
func (n *Node) reconcile() {
	plan, fill, rel, carry := n.planHandoffs()
	for to, slots := range plan {
		n.handoff(to, slots, false)
	}
	for to, slots := range carry {
		n.carryCopies(to, slots)
	}
	for to, slots := range rel {
		n.releaseTo(to, slots)
	}
	for to, slots := range fill {
		n.handoff(to, slots, true)
	}
	n.subscribe()
}

// Topology returns the members, the slot ranges each owns, their health
// (health.go), the failed members gossip has dropped (listed as fail,
// without slots), and the keys this node has handed over and received.
func (n *Node) Topology() commands.ClusterTopology {
	t := n.routes.Load()
	hv := n.health.view.Load()
	if hv == nil {
		hv = &healthView{}
	}
	out := commands.ClusterTopology{MyID: n.cfg.ID, Epoch: t.epoch, KeysOut: n.keysOut.Load(), KeysIn: n.keysIn.Load(), SlotsHeld: int(n.nHeld.Load()),
		Agreement: n.agree != nil, SeesMajority: n.agree == nil || !n.down.Load()}
	for id, md := range t.members {
		h := hv.state[id]
		out.Nodes = append(out.Nodes, commands.ClusterNode{ID: id, IP: md.IP, Port: md.Port, BusPort: md.BusPort,
			Myself: id == n.cfg.ID, Leaving: md.Leaving, PFail: h == healthPFail, Fail: h == healthFail})
	}
	for _, g := range hv.gone {
		if _, ok := t.members[g.id]; !ok {
			out.Nodes = append(out.Nodes, commands.ClusterNode{ID: g.id, IP: g.meta.IP, Port: g.meta.Port, BusPort: g.meta.BusPort, Fail: true})
		}
	}
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].ID < out.Nodes[j].ID })
	index := map[string]int{}
	for i, nd := range out.Nodes {
		index[nd.ID] = i
	}
	sameReps := func(a, b int) bool {
		for _, rp := range t.rep {
			if rp[a] != rp[b] {
				return false
			}
		}
		return true
	}
	for s := 0; s < engine.SlotCount; {
		o := t.m.Owner[s]
		e := s
		for e+1 < engine.SlotCount && t.m.Owner[e+1] == o && sameReps(s, e+1) {
			e++
		}
		if o >= 0 {
			if t.rep != nil {
				out.Ranges = append(out.Ranges, commands.ClusterRange{First: s, Last: e, Owner: t.m.Members[o].ID, Replicas: t.replicaIDs(s)})
			}
			out.SlotsOK += e - s + 1
			if i, ok := index[t.m.Members[o].ID]; ok {
				if sl := out.Nodes[i].Slots; len(sl) > 0 && sl[len(sl)-1][1] == s-1 {
					sl[len(sl)-1][1] = e
				} else {
					out.Nodes[i].Slots = append(out.Nodes[i].Slots, [2]int{s, e})
				}
				switch {
				case out.Nodes[i].PFail:
					out.SlotsPFail += e - s + 1
				case out.Nodes[i].Fail:
					out.SlotsFail += e - s + 1
				}
			}
		}
		s = e + 1
	}
	n.replicaStats(&out)
	return out
}

// isLeftClean reports whether id left by a clean leave: it owns nothing
// while the agreed set still holds it.
func (n *Node) isLeftClean(id string) bool {
	n.gossipedMu.Lock()
	defer n.gossipedMu.Unlock()
	return n.leftClean[id]
}
