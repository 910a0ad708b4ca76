package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// agreedMember is a member of the set a majority agreed on: how to reach
// it, its weight, and the Raft index at which it was (last) added.
type agreedMember struct {
	IP      string  `json:"ip"`
	Port    int     `json:"port"`
	BusPort int     `json:"bus"`
	TLSPort int     `json:"tls,omitempty"`
	Weight  float64 `json:"w"`
	AddedAt uint64  `json:"added"`
}

// raftAddr is a member's Raft address: its gossip address, which Dial
// reaches, then what the slot map needs of it. Raft keeps the address in
// its configuration, so the configuration alone is the agreed member set.
func raftAddr(m agreedMember) raft.ServerAddress {
	return raft.ServerAddress(fmt.Sprintf("%s|%d|%d|%s|%d", net.JoinHostPort(m.IP, strconv.Itoa(m.BusPort)),
		m.Port, m.TLSPort, strconv.FormatFloat(m.Weight, 'g', -1, 64), m.AddedAt))
}

// parseRaftAddr reads what raftAddr wrote.
func parseRaftAddr(a raft.ServerAddress) (agreedMember, bool) {
	f := strings.Split(string(a), "|")
	if len(f) != 5 {
		return agreedMember{}, false
	}
	host, bus, err := net.SplitHostPort(f[0])
	if err != nil {
		return agreedMember{}, false
	}
	var m agreedMember
	var e [4]error
	m.IP = host
	m.BusPort, e[0] = strconv.Atoi(bus)
	m.Port, e[1] = strconv.Atoi(f[1])
	m.TLSPort, e[2] = strconv.Atoi(f[2])
	m.Weight, e[3] = strconv.ParseFloat(f[3], 64)
	added, err := strconv.ParseUint(f[4], 10, 64)
	if e[0] != nil || e[1] != nil || e[2] != nil || e[3] != nil || err != nil {
		return agreedMember{}, false
	}
	m.AddedAt = added
	return m, true
}

// sameAs reports whether md gossips what m agreed.
func (m agreedMember) sameAs(md memberMeta) bool {
	return m.IP == md.IP && m.Port == md.Port && m.BusPort == md.BusPort && m.TLSPort == md.TLSPort && m.Weight == md.Weight
}

func (m agreedMember) meta() memberMeta {
	return memberMeta{IP: m.IP, Port: m.Port, BusPort: m.BusPort, TLSPort: m.TLSPort, Weight: m.Weight}
}

// agreement is the member set a majority of the members agreed on, in
// Raft (github.com/hashicorp/raft): Raft's configuration is the set, one
// voter per member, and its index the epoch. The leader keeps the set in
// line with gossip: it adds a member gossip reports, removes one that
// left cleanly at once, and one that failed once neither gossip nor Raft
// has reached it for NodeTimeout (and it has led for that long). Every
// node also watches whether it sees a majority: a leader that a quorum
// acknowledged (VerifyLeader), a follower that heard from its leader;
// past NodeTimeout without, the node is down (Node.down). See doc.go for
// why this holds the guarantees.
type agreement struct {
	n     *Node
	hb    time.Duration // Raft's heartbeat and election timeout
	lease time.Duration // Raft's leader lease
	key   []byte        // the Raft streams' HMAC key

	rmu   sync.Mutex // guards r, layer, trans: reset replaces them
	r     *raft.Raft
	layer *raftLayer
	trans *raft.NetworkTransport
	obs   *raft.Observer
	obsCh chan raft.Observation

	mu      sync.Mutex // guards the agreed set
	have    bool       // a configuration has been committed
	index   uint64     // its Raft index: the epoch
	members map[string]agreedMember

	lastOK    atomic.Int64 // Unix ns when this node last saw a majority
	verifying atomic.Bool
	reset     atomic.Bool // met: drop this node's lone configuration and wait to be added
	// bootstrapped is set while this node's Raft is one it bootstrapped
	// alone, rather than one it was added to.
	bootstrapped atomic.Bool

	// Owned by loop: the leader's view of the members it cannot reach.
	leaderSince time.Time
	lastTick    time.Time // when this leader last appended a tick
	lastRejoin  time.Time
	rejoining   atomic.Bool
	failed      map[string]time.Time // member -> Raft's last contact with it, while its heartbeats fail
	removed     map[string]time.Time // member -> when this leader removed it as failed

	stop chan struct{}
	wg   sync.WaitGroup

	// Traffic of Raft's streams, for measurements: writes and bytes.
	msgs, bytes atomic.Int64
}

// raftTimeouts derives Raft's heartbeat (and election) timeout and its
// leader lease from the node timeout: a fifth of it, at most Raft's
// default of 1 s and at least 50 ms, and a lease of half that.
func raftTimeouts(nodeTimeout time.Duration) (hb, lease time.Duration) {
	hb = min(max(nodeTimeout/5, 50*time.Millisecond), time.Second)
	return hb, hb / 2
}

func newAgreement(n *Node, key []byte) *agreement {
	hb, lease := raftTimeouts(n.cfg.NodeTimeout)
	a := &agreement{n: n, hb: hb, lease: lease, key: key, members: map[string]agreedMember{},
		failed: map[string]time.Time{}, removed: map[string]time.Time{}, stop: make(chan struct{})}
	a.lastOK.Store(time.Now().UnixNano())
	return a
}

// start starts Raft on tr's streams, with no configuration: the node
// waits to be added, unless bootstrap makes it a cluster of one.
func (a *agreement) start(tr *limitedTransport) error {
	n := a.n
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = a.hb, a.hb, a.lease
	rc.CommitTimeout = min(50*time.Millisecond, a.hb/4)
	rc.NoLegacyTelemetry = true
	// A node the majority removed (partitioned away) keeps its Raft, so
	// that it is added again, and catches up, when it is back.
	rc.ShutdownOnRemove = false
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: raftLogWriter{n}})
	self := net.JoinHostPort(n.cfg.IP, strconv.Itoa(n.cfg.BusPort))
	layer := newRaftLayer(tr, a.key, self, n.cfg.GossipMaxStreams)
	layer.count = a.count
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, MaxPool: 2,
		Timeout: max(2*time.Second, 4*a.hb), Logger: rc.Logger})
	store := raft.NewInmemStore()
	r, err := raft.NewRaft(rc, (*agreedFSM)(a), store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		_ = trans.Close()
		return fmt.Errorf("cluster: raft: %w", err)
	}
	a.obsCh = make(chan raft.Observation, 256)
	a.obs = raft.NewObserver(a.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(a.obs)
	a.rmu.Lock()
	a.r, a.layer, a.trans = r, layer, trans
	a.rmu.Unlock()
	tr.raft.Store(layer)
	return nil
}

// bootstrap makes this node a cluster of one: a node that joined no one
// (a lone first node), whose Raft has no state yet.
func (a *agreement) bootstrap() {
	n := a.n
	a.bootstrapped.Store(true)
	me := agreedMember{IP: n.cfg.IP, Port: n.cfg.Port, BusPort: n.cfg.BusPort, TLSPort: n.cfg.TLSPort, Weight: n.cfg.Weight, AddedAt: 1}
	f := a.raft().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(n.cfg.ID), Address: raftAddr(me)}}})
	if err := f.Error(); err != nil {
		n.logf("warning", "cluster: raft bootstrap: %v", err)
	}
}

// count adds one write of b bytes to the traffic counters.
func (a *agreement) count(b int) {
	a.msgs.Add(1)
	a.bytes.Add(int64(b))
}

func (a *agreement) raft() *raft.Raft {
	a.rmu.Lock()
	defer a.rmu.Unlock()
	return a.r
}

// run starts the loop.
func (a *agreement) run() {
	a.wg.Add(1)
	go a.loop()
}

// close stops the loop and Raft.
func (a *agreement) close() {
	select {
	case <-a.stop:
		return
	default:
	}
	close(a.stop)
	a.wg.Wait()
	a.shutdownRaft()
}

func (a *agreement) shutdownRaft() {
	a.rmu.Lock()
	r, layer, trans := a.r, a.layer, a.trans
	a.r = nil
	a.rmu.Unlock()
	if r == nil {
		return
	}
	r.DeregisterObserver(a.obs)
	_ = r.Shutdown().Error()
	_ = trans.Close()
	_ = layer.Close()
}

// tick is how often loop checks the majority and, on the leader, the set.
func (a *agreement) tick() time.Duration { return max(a.hb/4, 10*time.Millisecond) }

func (a *agreement) loop() {
	defer a.wg.Done()
	t := time.NewTicker(a.tick())
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case o := <-a.obsCh:
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				a.failed[string(d.PeerID)] = d.LastContact
			case raft.ResumedHeartbeatObservation:
				delete(a.failed, string(d.PeerID))
			}
			continue
		case <-t.C:
		}
		if a.reset.Swap(false) {
			a.restart()
		}
		r := a.raft()
		if r == nil {
			continue
		}
		a.watchMajority(r)
		a.manage(r)
		a.rejoin()
	}
}

// restart drops this node's Raft state and starts again unbootstrapped,
// to be added by the leader of the cluster it met.
func (a *agreement) restart() {
	a.shutdownRaft()
	a.bootstrapped.Store(false)
	a.mu.Lock()
	a.have, a.index, a.members = false, 0, map[string]agreedMember{}
	a.mu.Unlock()
	// The log replays from its start, through sets without this node:
	// they are not its removal.
	a.n.mu.Lock()
	a.n.selfAddedAt = 0
	a.n.mu.Unlock()
	if err := a.start(a.n.gossipTr); err != nil {
		a.n.logf("warning", "%v", err)
	}
	a.n.logf("notice", "cluster: dropped this node's own agreement; waiting to be added to the cluster it met")
}

// watchMajority records when this node last saw a majority and sets
// Node.down past NodeTimeout without.
func (a *agreement) watchMajority(r *raft.Raft) {
	now := time.Now()
	switch r.State() {
	case raft.Leader:
		if !a.verifying.Swap(true) {
			go func() {
				defer a.verifying.Store(false)
				t := time.Now()
				if r.VerifyLeader().Error() == nil {
					a.seen(t)
				}
			}()
		}
	}
	// A follower sees a majority through the leader's ticks it applies
	// (agreedFSM.Apply), not through Raft's heartbeats: a node back from
	// a partition hears heartbeats before it has applied the entries it
	// missed (its removal among them), and must not serve meanwhile.
	down := a.n.cfg.RequireMajority && !a.n.isLeaving() && now.Sub(time.Unix(0, a.lastOK.Load())) > a.n.cfg.NodeTimeout
	if a.n.down.Swap(down) != down {
		if down {
			a.n.logf("warning", "cluster: no majority of the members seen for %v: answering CLUSTERDOWN", a.n.cfg.NodeTimeout)
		} else {
			a.n.logf("notice", "cluster: a majority of the members seen again: serving")
		}
		a.n.poke()
	}
}

// tickEvery is how often the leader commits a tick: a quarter of the node
// timeout, so that a follower applies one well within it.
func (a *agreement) tickEvery() time.Duration { return a.n.cfg.NodeTimeout / 4 }

// seen raises lastOK to t.
func (a *agreement) seen(t time.Time) {
	v := t.UnixNano()
	for {
		old := a.lastOK.Load()
		if v <= old || a.lastOK.CompareAndSwap(old, v) {
			return
		}
	}
}

// manage, on the leader, brings the agreed set in line with gossip: live
// members (not leaving) are added, or their entry updated, one that left
// cleanly is removed, and one that failed is removed once unreachable for
// NodeTimeout, by gossip and by Raft, under a leader that has led for
// NodeTimeout and twice the lease.
func (a *agreement) manage(r *raft.Raft) {
	if r.State() != raft.Leader {
		a.leaderSince = time.Time{}
		return
	}
	now := time.Now()
	if a.leaderSince.IsZero() {
		a.leaderSince = now
	}
	if now.Sub(a.lastTick) >= a.tickEvery() {
		a.lastTick = now
		r.Apply(tickEntry, a.n.cfg.NodeTimeout) // its future is not waited for
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return
	}
	in := map[string]agreedMember{}
	for _, s := range f.Configuration().Servers {
		if m, ok := parseRaftAddr(s.Address); ok {
			in[string(s.ID)] = m
		}
	}
	live, left := a.n.gossipView()
	timeout := max(2*time.Second, 4*a.hb)
	for id, md := range live {
		if md.Leaving {
			// A leaving member consents to its removal, which must come
			// while it is here to count: a cluster of two whose leaving
			// member went first would have no majority left.
			if _, ok := in[id]; ok && len(in) > 1 {
				if err := r.RemoveServer(raft.ServerID(id), 0, timeout).Error(); err != nil {
					a.n.logf("verbose", "cluster: removing %s, leaving, from the agreed members: %v", id, err)
					return
				}
				a.n.logf("notice", "cluster: %s leaving: removed from the agreed members", id)
				if id == a.n.cfg.ID {
					return // no longer the leader
				}
			}
			continue
		}
		cur, ok := in[id]
		if ok && cur.sameAs(md) {
			continue
		}
		if a.reset.Load() {
			return // met an older cluster: this Raft is about to go
		}
		if !ok && len(in) == 1 && a.olderThanMe(md) {
			// A cluster of one does not take in an older node: it joins
			// that node's cluster instead (met), or, holding keys, stays
			// apart.
			continue
		}
		if at, gone := a.removed[id]; !ok && gone {
			// Removed as failed, and gossip, slower, may still report it:
			// it comes back once its Raft stream answers, tried every
			// rejoinInterval.
			if now.Sub(at) < rejoinInterval || !a.reachable(md) {
				continue
			}
			a.removed[id] = now
		}
		delete(a.removed, id)
		am := agreedMember{IP: md.IP, Port: md.Port, BusPort: md.BusPort, TLSPort: md.TLSPort, Weight: md.Weight, AddedAt: cur.AddedAt}
		if !ok {
			am.AddedAt = r.LastIndex() + 1
		}
		if err := r.AddVoter(raft.ServerID(id), raftAddr(am), 0, timeout).Error(); err != nil {
			a.n.logf("verbose", "cluster: adding %s to the agreed members: %v", id, err)
			return
		}
		a.n.logf("notice", "cluster: %s agreed as a member", id)
	}
	for id, am := range in {
		if id == a.n.cfg.ID {
			continue
		}
		_, isLive := live[id]
		why := ""
		if left[id] && !isLive {
			why = "left"
		} else if lc, ok := a.failed[id]; ok && now.Sub(lc) > a.n.cfg.NodeTimeout+2*a.hb && now.Sub(a.leaderSince) > a.n.cfg.NodeTimeout+2*a.lease {
			// Raft has not reached it for the node timeout, whatever
			// gossip says (memberlist may take longer to declare it dead):
			// it has stopped serving by now (watchMajority).
			why = "failed"
			if a.reachable(am.meta()) {
				// Back (a partition healed) before its heartbeats said
				// so: a member reached now may have applied a recent
				// tick, and would serve until it noticed its removal.
				continue
			}
		}
		if why == "" {
			continue
		}
		if err := r.RemoveServer(raft.ServerID(id), 0, timeout).Error(); err != nil {
			a.n.logf("verbose", "cluster: removing %s from the agreed members: %v", id, err)
			return
		}
		delete(a.failed, id)
		a.removed[id] = now
		a.n.logf("notice", "cluster: %s %s: removed from the agreed members", id, why)
	}
}

// awaitRemoval, on a node whose Leave has handed every slot over, waits
// until the agreed set no longer holds it, at most until deadline or for
// the node timeout: a leaving member consents to its removal, which must
// be in the log while it is here to count (the survivors of a cluster of
// two would otherwise hold a configuration of two with one gone, and no
// majority). The removal is there once this node's latest configuration,
// which the leader sends the removed member before it stops replicating
// to it, leaves it out, and this node is not the leader: a leader removing
// itself steps down once the others committed it.
func (a *agreement) awaitRemoval(deadline time.Time) {
	if d := time.Now().Add(a.n.cfg.NodeTimeout); d.Before(deadline) {
		deadline = d
	}
	for {
		r := a.raft()
		if r == nil {
			return
		}
		out := r.State() != raft.Leader
		if f := r.GetConfiguration(); out && f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				if string(s.ID) == a.n.cfg.ID {
					out = false
				}
			}
		}
		if out {
			return
		}
		if time.Now().After(deadline) || a.n.stopping() {
			a.n.logf("warning", "cluster: leaving before the agreed set has dropped this node")
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rejoin, every rejoinInterval, joins the gossip of the agreed members
// gossip does not report live (and that did not leave): after a
// partition heals, memberlist does not look again for the members it
// declared dead, and the side that was removed comes back this way.
func (a *agreement) rejoin() {
	if time.Since(a.lastRejoin) < rejoinInterval || a.rejoining.Load() {
		return
	}
	a.lastRejoin = time.Now()
	agreed, _, _ := a.agreed()
	live, left := a.n.gossipView()
	var addrs []string
	for id, am := range agreed {
		if _, ok := live[id]; !ok && !left[id] {
			addrs = append(addrs, net.JoinHostPort(am.IP, strconv.Itoa(am.BusPort)))
		}
	}
	if len(addrs) == 0 {
		return
	}
	a.rejoining.Store(true)
	go func() {
		defer a.rejoining.Store(false)
		if k, err := a.n.ml.Join(addrs); k > 0 {
			a.n.logf("verbose", "cluster: rejoined %d agreed members", k)
		} else if err != nil {
			a.n.logf("debug", "cluster: rejoining agreed members: %v", err)
		}
	}()
}

// olderThanMe reports whether md's node started before this one (met's
// order).
func (a *agreement) olderThanMe(md memberMeta) bool {
	a.n.gossipedMu.Lock()
	me := a.n.selfMeta.Started
	a.n.gossipedMu.Unlock()
	return md.Started < me
}

// reachable reports whether a Raft stream to md opens (its handshake
// done) within the heartbeat timeout.
func (a *agreement) reachable(md memberMeta) bool {
	a.rmu.Lock()
	l := a.layer
	a.rmu.Unlock()
	c, err := l.Dial(raftAddr(agreedMember{IP: md.IP, BusPort: md.BusPort}), a.hb)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// agreed returns the agreed set and its epoch; ok is false until a
// configuration has been committed.
func (a *agreement) agreed() (members map[string]agreedMember, epoch uint64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.members, a.index, a.have
}

// agreedFSM is agreement as Raft's FSM. The log carries configurations
// only, which Raft hands to StoreConfiguration once committed; a snapshot
// is the agreed set.
type agreedFSM agreement

var _ raft.ConfigurationStore = (*agreedFSM)(nil)

// tickEntry is the leader's tick: a log entry committed every
// tickEvery. A node that applies one appended (by the leader's clock)
// at t has seen a majority at t, and has applied every entry before it,
// configurations included.
var tickEntry = []byte("tick")

func (f *agreedFSM) Apply(l *raft.Log) any {
	if l.Type == raft.LogCommand && string(l.Data) == string(tickEntry) && !l.AppendedAt.IsZero() {
		t := l.AppendedAt
		if now := time.Now(); t.After(now) {
			t = now // a leader's clock ahead of this node's
		}
		(*agreement)(f).seen(t)
	}
	return nil
}

func (f *agreedFSM) StoreConfiguration(index uint64, c raft.Configuration) {
	ms := map[string]agreedMember{}
	for _, s := range c.Servers {
		if m, ok := parseRaftAddr(s.Address); ok && s.Suffrage == raft.Voter {
			ms[string(s.ID)] = m
		}
	}
	f.set(index, ms)
}

func (f *agreedFSM) set(index uint64, ms map[string]agreedMember) {
	f.mu.Lock()
	was := f.members
	f.mu.Unlock()
	// The flags first: a member the majority removed is fail before its
	// slots are seen to move.
	f.n.healthAgreed(was, ms)
	f.mu.Lock()
	f.members, f.index, f.have = ms, index, true
	f.mu.Unlock()
	// A node the majority removed lets go of its slots now, before it
	// applies any later tick, which could let it serve them again.
	n := f.n
	n.mu.Lock()
	if n.eng != nil {
		n.checkSelfAgreedLocked()
	}
	n.mu.Unlock()
	n.poke()
}

// agreedSnapshot is what a snapshot holds.
type agreedSnapshot struct {
	Index   uint64                  `json:"index"`
	Members map[string]agreedMember `json:"members"`
}

func (f *agreedFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return agreedSnapshot{Index: f.index, Members: f.members}, nil // members is replaced whole, never changed
}

func (f *agreedFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s agreedSnapshot
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return err
	}
	if s.Members != nil {
		f.set(s.Index, s.Members)
	}
	return nil
}

func (s agreedSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (agreedSnapshot) Release() {}

// checkSelfAgreedLocked compares the agreed set's entry for this node with
// the one it served under: when the majority removed this node (it was
// partitioned away, or down, past the node timeout), the others own its
// slots and what it holds of them is older than theirs. Its slots then
// become stale (their keys go to the owners as restored copies, taken
// only where the owner holds none) or notMine, and the agreed others are
// the previous owners it waits for: it catches up as a joiner does.
func (n *Node) checkSelfAgreedLocked() {
	agreed, _, _ := n.agree.agreed()
	am, in := agreed[n.cfg.ID]
	if n.leaving {
		return // its removal is its own doing; it hands its slots over
	}
	if n.selfAddedAt != 0 && (!in || am.AddedAt != n.selfAddedAt) {
		now, dropped := time.Now(), 0
		for s := range n.slots {
			sl := &n.slots[s]
			switch sl.state.Load() {
			case serving, moving, pending, away:
				dropped++
				if n.eng.NewView().CountKeysInSlot(s) > 0 {
					sl.state.Store(stale)
					n.stateSince[s] = now
				} else {
					sl.state.Store(notMine)
				}
			}
		}
		clear(n.held)
		n.nHeld.Store(0)
		n.prevFromMembers = true
		if dropped > 0 { // none on a node that restarted, replaying the log
			n.logf("warning", "cluster: the majority removed this node meanwhile; its %d slots are stale, and it waits for their owners", dropped)
		}
	}
	n.selfAddedAt = 0
	if in {
		n.selfAddedAt = am.AddedAt
	}
}

// waitsForLocked reports whether a slot gained from h waits for h's
// hand-off: h is live, and, under agreement, still agreed or leaving. A
// member the majority removed as failed has stopped serving and sends
// nothing (it is down), though gossip may report it a while longer.
func (n *Node) waitsForLocked(members map[string]memberMeta, h string) bool {
	md, alive := members[h]
	if !alive || n.agree == nil {
		return alive
	}
	agreed, _, _ := n.agree.agreed()
	_, in := agreed[h]
	return in || md.Leaving || n.leavers[h]
}

// raftLogWriter sends Raft's log lines (warnings and errors) to
// Config.Logf at debug level.
type raftLogWriter struct{ n *Node }

func (w raftLogWriter) Write(b []byte) (int, error) {
	if w.n.cfg.Logf != nil {
		w.n.cfg.Logf("debug", "%s", strings.TrimRight(string(b), "\n"))
	}
	return len(b), nil
}
