package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// planHandoffs recomputes the map, publishes it, moves slot states, and
// returns the slots to hand over by new owner (their state set to
// moving), and the stale slots whose keys to send, by owner.
func (n *Node) planHandoffs() (plan, fill map[string][]int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	members := n.membersLocked()
	m := n.currentMapLocked(members)
	old := n.routes.Load()
	epoch := old.epoch
	if old.m.Owner != m.Owner || len(old.members) != len(members) {
		epoch++
	}
	t := &routeTable{m: m, members: members, epoch: epoch, addr: make([]string, len(m.Members))}
	for i, mb := range m.Members {
		md := members[mb.ID]
		t.addr[i] = net.JoinHostPort(md.IP, strconv.Itoa(md.Port))
	}
	n.routes.Store(t)
	if n.prevFromMembers {
		var others []Member
		for id, md := range members {
			if id != n.cfg.ID && !md.Leaving {
				others = append(others, Member{ID: id, Weight: md.Weight})
			}
		}
		n.prevMap, n.prevFromMembers = Assign(others), false
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
				h := n.prevMap.OwnerID(s)
				if _, alive := members[h]; alive && h != n.cfg.ID {
					n.prevOwner[s], n.stateSince[s] = h, now
					sl.state.Store(pending)
				} else {
					sl.state.Store(serving)
				}
			case pending:
				h := n.prevOwner[s]
				if _, alive := members[h]; !alive {
					n.logf("verbose", "cluster: slot %d: its previous owner %s is gone; serving it empty", s, h)
					sl.state.Store(serving)
				} else if now.Sub(n.stateSince[s]) > n.cfg.PendingTimeout {
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
				n.stateSince[s] = now
			} else {
				sl.state.Store(notMine)
			}
		case stale:
			switch {
			case now.Sub(n.stateSince[s]) > n.cfg.PendingTimeout:
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
	n.prevMap = m
	return plan, fill
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
	t := n.routes.Load()
	md, ok := t.members[to]
	if !ok {
		if !restored {
			n.keepServing(slots)
		}
		return
	}
	addr := n.linkAddr(md)
	deadline := time.Now().Add(n.cfg.HandoffTimeout)
	for _, s := range slots {
		for !restored && n.slots[s].inflight.Load() != 0 {
			if time.Now().After(deadline) || n.stopping() {
				n.keepServing(slots)
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
			if strings.Contains(err.Error(), ErrLeaving.Error()) {
				// to is leaving too: it owns nothing from now on. A
				// node whose peers are all leaving stops waiting for
				// them (Leave).
				n.mu.Lock()
				n.leavers[to] = true
				n.mu.Unlock()
				n.poke()
			}
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
		n.keysOut.Add(int64(keys))
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
				n.keepServing(slots[i+1-len(batch):])
				return
			}
		}
	}
	if !flush() {
		n.keepServing(batch)
		return
	}
	if restored {
		n.logf("verbose", "cluster: sent the restored keys of %d slots to %s", len(slots), addr)
		return
	}
	n.logf("verbose", "cluster: handed %d slots to %s", len(slots), addr)
}

// keepServing serves slots again after a hand-off that did not happen
// (stale slots stay stale).
func (n *Node) keepServing(slots []int) {
	for _, s := range slots {
		n.slots[s].state.CompareAndSwap(moving, serving)
	}
}

// send delivers one hand-off message to the member to at addr; restored
// marks its keys as restored copies.
func (n *Node) send(addr, to string, payload []byte, restored bool) error {
	n.connsMu.Lock()
	p := n.handoffClients[addr]
	if p == nil {
		p = redis.NewClient(&redis.Options{
			Addr: addr, Protocol: 2, MaxRetries: -1,
			DialTimeout: n.cfg.HandoffTimeout, ReadTimeout: n.cfg.HandoffTimeout, WriteTimeout: n.cfg.HandoffTimeout,
			DisableIdentity: true, PoolSize: 2, TLSConfig: n.cfg.TLS,
			// Every new connection is a link (link.go) before it is used.
			OnConnect: func(ctx context.Context, cn *redis.Conn) error {
				return n.linkDial(func(args ...string) ([]string, error) {
					a := make([]any, len(args))
					for i, s := range args {
						a[i] = s
					}
					cmd := cn.Do(ctx, a...)
					if args[2] == "PROOF" {
						return nil, cmd.Err()
					}
					return cmd.StringSlice()
				})
			},
		})
		n.handoffClients[addr] = p
	}
	n.connsMu.Unlock()
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	n.mu.Lock()
	leaving := n.leaving
	n.mu.Unlock()
	flag := formatFlags(leaving, restored)
	mac := n.sign(n.cfg.ID, to, ts, flag, payload)
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HandoffTimeout)
	defer cancel()
	return p.Do(ctx, "CLUSTER", "IMPORT", n.cfg.ID, to, ts, flag, payload, mac).Err()
}

// Import takes a hand-off message (CLUSTER IMPORT's arguments after
// IMPORT: from-id, to-id, unix-ms, flag, payload, mac), checks it as the
// comment on the message format (wire.go) describes, imports its records
// and serves its slots. It takes all of it or nothing. With the flag
// "restored" it imports only the records of keys it does not hold, and
// serves no slot for that.
func (n *Node) Import(args [][]byte) error {
	now := time.Now()
	msg, err := n.parseMessage(args, now)
	if err != nil {
		return err
	}
	from, leaving, restored, sections := msg.from, msg.leaving, msg.restored, msg.sections
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, t := range n.seenMACs {
		if now.Sub(time.UnixMilli(t)) > 2*maxSkew {
			delete(n.seenMACs, k)
		}
	}
	if _, ok := n.seenMACs[msg.mac]; ok {
		return ErrHandoffStale
	}
	if n.leaving {
		// The sender's view lags: it learns from this that this node
		// is leaving (handoff), ahead of gossip.
		return ErrLeaving
	}
	members := n.membersLocked()
	sender, ok := members[from]
	if !ok {
		return ErrUnknownPeer
	}
	if leaving && !sender.Leaving {
		n.leavers[from] = true
		sender.Leaving = true
		members[from] = sender
		n.poke()
	}
	// This node's own view may lag the sender's: check against the map of
	// the members as they are now.
	m := n.currentMapLocked(members)
	for _, sec := range sections {
		st := n.slots[sec.slot].state.Load()
		// Restored keys go only to a slot this node has taken up (serving,
		// or pending its hand-off), whose keys it keeps track of.
		if m.OwnerID(sec.slot) != n.cfg.ID || st == moving || restored && st != serving && st != pending {
			return fmt.Errorf("%w: slot %d", ErrNotOwner, sec.slot)
		}
	}
	n.seenMACs[msg.mac] = msg.ms
	v := n.eng.NewView()
	keys := 0
	for _, sec := range sections {
		for _, r := range sec.recs {
			if restored {
				ok, err := v.ImportIfAbsent(r)
				if err != nil {
					return err
				}
				if ok {
					keys++
				}
				continue
			}
			if _, err := v.Import(r); err != nil {
				return err
			}
			keys++
		}
		if !restored {
			n.slots[sec.slot].state.Store(serving)
		}
	}
	n.keysIn.Add(int64(keys))
	if restored {
		n.logf("verbose", "cluster: took %d restored keys of %d slots from %s", keys, len(sections), from)
		return nil
	}
	n.logf("verbose", "cluster: imported %d slots (%d keys) from %s", len(sections), keys, from)
	return nil
}
