package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
)

// Replicas (Config.Replicas, cluster-replicas R): every slot's state
// streams from its owner to R other members, so that a member that dies
// takes none of its limits with it.
//
// Placement. A slot's first replica is the member that owns it in the
// map computed without its owner: Assign(members less the owner). That is
// exactly the member agreement gives the slot to once the owner is
// removed, so the take-over needs no copy: the new owner serves the slot
// with the state it holds. The k-th replica is, likewise, the owner in
// the map without the owner and the k-1 replicas before it. Every member
// computes the same replicas from the same map.
//
// Subscription. A member that is a slot's replica (state replica) asks
// the owner for it (a "SUB" message on a link); the owner, if it serves
// the slot, sends a full copy of it (begin, the records, end: the replica
// empties the slot at the begin and counts it caught up at the end), then
// every change of it. The replica asks again when the owner changes, when
// the owner has sent nothing, not even its heartbeat, for replStaleAfter,
// or when a copy it asked for has not come in that time.
//
// Streaming. The owner turns the engine's change feed on (engine/feed.go)
// and drains it every replInterval (2 ms): each changed key of a slot it
// serves is encoded once per subscriber of that slot, and each
// subscriber's batch goes, in order, on one link of its own, pipelined;
// the replica applies the entries in order (a record replaces the key, a
// removal deletes it). A key changed many times between drains ships
// once, its state at the drain. The full copy is read on the same
// goroutine as the drains and queued on the same link, so each key's
// states reach the replica in the order they were read: the copy cannot
// overwrite a later change. A subscriber whose queue is full (it cannot
// keep up), or whose link fails, is sent every slot again, by full copy,
// once its link is back.
//
// Failover. When agreement removes a dead owner, its slots' new owners
// are their first replicas, which serve them at once with their copies
// (lost: the changes of the last replInterval or so that had not reached
// them). A member that comes back with its id waits, as any joiner, for
// the hand-offs of the members that took its slots, and those carry the
// state they served: it catches up before it serves. A restarted member
// whose absence nobody acted on gets its slots' state from their first
// replicas (identity.go's release, with the replica's copy) rather than
// serving them with what it restored.
//
// The stream rides the cluster links (link.go), authenticated by the
// cluster secret at the handshake; its messages are not signed one by one
// as hand-offs are, since they come a thousand times a second and the
// link's handshake already proved the peer.

// replInterval is how often an owner drains its changes to its replicas:
// the longest a change waits before it is sent, and so about what a crash
// loses. 2 ms rather than replication's 1 ms: every drain is a message
// each way per replica stream, and on a cluster of three serving
// unpipelined clients the streams' per-message cost at 1 ms took the
// processor ratio with one replica to 0.70 (0.76 at 2 ms; bench/RESULTS.md).
const replInterval = 2 * time.Millisecond

// replHeartbeat is the longest an owner's stream to a replica stays
// silent: an empty message goes after that.
const replHeartbeat = 500 * time.Millisecond

// carryWait is how long a member that took over a failed owner's slot
// without a complete copy of its state waits for a replica's copy
// (carryCopies) before it serves what it holds.
const carryWait = 2 * time.Second

// retiredKeep is how long a member that lost a slot's replica role keeps
// its copy at most, waiting for the owner to drop it once the new
// replicas have caught up: long enough to cover the owner failing in the
// meantime (two members failing together are removed within about one
// node timeout of each other), and bounded should the owner's drop be
// lost with a failing link.
func (n *Node) retiredKeep() time.Duration { return max(2*n.cfg.NodeTimeout, replStaleAfter) }

// replStaleAfter is how long a replica waits for a message from an owner
// it subscribed to (or for a copy it asked for) before it asks again.
const replStaleAfter = 3 * time.Second

// replQueue bounds a subscriber's queue, in messages.
const replQueue = 1024

// replCopyPerTick bounds the bytes of full copies one tick reads.
const replCopyPerTick = 1 << 20

// Entries of a replica stream message.
const (
	entWritten = 'W' // a record: the key's state
	entRemoved = 'R' // a key's length and bytes: it is gone
	entBegin   = 'B' // a slot: its full copy begins; the replica empties it
	entEnd     = 'E' // a slot: its full copy is complete
	entDrop    = 'U' // a slot: the owner no longer streams it
)

// replOut is the owner's stream to one replica.
type replOut struct {
	id   string
	addr string // the replica's link address

	slots   [engine.SlotCount / 64]uint64 // the slots subscribed (under repl.mu)
	nSlots  int                           // how many (under repl.mu)
	copies  []int                         // slots whose full copy is still to read (under repl.mu)
	buf     []byte                        // the entries of the tick being drained (under repl.mu)
	bufN    int64                         // how many entries buf holds
	bufEnds []int                         // the slots whose copies buf completes
	last    time.Time                     // when the last message was queued (under repl.mu)
	// A round of full copies under way (under repl.mu): when it began,
	// its slots and its bytes, for the log.
	copyAt            time.Time
	copySlots, copyBy int

	q      chan replMsg
	resync atomic.Bool  // the link came (back) up, or the queue overflowed: copy every slot again
	up     atomic.Bool  // the sender has a link: while it has none, nothing is queued
	qBytes atomic.Int64 // the bytes of the messages queued
	closed chan struct{}
	conn   atomic.Pointer[fwdConn] // the link, closed with closed so that a send under way ends

	queued, delivered atomic.Int64 // entries queued, and acknowledged by the replica
	// synced marks the slots whose full copy the replica has
	// acknowledged (atomic words: the sender sets them, the drain loop
	// clears them).
	synced  [engine.SlotCount / 64]atomic.Uint64
	lastAck atomic.Int64 // unix ns of the last acknowledged message
}

type replMsg struct {
	payload []byte
	entries int64
	ends    []int // the slots whose copies the message completes
}

// replMaxQueued bounds the bytes queued to one replica: past half of it
// no more full copies are read, past it the stream starts over (resync).
const replMaxQueued = 32 << 20

// unsync clears slot s's synced mark.
func (o *replOut) unsync(s int) { o.synced[s/64].And(^(uint64(1) << (s % 64))) }

// syncedCount counts the subscribed slots whose copy was acknowledged
// (under repl.mu).
func (o *replOut) syncedCount() int {
	c := 0
	for i := range o.slots {
		c += bits.OnesCount64(o.slots[i] & o.synced[i].Load())
	}
	return c
}

// close ends o's sender, and the send it has under way.
func (o *replOut) close() {
	close(o.closed)
	if fc := o.conn.Load(); fc != nil {
		fc.c.Close()
	}
}

func (o *replOut) has(s int) bool { return o.slots[s/64]&(1<<(s%64)) != 0 }

// replIn is what a replica knows of one owner's stream.
type replIn struct {
	last    atomic.Int64 // unix ns of the last message
	applied atomic.Int64 // entries applied
}

// replication is a node's replica streams, both ways.
type replication struct {
	mu       sync.Mutex
	outs     map[string]*replOut
	slotSubs [engine.SlotCount][]*replOut
	lastScan time.Time
	stopped  bool // the drain loop has ended: no stream starts any more

	inMu sync.Mutex
	ins  map[string]*replIn
	// batch is applyReplica's changes of one message, reused (under
	// Node.mu, which applyReplica holds).
	batch []engine.CopyChange

	wg sync.WaitGroup
}

// replicasLocked returns, for map m, each slot's replicas as indexes
// into m.Members, R arrays (-1: none), or nil with no replicas. It caches
// the result for m.
func (n *Node) replicasLocked(m *SlotMap) []*[engine.SlotCount]int16 {
	r := n.cfg.Replicas
	if r == 0 || len(m.Members) < 2 {
		return nil
	}
	if n.repFor == m {
		return n.repOf
	}
	// A slot's k-th replica is its owner in the map without the slot's
	// owner and its first k-1 replicas: one map per distinct set left
	// out, found by the set's member indexes, sorted.
	type exKey [MaxReplicas + 1]int16
	type subMap struct {
		m    *SlotMap
		back []int16 // index in m.Members of each of the subset map's members
	}
	maps := map[exKey]subMap{}
	ss := newSubsets(m)
	out := make([]*[engine.SlotCount]int16, r)
	for k := range out {
		out[k] = new([engine.SlotCount]int16)
		for s := range out[k] {
			out[k][s] = -1
		}
	}
	ex := make([]int16, 0, r+1)
	var last [MaxReplicas]subMap
	var lastKey [MaxReplicas]exKey
	for s := range engine.SlotCount {
		o := m.Owner[s]
		if o < 0 {
			continue
		}
		ex = append(ex[:0], o)
		for k := range r {
			if len(ex) >= len(m.Members) {
				break
			}
			var key exKey
			for i := range key {
				key[i] = -1 // unused places: never a member's index
			}
			copy(key[:], ex)
			slices.Sort(key[:len(ex)])
			// Neighbouring slots mostly share their owner and replicas.
			sm := last[k]
			if sm.m == nil || lastKey[k] != key {
				var ok bool
				if sm, ok = maps[key]; !ok {
					mp, back := ss.without(key[:len(ex)])
					sm = subMap{mp, back}
					maps[key] = sm
				}
				last[k], lastKey[k] = sm, key
			}
			so := sm.m.Owner[s]
			if so < 0 {
				break
			}
			out[k][s] = sm.back[so]
			ex = append(ex, sm.back[so])
		}
	}
	n.repFor, n.repOf = m, out
	return out
}

// isReplica reports whether member id is one of slot s's replicas in t.
func (t *routeTable) isReplica(s int, id string) bool {
	for _, rp := range t.rep {
		if i := rp[s]; i >= 0 && t.m.Members[i].ID == id {
			return true
		}
	}
	return false
}

// replicaIDs returns slot s's replicas' ids in t, first to last.
func (t *routeTable) replicaIDs(s int) []string {
	var out []string
	for _, rp := range t.rep {
		if i := rp[s]; i >= 0 {
			out = append(out, t.m.Members[i].ID)
		}
	}
	return out
}

// AcquireRead is Acquire for a command that changes nothing, on a
// connection that sent READONLY: a slot this node holds a caught-up
// replica's copy of is answered here too.
func (n *Node) AcquireRead(slot int) (commands.Route, string) {
	if n.down.Load() {
		return commands.RouteClusterDown, ""
	}
	sl := &n.slots[slot]
	if sl.state.Load() == replica && n.rsynced[slot].Load() {
		sl.inflight.Add(1)
		if sl.state.Load() == replica {
			return commands.RouteLocal, ""
		}
		sl.inflight.Add(-1)
	}
	return n.Acquire(slot)
}

// startReplication turns the change feed on and starts the drain loop.
func (n *Node) startReplication() {
	if n.cfg.Replicas == 0 {
		return
	}
	n.repl.outs = map[string]*replOut{}
	n.repl.ins = map[string]*replIn{}
	n.eng.SetFeed(true)
	n.repl.wg.Add(1)
	go n.replLoop()
}

// stopReplication ends the drain loop and the senders.
func (n *Node) stopReplication() {
	n.repl.wg.Wait()
}

func (n *Node) replLoop() {
	defer n.repl.wg.Done()
	t := time.NewTicker(replInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			n.repl.mu.Lock()
			n.repl.stopped = true
			for id, o := range n.repl.outs {
				o.close()
				delete(n.repl.outs, id)
			}
			n.repl.mu.Unlock()
			return
		case <-t.C:
		}
		n.replTick(time.Now())
	}
}

// replTick drains the feed to the subscribers, reads full copies, and,
// every 100 ms, drops the subscriptions that no longer hold.
func (n *Node) replTick(now time.Time) {
	rp := &n.repl
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if now.Sub(rp.lastScan) >= 100*time.Millisecond {
		rp.lastScan = now
		n.replScanLocked()
	}
	var own []int // shards flushed: this node's copies of others' slots there are gone
	for sh := 0; sh < n.eng.Shards(); sh++ {
		n.eng.DrainFeed(sh, func(r engine.Record, c engine.Change) {
			if c == engine.Flushed {
				own = append(own, sh)
				return
			}
			s := engine.Slot(r.Key)
			subs := rp.slotSubs[s]
			if len(subs) == 0 {
				return
			}
			if st := n.slots[s].state.Load(); st != serving && st != moving {
				return
			}
			for _, o := range subs {
				if c == engine.Removed {
					o.buf = append(o.buf, entRemoved)
					o.buf = binary.AppendUvarint(o.buf, uint64(len(r.Key)))
					o.buf = append(o.buf, r.Key...)
				} else {
					o.buf = append(o.buf, entWritten)
					o.buf = r.AppendBinary(o.buf)
				}
				o.bufN++
			}
		})
	}
	for _, sh := range own {
		n.replFlushedLocked(sh)
	}
	budget := replCopyPerTick
	for _, o := range rp.outs {
		if !o.up.Load() {
			// No link: what changes meanwhile goes with the full copies
			// sent once it is back.
			o.buf, o.bufN, o.bufEnds = o.buf[:0], 0, o.bufEnds[:0]
			continue
		}
		if o.resync.Swap(false) {
			o.copies = o.copies[:0]
			for s := range engine.SlotCount {
				if o.has(s) {
					o.copies = append(o.copies, s)
				}
				o.unsync(s)
			}
			o.buf, o.bufN, o.bufEnds = o.buf[:0], 0, o.bufEnds[:0]
		}
		// A queue half full waits for its link before more copies are
		// read: the copies of a busy stream are its back-pressure.
		for len(o.copies) > 0 && budget > 0 && len(o.q) < replQueue/2 && o.qBytes.Load() < replMaxQueued/2 {
			s := o.copies[0]
			o.copies = o.copies[1:]
			if !o.has(s) {
				continue
			}
			if o.copyAt.IsZero() {
				o.copyAt = now
			}
			o.copySlots++
			o.buf = append(o.buf, entBegin)
			o.buf = binary.AppendUvarint(o.buf, uint64(s))
			o.bufN++
			for _, r := range n.eng.NewView().ExportSlot(s) {
				start := len(o.buf)
				o.buf = append(o.buf, entWritten)
				o.buf = r.AppendBinary(o.buf)
				o.bufN++
				budget -= len(o.buf) - start
				o.copyBy += len(o.buf) - start
				if len(o.buf) >= n.chunk {
					n.replQueueLocked(o, now)
				}
			}
			o.buf = append(o.buf, entEnd)
			o.buf = binary.AppendUvarint(o.buf, uint64(s))
			o.bufN++
			o.bufEnds = append(o.bufEnds, s)
			if len(o.buf) >= n.chunk {
				n.replQueueLocked(o, now)
			}
		}
		if len(o.copies) == 0 && !o.copyAt.IsZero() {
			n.logf("notice", "cluster: full copy of %d slots for replica %s read in %v (%d bytes of records); streaming their changes",
				o.copySlots, o.id, now.Sub(o.copyAt).Round(time.Millisecond), o.copyBy)
			o.copyAt, o.copySlots, o.copyBy = time.Time{}, 0, 0
		}
		if len(o.buf) > 0 || now.Sub(o.last) >= replHeartbeat {
			n.replQueueLocked(o, now)
		}
	}
}

// replQueueLocked queues o's entries as one message (an empty one is a
// heartbeat); a full queue marks o for a full resync.
func (n *Node) replQueueLocked(o *replOut, now time.Time) {
	msg := replMsg{payload: append([]byte(nil), o.buf...), entries: o.bufN}
	if len(o.bufEnds) > 0 {
		msg.ends = append([]int(nil), o.bufEnds...)
	}
	o.buf, o.bufN, o.bufEnds, o.last = o.buf[:0], 0, o.bufEnds[:0], now
	if o.qBytes.Load()+int64(len(msg.payload)) > replMaxQueued {
		if !o.resync.Swap(true) {
			n.logf("warning", "cluster: the stream to replica %s is %d MiB behind; sending it every slot again", o.id, replMaxQueued>>20)
		}
		return
	}
	select {
	case o.q <- msg:
		o.queued.Add(msg.entries)
		o.qBytes.Add(int64(len(msg.payload)))
	default:
		if !o.resync.Swap(true) {
			n.logf("warning", "cluster: the stream to replica %s is %d messages behind; sending it every slot again", o.id, replQueue)
		}
	}
}

// replFlushedLocked handles the emptying of shard sh (FLUSHALL): the
// subscribers of its slots get them empty, and this node's own copies of
// others' slots there are asked for again.
func (n *Node) replFlushedLocked(sh int) {
	for s := range engine.SlotCount {
		if n.eng.ShardOf(s) != sh {
			continue
		}
		if st := n.slots[s].state.Load(); st == serving || st == moving {
			for _, o := range n.repl.slotSubs[s] {
				o.buf = append(o.buf, entBegin)
				o.buf = binary.AppendUvarint(o.buf, uint64(s))
				o.buf = append(o.buf, entEnd)
				o.buf = binary.AppendUvarint(o.buf, uint64(s))
				o.bufN += 2
			}
		}
		if n.slots[s].state.Load() == replica {
			n.rsynced[s].Store(false)
			n.rstale[s].Store(true)
		}
	}
}

// replScanLocked drops the subscriptions that no longer hold: of a slot
// this node does not serve, of a member that is gone, or that is no
// longer the slot's replica.
func (n *Node) replScanLocked() {
	t := n.routes.Load()
	for id, o := range n.repl.outs {
		if _, ok := t.members[id]; !ok {
			for s := range engine.SlotCount {
				if o.has(s) {
					n.replDropLocked(o, s, false)
				}
			}
			o.close()
			delete(n.repl.outs, id)
			n.logf("verbose", "cluster: stopped streaming to %s, gone", id)
		}
	}
	for s := range engine.SlotCount {
		subs := n.repl.slotSubs[s]
		if len(subs) == 0 {
			continue
		}
		st := n.slots[s].state.Load()
		for i := len(subs) - 1; i >= 0; i-- {
			o := subs[i]
			// A member no longer the slot's replica keeps its stream until
			// the new replicas have caught up: until then its copy is the
			// more complete one, should this node fail.
			if st != serving && st != moving || t.m.OwnerID(s) == n.cfg.ID && !t.isReplica(s, o.id) && n.replicasSyncedLocked(t, s) {
				n.replDropLocked(o, s, true)
			}
		}
	}
}

// replDropLocked ends o's subscription to slot s, telling it with tell.
func (n *Node) replDropLocked(o *replOut, s int, tell bool) {
	o.slots[s/64] &^= 1 << (s % 64)
	o.nSlots--
	o.unsync(s)
	subs := n.repl.slotSubs[s]
	for i, x := range subs {
		if x == o {
			n.repl.slotSubs[s] = append(subs[:i:i], subs[i+1:]...)
			break
		}
	}
	if tell {
		o.buf = append(o.buf, entDrop)
		o.buf = binary.AppendUvarint(o.buf, uint64(s))
		o.bufN++
	}
}

// subscribeFrom, on the owner, takes member from's subscription to slots:
// those it serves are copied to from, then streamed.
func (n *Node) subscribeFrom(from string, slots []int) error {
	if n.cfg.Replicas == 0 && n.repl.outs == nil {
		return errors.New("cluster: this node streams no replicas (cluster-replicas 0)")
	}
	md, ok := n.routes.Load().members[from]
	if !ok {
		return ErrUnknownPeer
	}
	n.stopWaitingFor(from, slots)
	rp := &n.repl
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.stopped {
		// Close has begun: a sender started now would never be stopped.
		return ErrClosed
	}
	o := rp.outs[from]
	if o == nil {
		o = &replOut{id: from, addr: n.linkAddr(md), q: make(chan replMsg, replQueue), closed: make(chan struct{})}
		rp.outs[from] = o
		rp.wg.Add(1)
		go n.replSend(o)
	}
	took := 0
	var seen [engine.SlotCount / 64]uint64
	for _, s := range slots {
		if seen[s/64]&(1<<(s%64)) != 0 {
			continue // asked twice in one message
		}
		seen[s/64] |= 1 << (s % 64)
		if st := n.slots[s].state.Load(); st != serving {
			// Not served here (yet): the replica asks again at its next
			// reconcile rather than after replStaleAfter.
			o.buf = append(o.buf, entDrop)
			o.buf = binary.AppendUvarint(o.buf, uint64(s))
			o.bufN++
			continue
		}
		if !o.has(s) {
			o.slots[s/64] |= 1 << (s % 64)
			o.nSlots++
			rp.slotSubs[s] = append(rp.slotSubs[s], o)
		}
		o.unsync(s)
		o.copies = append(o.copies, s)
		took++
	}
	n.logf("verbose", "cluster: %s subscribed to %d slots as their replica (%d asked)", from, took, len(slots))
	return nil
}

// stopWaitingFor ends the wait of the slots pending a hand-off from
// member from that from asks to copy as their replica: from holds them as
// a replica, not as their owner, so it will never hand them over. (A node
// back from a partition takes its previous owners from the map of the
// members without it, which may name a member that was cut off too and
// never served the slot; without this it waited until
// cluster-pending-timeout.) The slot is served with what this node holds;
// a hand-off from whichever member did serve it is still taken.
func (n *Node) stopWaitingFor(from string, slots []int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ended := 0
	for _, s := range slots {
		if s < 0 || s >= engine.SlotCount || n.prevOwner[s] != from || n.slots[s].state.Load() != pending || n.awaitCarry[s] {
			continue
		}
		n.slots[s].state.Store(serving)
		ended++
	}
	if ended > 0 {
		n.logf("notice", "cluster: %s, whose hand-off %d slots waited for, holds them as their replica: serving them", from, ended)
	}
}

// replSend sends o's messages, pipelined, on a link of its own. Each
// time it has a link anew (the first included) it empties the queue and
// has the drain loop copy every slot again, since what was queued for a
// link that failed may not have arrived.
func (n *Node) replSend(o *replOut) {
	defer n.repl.wg.Done()
	var fc *fwdConn
	defer func() {
		o.up.Store(false)
		if fc != nil {
			fc.c.Close()
		}
	}()
	var wire []byte
	var batch []replMsg
	backoff := 100 * time.Millisecond
	for {
		if fc == nil {
			var err error
			fc, err = n.openLink(o.addr)
			if err != nil {
				n.logf("verbose", "cluster: stream to replica %s: %v", o.id, err)
				select {
				case <-o.closed:
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			o.conn.Store(fc)
			select {
			case <-o.closed: // closed while it dialed
				return
			default:
			}
			n.replDrain(o)
			o.queued.Store(o.delivered.Load())
			o.resync.Store(true)
			o.up.Store(true)
		}
		var m replMsg
		select {
		case <-o.closed:
			return
		case m = <-o.q:
		}
		batch = append(batch[:0], m)
	more:
		for len(batch) < 64 {
			select {
			case m2 := <-o.q:
				batch = append(batch, m2)
			default:
				break more
			}
		}
		wire = wire[:0]
		for _, m := range batch {
			o.qBytes.Add(-int64(len(m.payload)))
			wire = appendCommand(wire, [][]byte{[]byte("CLUSTER"), []byte("IMPORT"), []byte("REPL"), []byte(n.cfg.ID), m.payload})
		}
		_ = fc.c.SetDeadline(time.Now().Add(n.cfg.HandoffTimeout))
		_, err := fc.c.Write(wire)
		for i := 0; err == nil && i < len(batch); i++ {
			var reply []byte
			reply, err = readReply(fc.r, nil)
			if err == nil && len(reply) > 0 && reply[0] == '-' {
				err = fmt.Errorf("%s", strings.TrimSpace(string(reply[1:])))
			}
			if err == nil {
				o.delivered.Add(batch[i].entries)
				for _, s := range batch[i].ends {
					o.synced[s/64].Or(uint64(1) << (s % 64))
				}
				o.lastAck.Store(time.Now().UnixNano())
			}
		}
		if err != nil {
			n.logf("verbose", "cluster: stream to replica %s: %v; copying its slots again", o.id, err)
			o.up.Store(false)
			fc.c.Close()
			fc = nil
		}
	}
}

// replDrain empties o's queue (its messages are replaced by full copies).
func (n *Node) replDrain(o *replOut) {
	for {
		select {
		case m := <-o.q:
			o.qBytes.Add(-int64(len(m.payload)))
		default:
			return
		}
	}
}

// applyReplica, on a replica, applies one stream message from owner
// from: entries of slots this node holds as from's replica (state
// replica, subscribed to from); the others are skipped.
func (n *Node) applyReplica(from string, payload []byte) error {
	n.repl.inMu.Lock()
	in := n.repl.ins[from]
	if in == nil {
		if n.repl.ins == nil {
			n.repl.inMu.Unlock()
			return errors.New("cluster: this node holds no replicas (cluster-replicas 0)")
		}
		in = &replIn{}
		n.repl.ins[from] = in
	}
	n.repl.inMu.Unlock()
	in.last.Store(time.Now().UnixNano())
	if len(payload) == 0 {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	mine := func(s int) bool {
		return n.slots[s].state.Load() == replica && n.rsub[s] == from
	}
	v := n.eng.NewView()
	var applied int64
	batch := n.repl.batch[:0]
	defer func() { n.repl.batch = batch[:0] }()
	// flush applies the records and removals read so far, in order, a
	// shard's lock once per run (engine's ApplyCopies).
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := v.ApplyCopies(batch)
		batch = batch[:0]
		return err
	}
	for b := payload; len(b) > 0; {
		kind := b[0]
		b = b[1:]
		switch kind {
		case entWritten:
			r, w, err := engine.DecodeRecord(b)
			if err != nil {
				return ErrBadHandoff
			}
			b = b[w:]
			if mine(engine.Slot(r.Key)) {
				batch = append(batch, engine.CopyChange{Record: r})
			}
		case entRemoved:
			l, w := binary.Uvarint(b)
			if w <= 0 || l > uint64(len(b)-w) {
				return ErrBadHandoff
			}
			key := b[w : w+int(l)]
			b = b[w+int(l):]
			if mine(engine.Slot(key)) {
				batch = append(batch, engine.CopyChange{Record: engine.Record{Key: key}, Gone: true})
			}
		case entBegin, entEnd, entDrop:
			s, w := binary.Uvarint(b)
			if w <= 0 || s >= engine.SlotCount {
				return ErrBadHandoff
			}
			b = b[w:]
			if !mine(int(s)) {
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			switch kind {
			case entBegin:
				n.rsynced[s].Store(false)
				v.DeleteSlot(int(s))
			case entEnd:
				n.rsynced[s].Store(true)
				n.rstale[s].Store(false)
			case entDrop:
				n.rsynced[s].Store(false)
				n.rsub[s] = ""
			}
		default:
			return ErrBadHandoff
		}
		applied++
	}
	if err := flush(); err != nil {
		return err
	}
	in.applied.Add(applied)
	return nil
}

// subscribe, on a replica, asks each owner for the slots this node holds
// as their replica and has not subscribed to (or whose stream went
// silent, or whose copy did not come).
func (n *Node) subscribe() {
	if n.cfg.Replicas == 0 {
		return
	}
	now := time.Now()
	t := n.routes.Load()
	want := map[string][]int{}
	n.mu.Lock()
	for s := range n.slots {
		if n.slots[s].state.Load() != replica {
			continue
		}
		o := t.m.OwnerID(s)
		if o == "" || o == n.cfg.ID {
			continue
		}
		if r := n.rsub[s]; r != "" && r != o && n.rsynced[s].Load() {
			if _, ok := t.members[r]; ok {
				continue // kept for the owner it came from (planHandoffs)
			}
		}
		if n.rsub[s] == o && !n.rstale[s].Load() {
			if n.rsynced[s].Load() || now.Sub(n.rsubAt[s]) < replStaleAfter {
				continue
			}
		}
		want[o] = append(want[o], s)
		n.rsub[s], n.rsubAt[s] = o, now
		n.rstale[s].Store(false)
	}
	n.mu.Unlock()
	for o, slots := range want {
		md, ok := t.members[o]
		if !ok {
			continue
		}
		var payload []byte
		for _, s := range slots {
			payload = binary.AppendUvarint(payload, uint64(s))
		}
		if err := n.sendSub(n.linkAddr(md), payload); err != nil {
			n.logf("verbose", "cluster: asking %s for %d slots as their replica: %v; asking again", o, len(slots), err)
			n.mu.Lock()
			for _, s := range slots {
				if n.rsub[s] == o {
					n.rsub[s] = ""
				}
			}
			n.mu.Unlock()
		}
	}
}

// sendSub sends a subscription on the hand-off links' pool.
func (n *Node) sendSub(addr string, payload []byte) error {
	p := n.handoffClient(addr)
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HandoffTimeout)
	defer cancel()
	return p.Do(ctx, "CLUSTER", "IMPORT", "SUB", n.cfg.ID, payload).Err()
}

// importStream takes CLUSTER IMPORT REPL and SUB messages (args after
// IMPORT): REPL from-id payload, SUB from-id slots.
func (n *Node) importStream(args [][]byte) error {
	if len(args) != 3 {
		return ErrBadHandoff
	}
	from := string(args[1])
	switch strings.ToUpper(string(args[0])) {
	case "REPL":
		return n.applyReplica(from, args[2])
	case "SUB":
		var slots []int
		for b := args[2]; len(b) > 0; {
			s, w := binary.Uvarint(b)
			if w <= 0 || s >= engine.SlotCount {
				return ErrBadHandoff
			}
			slots = append(slots, int(s))
			b = b[w:]
		}
		return n.subscribeFrom(from, slots)
	}
	return ErrBadHandoff
}

// replicaStats fills top's replication fields.
func (n *Node) replicaStats(top *commands.ClusterTopology) {
	top.Replicas = n.cfg.Replicas
	if n.cfg.Replicas == 0 {
		return
	}
	now := time.Now().UnixNano()
	for s := range n.slots {
		if n.slots[s].state.Load() == replica {
			if n.rsynced[s].Load() {
				top.ReplicaSlots++
			} else {
				top.ReplicaSlotsSyncing++
			}
		}
	}
	n.repl.mu.Lock()
	for id, o := range n.repl.outs {
		st := commands.ReplicaStream{ID: id, Slots: o.nSlots, Synced: o.syncedCount(),
			Offset: o.delivered.Load(), Lag: max(0, o.queued.Load()-o.delivered.Load()+o.bufN)}
		if l := o.lastAck.Load(); l > 0 {
			st.LastMs = (now - l) / 1e6
		} else {
			st.LastMs = -1
		}
		top.ReplOut = append(top.ReplOut, st)
	}
	n.repl.mu.Unlock()
	sort.Slice(top.ReplOut, func(i, j int) bool { return top.ReplOut[i].ID < top.ReplOut[j].ID })
	counts := map[string][2]int{}
	t := n.routes.Load()
	for s := range n.slots {
		if n.slots[s].state.Load() == replica {
			o := t.m.OwnerID(s)
			c := counts[o]
			c[0]++
			if n.rsynced[s].Load() {
				c[1]++
			}
			counts[o] = c
		}
	}
	n.repl.inMu.Lock()
	for id, in := range n.repl.ins {
		c := counts[id]
		if c[0] == 0 {
			continue
		}
		st := commands.ReplicaStream{ID: id, Slots: c[0], Synced: c[1], Offset: in.applied.Load(), LastMs: (now - in.last.Load()) / 1e6}
		top.ReplIn = append(top.ReplIn, st)
	}
	n.repl.inMu.Unlock()
	sort.Slice(top.ReplIn, func(i, j int) bool { return top.ReplIn[i].ID < top.ReplIn[j].ID })
}

// sendCopies sends member to, at addr, this node's replica copies of
// slots as a hand-off (records replace the receiver's keys, and it serves
// the slots), in messages of at most the hand-off chunk.
func (n *Node) sendCopies(addr, to string, slots []int, carry bool) error {
	v := n.eng.NewView()
	var payload, sec, enc []byte
	secN := 0
	flush := func(s int) error {
		more := secN > 0
		msg := payload
		if more {
			msg = appendSection(msg, s, secN, sec)
		}
		flag := formatFlags(n.isLeaving(), false, more, false)
		if carry && flag == "-" {
			flag = flagCarry
		} else if carry {
			flag += "," + flagCarry
		}
		if err := n.send(addr, to, msg, flag); err != nil {
			return err
		}
		payload, sec, secN = payload[:0], sec[:0], 0
		return nil
	}
	for _, s := range slots {
		for _, r := range v.ExportSlot(s) {
			enc = r.AppendBinary(enc[:0])
			if len(payload)+len(sec)+len(enc) > n.chunk && (len(payload) > 0 || secN > 0) {
				if err := flush(s); err != nil {
					return err
				}
			}
			sec = append(sec, enc...)
			secN++
		}
		payload = appendSection(payload, s, secN, sec)
		sec, secN = sec[:0], 0
	}
	if len(payload) > 0 {
		return flush(-1)
	}
	return nil
}

// replicasSyncedLocked reports whether every replica of slot s in t has
// this node's full copy of it.
func (n *Node) replicasSyncedLocked(t *routeTable, s int) bool {
	for _, id := range t.replicaIDs(s) {
		o := n.repl.outs[id]
		if o == nil || !o.has(s) || o.synced[s/64].Load()&(1<<(s%64)) == 0 {
			return false
		}
	}
	return true
}

// carryCopies sends member to this node's copies of slots whose owner
// failed and that to took over (flag carry): to takes them only where it
// waits for one, having held less (planHandoffs, carryWait), and ignores
// the others. Once delivered, a copy this node is still a replica of is
// asked for again from to; the others are dropped. A delivery that fails
// is tried again at the next reconcile, up to carryWait.
func (n *Node) carryCopies(to string, slots []int) {
	md, ok := n.routes.Load().members[to]
	if !ok {
		return
	}
	if err := n.sendCopies(n.linkAddr(md), to, slots, true); err != nil {
		n.logf("verbose", "cluster: sending %s the copies of %d slots it took over from their failed owner: %v; retrying", to, len(slots), err)
		return
	}
	t := n.routes.Load()
	n.mu.Lock()
	for _, s := range slots {
		if c, ok := n.carries[s]; !ok || c.to != to {
			continue
		}
		delete(n.carries, s)
		if n.slots[s].state.Load() != replica {
			continue
		}
		n.rsub[s] = ""
		n.rsynced[s].Store(false)
		if !t.isReplica(s, n.cfg.ID) {
			n.eng.NewView().DeleteSlot(s)
			n.slots[s].state.Store(notMine)
		}
	}
	n.mu.Unlock()
	n.logf("verbose", "cluster: sent %s the copies of %d slots it took over from their failed owner", to, len(slots))
}
