package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/redis/go-redis/v9"
)

// planHandoffs recomputes the map, publishes it, moves slot states, and
// returns the slots to hand over by new owner (their state set to
// moving), the stale slots whose keys to send, by owner, and the slots to
// release to their owners (n.releases), by owner.
func (n *Node) planHandoffs() (plan, fill, rel, carry map[string][]int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	members := n.routeMembersLocked()
	old := n.routes.Load()
	epoch := old.epoch
	if n.agree != nil {
		// Only an agreed set moves slots, and only on a node that sees a
		// majority: one that does not may hold an old set.
		_, e, ok := n.agree.agreed()
		if !ok || n.down.Load() {
			return nil, nil, nil, nil
		}
		n.checkSelfAgreedLocked()
		epoch = int64(e)
	}
	m := n.currentMapLocked(members)
	if n.agree == nil && (old.m.Owner != m.Owner || len(old.members) != len(members)) {
		epoch++
	}
	t := &routeTable{m: m, members: members, epoch: epoch, addr: make([]string, len(m.Members)), rep: n.replicasLocked(m)}
	for i, mb := range m.Members {
		md := members[mb.ID]
		t.addr[i] = net.JoinHostPort(md.IP, strconv.Itoa(md.Port))
	}
	n.routes.Store(t)
	if n.prevFromMembers {
		n.prevMap, n.prevFromMembers = Assign(n.ownersLocked(members, n.cfg.ID)), false
	}
	now := time.Now()
	plan, fill, carry = map[string][]int{}, map[string][]int{}, map[string][]int{}
	gone := map[string]bool{}
	failed := func(id string) bool { // a member no longer waited for
		g, ok := gone[id]
		if !ok {
			g = id != "" && !n.waitsForLocked(members, id)
			gone[id] = g
		}
		return g
	}
	dropped, tookOver, tookPartial, unheld, awaiting, uncarried := 0, 0, 0, 0, 0, 0
	for s := range n.slots {
		sl := &n.slots[s]
		owner := m.OwnerID(s)
		st := sl.state.Load()
		if owner == n.cfg.ID {
			switch st {
			case notMine, stale, replica: // a stale or replica slot's keys stay, under the hand-off's
				h := n.prevMap.OwnerID(s)
				if n.waitsForLocked(members, h) && h != n.cfg.ID {
					n.prevOwner[s], n.stateSince[s] = h, now
					sl.state.Store(pending)
				} else if t.rep != nil && h != n.cfg.ID && failed(h) && (st != replica || !n.rsynced[s].Load()) {
					// Its owner failed, and this node holds no complete
					// copy: a member that does (a replica whose role moved
					// here) sends it (carryCopies), for up to carryWait.
					awaiting++
					n.prevOwner[s], n.stateSince[s] = "", now
					n.awaitCarry[s] = true
					sl.state.Store(pending)
				} else {
					if st == replica {
						// Its owner is gone: the copy held is the state.
						if n.rsynced[s].Load() {
							tookOver++
						} else {
							tookPartial++
						}
					}
					sl.state.Store(serving)
				}
				if st == replica {
					n.rsub[s] = ""
					n.rsynced[s].Store(false)
					delete(n.retiredAt, s)
					delete(n.carries, s)
				}
			case away:
				if h := n.prevOwner[s]; !isMember(members, h) {
					n.logf("warning", "cluster: slot %d: %s, which kept it, is gone; serving it empty", s, h)
					sl.state.Store(serving)
				}
			case pending:
				h := n.prevOwner[s]
				if n.awaitCarry[s] {
					if now.Sub(n.stateSince[s]) > carryWait {
						uncarried++
						delete(n.awaitCarry, s)
						sl.state.Store(serving)
					}
				} else if !n.waitsForLocked(members, h) && t.rep != nil {
					// Gone before its hand-off: a replica's copy, if one
					// comes (carryCopies).
					awaiting++
					n.awaitCarry[s], n.stateSince[s] = true, now
				} else if !n.waitsForLocked(members, h) {
					n.logf("verbose", "cluster: slot %d: its previous owner %s is gone; serving it empty", s, h)
					sl.state.Store(serving)
				} else if now.Sub(n.stateSince[s]) > n.cfg.PendingTimeout {
					n.logf("warning", "cluster: slot %d: no hand-off from %s in %v; serving it empty", s, h, n.cfg.PendingTimeout)
					sl.state.Store(serving)
				}
			}
			continue
		}
		amReplica := t.rep != nil && t.isReplica(s, n.cfg.ID)
		switch st {
		case notMine:
			if amReplica && owner != "" {
				sl.state.Store(replica)
				n.rsub[s] = ""
				n.rsynced[s].Store(false)
			}
		case replica:
			if c, ok := n.carries[s]; ok {
				delete(n.carries, s)
				switch {
				case c.to != owner:
					// Its owner changed: the copy goes to the new one
					// (below).
				case now.Sub(c.since) <= carryWait:
					n.carries[s] = c
					carry[owner] = append(carry[owner], s)
					continue // its copy is still to be delivered
				default:
					// Not taken within carryWait (the owner refuses it,
					// or has stopped waiting): the copy is carried no
					// longer, and goes as any copy whose owner changed.
					n.rsub[s] = ""
					n.rsynced[s].Store(false)
				}
			}
			if o := n.rsub[s]; owner != "" && o != "" && o != owner && n.rsynced[s].Load() && failed(o) {
				// The owner this copy came from failed, and another
				// member took the slot over: it may hold less.
				n.carries[s] = release{to: owner, since: now}
				carry[owner] = append(carry[owner], s)
				continue
			}
			if owner != "" && n.rsub[s] != "" && (owner != n.rsub[s] || !amReplica) && n.rsynced[s].Load() {
				// Moved, or no longer its replica, and the owner it was
				// copied from, still a member, has not dropped it yet: it
				// does once the slot's new owner or replicas have the
				// state (replScanLocked). Until then the copy stays, as
				// it is, should that owner fail first; but no longer than
				// retiredKeep, should the owner's drop have been lost
				// with a failing link.
				since, ok := n.retiredAt[s]
				if !ok {
					n.retiredAt[s], since = now, now
				}
				if now.Sub(since) <= n.retiredKeep() {
					continue
				}
				n.rsub[s] = ""
				n.rsynced[s].Store(false)
			}
			delete(n.retiredAt, s)
			switch {
			case !amReplica || owner == "":
				unheld++
				n.eng.NewView().DeleteSlot(s)
				sl.state.Store(notMine)
				n.rsub[s] = ""
				n.rsynced[s].Store(false)
			case n.rsub[s] != "" && n.rsub[s] != owner:
				// A new owner: its copy is asked for (subscribe); the
				// keys held stay until its copy begins.
				n.rsub[s] = ""
				n.rsynced[s].Store(false)
			}
		case serving:
			if h, ok := n.held[s]; ok && h.owner == owner && now.Before(h.until) {
				continue // it could not move: retried later
			}
			if owner != "" {
				sl.state.Store(moving)
				plan[owner] = append(plan[owner], s)
			}
		case pending, away:
			carried := n.awaitCarry[s]
			delete(n.awaitCarry, s)
			// Lost before its hand-off came: the keys it holds already
			// (restored, or restored copies from others) go to the owner.
			// When the member it waited for is gone (or it waited for a
			// failed owner's copy instead: that member may be back by
			// now, but will not hand over what it no longer served),
			// nobody will hand the slot over, and its new owner, whose
			// previous map may name this node, would wait for this node:
			// it is released (an empty hand-off, as identity.go's), and
			// serves the slot at once, as this node would have.
			if owner != "" && (carried || !n.waitsForLocked(members, n.prevOwner[s])) {
				n.releases[s] = release{to: owner, since: now}
			}
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
	if tookOver > 0 {
		n.logf("notice", "cluster: took over %d slots of a failed owner with their replica's state", tookOver)
	}
	if tookPartial > 0 {
		n.logf("warning", "cluster: took over %d slots of a failed owner whose replica's copy was not complete: serving what it holds", tookPartial)
	}
	if awaiting > 0 {
		n.logf("notice", "cluster: took over %d slots of a failed owner without a complete copy of their state; waiting up to %v for a replica's", awaiting, carryWait)
	}
	if uncarried > 0 {
		n.logf("warning", "cluster: no replica's copy of %d slots of a failed owner came in %v; serving what this node holds", uncarried, carryWait)
	}
	if unheld > 0 {
		n.logf("verbose", "cluster: no longer a replica of %d slots; dropped their copies", unheld)
	}
	for s, h := range n.held {
		if o := m.OwnerID(s); o != h.owner || now.After(h.until) {
			delete(n.held, s) // the slot's owner changed, or it is time to try again
		}
	}
	n.nHeld.Store(int32(len(n.held)))
	rel = n.releasesDueLocked(m, now)
	n.prevMap = m
	return plan, fill, rel, carry
}

// releasesDueLocked returns the slots to release now (n.releases), by
// owner under m. A release whose slot's owner changed before it was
// taken (the member named refused it, its map already newer) goes on to
// the new owner, which may wait for this node, or for a member that
// never served the slot; one whose slot is this node's again, or older
// than cluster-pending-timeout (its owner has stopped waiting), is
// dropped.
func (n *Node) releasesDueLocked(m *SlotMap, now time.Time) map[string][]int {
	rel := map[string][]int{}
	for s, r := range n.releases {
		o := m.OwnerID(s)
		if o == "" || o == n.cfg.ID || now.Sub(r.since) > n.cfg.PendingTimeout {
			delete(n.releases, s)
			continue
		}
		if o != r.to {
			r.to = o
			n.releases[s] = r
		}
		rel[o] = append(rel[o], s)
	}
	return rel
}

// release is a slot to release: to whom, and since when.
type release struct {
	to    string
	since time.Time
}

// releaseTo tells member to that it owns slots this node waited for and
// lost before their hand-off came, their previous owner gone: an empty
// hand-off each, which to takes as any, and serves them. A release to
// wait for no longer is dropped from n.releases once delivered; one that
// fails is sent again at the next reconcile.
func (n *Node) releaseTo(to string, slots []int) {
	md, ok := n.routes.Load().members[to]
	if !ok {
		return
	}
	for len(slots) > 0 {
		k := min(len(slots), maxSections)
		var payload []byte
		for _, s := range slots[:k] {
			payload = appendSection(payload, s, 0, nil)
		}
		if err := n.send(n.linkAddr(md), to, payload, formatFlags(n.isLeaving(), false, false, false)); err != nil {
			n.logf("verbose", "cluster: releasing %d slots to %s: %v; retrying", k, to, err)
			return
		}
		n.mu.Lock()
		for _, s := range slots[:k] {
			if n.releases[s].to == to {
				delete(n.releases, s)
			}
		}
		n.mu.Unlock()
		n.logf("verbose", "cluster: released %d slots to %s, whose previous owner is gone", k, to)
		slots = slots[k:]
	}
}

// maxChunk bounds a hand-off message's payload: under the least
// proto-max-bulk-len and client-query-buffer-limit a node can be set to
// (1 MiB), so that the receiver's client limits never refuse a message,
// and the receiver holds at most this much of a hand-off at a time. A
// slot's keys span as many messages as they need; a record larger than
// maxChunk goes alone.
const maxChunk = 256 << 10

// maxSections bounds the slots of one hand-off message, and so the
// receiver's work on it, under its lock.
const maxSections = 1024

// heldRetry is how long a slot that could not be handed over stays with
// its owner before the hand-off is tried again.
const heldRetry = time.Minute

// heldSlot is a slot this node serves although another owns it, because
// its keys could not be handed over: a record the owner refused.
type heldSlot struct {
	owner string    // the member that refused it
	until time.Time // when to try again
}

// handoff streams slots (all in state moving) to the member to: it waits
// for the commands running on each to finish, sends their records in
// authenticated messages of at most maxChunk bytes, and on each message's
// success deletes the slots it completed here and lets them go; a message
// that fails on the way is served here again and retried at the next
// reconcile. A slot whose record the receiver refuses (one larger than
// its limits) cannot move: it stays served here, reported, and the
// receiver is told to send its clients here (the "held" flag); the other
// slots go on. With restored, the slots are stale ones (served by to, not
// here): their keys go as restored copies, which to takes only where it
// holds no live key; a message that fails stays stale and is retried.
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
	var (
		payload []byte // the sections of the slots completed, for the next message
		done    []int  // those slots
		sec     []byte // the records of the slot being read
		secN    int    // how many
		keys    int    // keys in payload and sec
		enc     []byte
	)
	// flush sends payload, and sec as the part of slot s that more
	// messages continue (the flag "more"); it reports the error.
	flush := func(s int) error {
		more := secN > 0
		msg := payload
		if more {
			msg = appendSection(msg, s, secN, sec)
		}
		if err := n.send(addr, to, msg, formatFlags(n.isLeaving(), restored, more, false)); err != nil {
			n.refused(to, err)
			return err
		}
		n.completed(v, done, restored)
		n.keysOut.Add(int64(keys))
		payload, done, sec, secN, keys = payload[:0], done[:0], sec[:0], 0, 0
		return nil
	}
	for _, s := range slots {
		recs := v.ExportSlot(s)
		failed := false
		for _, r := range recs {
			enc = r.AppendBinary(enc[:0])
			if len(payload)+len(sec)+len(enc) > n.chunk && (len(payload) > 0 || secN > 0) {
				if err := flush(s); err != nil {
					n.logf("verbose", "cluster: handing slots to %s: %v; retrying", addr, err)
					n.keepServing(slots)
					return
				}
			}
			sec = append(sec, enc...)
			secN++
			keys++
			if len(enc) > n.chunk {
				// Alone in its message: one the receiver may refuse.
				if err := flush(s); err != nil {
					switch {
					case restored && isReply(err):
						// Its restored keys stay here, and are dropped
						// at the pending timeout; the other slots' go on.
						n.logf("warning", "cluster: slot %d: %s did not take a restored record of %d bytes (%v)", s, addr, len(enc), err)
					case restored || !n.hold(addr, to, s, len(enc), err):
						n.logf("verbose", "cluster: handing slots to %s: %v; retrying", addr, err)
						n.keepServing(slots)
						return
					}
					sec, secN, keys, failed = sec[:0], 0, 0, true
					break
				}
			}
		}
		if failed {
			continue
		}
		payload = appendSection(payload, s, secN, sec)
		done = append(done, s)
		sec, secN = sec[:0], 0
		if len(done) == maxSections {
			if err := flush(-1); err != nil {
				n.logf("verbose", "cluster: handing slots to %s: %v; retrying", addr, err)
				n.keepServing(slots)
				return
			}
		}
	}
	if len(done) > 0 {
		if err := flush(-1); err != nil {
			n.logf("verbose", "cluster: handing %d slots to %s: %v; retrying", len(done), addr, err)
			n.keepServing(done)
			return
		}
	}
	if restored {
		n.logf("verbose", "cluster: sent the restored keys of %d slots to %s", len(slots), addr)
		return
	}
	n.logf("verbose", "cluster: handed %d slots to %s", len(slots), addr)
}

func isMember(members map[string]memberMeta, id string) bool {
	_, ok := members[id]
	return ok
}

// isReply reports whether err is the receiver's answer, not a failure to
// reach it.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// completed lets go of the slots a hand-off message has delivered whole.
func (n *Node) completed(v *engine.View, slots []int, restored bool) {
	if restored {
		// Under mu, as Import: a slot a hand-off has made this node
		// serve meanwhile keeps its keys.
		n.mu.Lock()
		for _, s := range slots {
			if n.slots[s].state.CompareAndSwap(stale, notMine) {
				v.DeleteSlot(s)
			}
		}
		n.mu.Unlock()
		return
	}
	for _, s := range slots {
		v.DeleteSlot(s)
		n.slots[s].state.Store(notMine)
	}
}

// refused learns from a hand-off's failure: a receiver that refuses it
// because it is leaving too owns nothing from now on, whatever gossip
// says yet (a node whose peers are all leaving stops waiting for them:
// Leave).
func (n *Node) refused(to string, err error) {
	if !strings.Contains(err.Error(), ErrLeaving.Error()) {
		return
	}
	n.mu.Lock()
	n.leavers[to] = true
	n.mu.Unlock()
	n.poke()
}

// hold keeps serving slot s, whose record of size bytes the member to
// did not take (err), and tells to so; the hand-off is tried again after
// heldRetry, or when the slot's owner changes. It reports whether the
// slot is held: when to cannot be told, the hand-off is retried as any
// that failed on the way. If to serves the slot already (it waited too
// long), the slot's keys are dropped here, so that one node only serves
// it.
func (n *Node) hold(addr, to string, s, size int, err error) bool {
	notice := appendSection(nil, s, 0, nil)
	nerr := n.send(addr, to, notice, formatFlags(n.isLeaving(), false, false, true))
	if nerr != nil && !isReply(nerr) {
		// A receiver that refused a message for its size may have closed
		// the connection it came on: the notice goes again on another.
		nerr = n.send(addr, to, notice, formatFlags(n.isLeaving(), false, false, true))
	}
	switch {
	case nerr != nil && strings.Contains(nerr.Error(), ErrServing.Error()):
		dropped := n.eng.NewView().DeleteSlot(s)
		n.slots[s].state.CompareAndSwap(moving, notMine)
		n.logf("warning", "cluster: slot %d: %s did not take a record of %d bytes (%v) and serves the slot already; dropped its %d keys here", s, addr, size, err, dropped)
		return true
	case nerr != nil:
		return false
	}
	n.mu.Lock()
	n.held[s] = heldSlot{owner: to, until: time.Now().Add(heldRetry)}
	n.nHeld.Store(int32(len(n.held)))
	n.mu.Unlock()
	n.slots[s].state.CompareAndSwap(moving, serving)
	n.logf("warning", "cluster: slot %d cannot move to %s, which did not take a record of %d bytes (%v); serving it here, and trying again in %v", s, addr, size, err, heldRetry)
	return true
}

// isLeaving reports whether Leave has begun.
func (n *Node) isLeaving() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leaving
}

// keepServing serves slots again after a hand-off that did not happen
// (stale slots stay stale).
func (n *Node) keepServing(slots []int) {
	for _, s := range slots {
		n.slots[s].state.CompareAndSwap(moving, serving)
	}
}

// send delivers one hand-off message, with its flag field, to the
// member to at addr.
func (n *Node) send(addr, to string, payload []byte, flag string) error {
	p := n.handoffClient(addr)
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	mac := n.sign(n.cfg.ID, to, ts, flag, payload)
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HandoffTimeout)
	defer cancel()
	return p.Do(ctx, "CLUSTER", "IMPORT", n.cfg.ID, to, ts, flag, payload, mac).Err()
}

// handoffClient returns the pool of hand-off links to the member at addr.
func (n *Node) handoffClient(addr string) *redis.Client {
	n.connsMu.Lock()
	p := n.handoffClients[addr]
	if p == nil {
		p = redis.NewClient(&redis.Options{
			Addr: addr, Protocol: 2, MaxRetries: -1,
			DialTimeout: n.cfg.HandoffTimeout, ReadTimeout: n.cfg.HandoffTimeout, WriteTimeout: n.cfg.HandoffTimeout,
			DisableIdentity: true, PoolSize: 2,
			// Every new connection is a link (link.go) before it is used;
			// the handshake needs the connection's TLS session, which
			// go-redis's OnConnect does not show, so it runs here.
			Dialer: func(context.Context, string, string) (net.Conn, error) {
				fc, err := n.openLink(addr)
				if err != nil {
					return nil, err
				}
				return fc.c, nil
			},
		})
		n.handoffClients[addr] = p
	}
	n.connsMu.Unlock()
	return p
}

// Import takes a hand-off message (CLUSTER IMPORT's arguments after
// IMPORT: from-id, to-id, unix-ms, flag, payload, mac), checks it as the
// comment on the message format (wire.go) describes, imports its records
// and serves its slots. It takes all of it or nothing. With the flag
// "restored" it imports only the records of keys it does not hold, and
// serves no slot for that.
func (n *Node) Import(args [][]byte) error {
	if len(args) == 3 {
		return n.importStream(args) // a replica stream's message (replicas.go)
	}
	now := time.Now()
	msg, err := n.parseMessage(args, now)
	if err != nil {
		return err
	}
	from, leaving, restored, sections := msg.from, msg.leaving, msg.restored, msg.sections
	more, held := msg.more, msg.held
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
	if n.agree != nil {
		// Under agreement, a node that does not see a majority takes
		// nothing, and one the majority removed meanwhile first lets go
		// of what it served (checkSelfAgreedLocked), so that a hand-off
		// it takes now is not dropped after.
		if _, _, ok := n.agree.agreed(); !ok || n.down.Load() {
			return fmt.Errorf("%w: this node sees no majority", ErrNotOwner)
		}
		n.checkSelfAgreedLocked()
	}
	// This node's own view may lag the sender's: check against the map of
	// the members as they are now.
	m := n.currentMapLocked(members)
	for _, sec := range sections {
		st := n.slots[sec.slot].state.Load()
		if msg.carry && m.OwnerID(sec.slot) == n.cfg.ID && (st == replica || st == notMine || st == stale) {
			// Not taken over yet here: the sender tries again.
			return fmt.Errorf("%w: slot %d not taken over yet", ErrNotOwner, sec.slot)
		}
		// Restored keys go only to a slot this node has taken up (serving,
		// or pending its hand-off), whose keys it keeps track of.
		if m.OwnerID(sec.slot) != n.cfg.ID || st == moving || restored && st != serving && st != pending {
			return fmt.Errorf("%w: slot %d", ErrNotOwner, sec.slot)
		}
		if held && st != pending && st != away {
			return fmt.Errorf("%w: slot %d", ErrServing, sec.slot)
		}
	}
	n.seenMACs[msg.mac] = msg.ms
	if held {
		// The sender keeps these slots: their clients go there.
		addr := net.JoinHostPort(sender.IP, strconv.Itoa(sender.Port))
		for _, sec := range sections {
			n.prevOwner[sec.slot] = from
			n.awayAddr[sec.slot].Store(&addr)
			n.slots[sec.slot].state.Store(away)
			n.logf("warning", "cluster: slot %d stays with %s, which could not hand it over", sec.slot, addr)
		}
		return nil
	}
	v := n.eng.NewView()
	keys := 0
	for i, sec := range sections {
		if msg.carry && (n.slots[sec.slot].state.Load() != pending || !n.awaitCarry[sec.slot] && n.prevOwner[sec.slot] != from) {
			// Served already, or waiting for another member's hand-off:
			// the copy is not needed. (A slot that waits for the hand-off
			// of the sender itself takes it: the sender held the slot only
			// as a replica, and will send nothing else.)
			continue
		}
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
		switch {
		case restored:
		case more && i == len(sections)-1:
			// The slot's keys go on in the next message: its hand-off
			// is under way, so its wait for one starts again (a slot of
			// many keys may take longer than PendingTimeout to arrive,
			// and must not be served half empty meanwhile).
			n.stateSince[sec.slot] = now
		default:
			delete(n.awaitCarry, sec.slot)
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
