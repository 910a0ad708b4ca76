package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/hashicorp/memberlist"
)

// flagsOf returns how a's Topology shows member id: "" when it does not
// list it, else "ok", "pfail" or "fail", and whether a still counts it
// a member (it owns slots).
func flagsOf(a *testNode, id string) (string, bool) {
	for _, nd := range a.Topology().Nodes {
		if nd.ID != id {
			continue
		}
		f := "ok"
		switch {
		case nd.PFail:
			f = "pfail"
		case nd.Fail:
			f = "fail"
		}
		return f, len(nd.Slots) > 0
	}
	return "", false
}

// TestFailedMemberReported: a member that stops answering is flagged
// pfail, then fail, by the survivors' probes while the cluster still
// counts it a member (its slots are then pfail, fail, and the cluster
// state fail); once the majority drops it, it stays listed as fail,
// without slots, and the cluster is ok again, its slots served by the
// survivors. The majority takes a member's slots after the node timeout,
// so they are seen fail when the node timeout is longer than the probes
// take to flag it (failProbes probe intervals), as the default (15 s) is:
// the test's 1 s is not (with it, the majority removes c at its first or
// second unanswered probe, and c is fail from its removal: see
// TestHealthOfAgreedMembers).
func TestFailedMemberReported(t *testing.T) {
	set := func(c *Config) { c.NodeTimeout = 4 * time.Second }
	a := startNodeCfg(t, testkit.Listen(t), gossipPort(t), nil, nil, set)
	b := startNodeCfg(t, testkit.Listen(t), gossipPort(t), nil, nil, set, a.member())
	c := startNodeCfg(t, testkit.Listen(t), gossipPort(t), nil, nil, set, a.member())
	settled(t, a, b, c)
	if top := a.Topology(); top.SlotsPFail != 0 || top.SlotsFail != 0 || !a.Stats().StateOK {
		t.Fatalf("before the failure: %d slots pfail, %d fail", top.SlotsPFail, top.SlotsFail)
	}
	cid := c.ID()
	_ = c.Close() // no leave: as a crash, to the others
	testkit.Until(t, 20*time.Second, "a to flag c fail while c is still a member", func() error {
		f, member := flagsOf(a, cid)
		if !member {
			return fmt.Errorf("c was dropped before a flagged it fail (it is %q)", f)
		}
		if f == "fail" {
			top := a.Topology()
			if top.SlotsFail == 0 || a.Stats().StateOK {
				return fmt.Errorf("c is fail but its slots are not: %d slots fail", top.SlotsFail)
			}
			return nil
		}
		return fmt.Errorf("c is %q", f)
	})
	testkit.Until(t, 20*time.Second, "the cluster to drop c", func() error {
		if _, ok := a.routes.Load().members[cid]; ok {
			return fmt.Errorf("c is still a member")
		}
		return nil
	})
	settled(t, a, b)
	if f, member := flagsOf(a, cid); f != "fail" || member {
		t.Errorf("c, dropped, is listed as %q (owning slots: %v), want fail without slots", f, member)
	}
	if top := a.Topology(); top.SlotsFail != 0 || top.SlotsOK != len(a.slots) || !a.Stats().StateOK || a.Stats().NodesFail != 1 {
		t.Errorf("after the drop: %d slots fail, %d ok, nodes fail %d", top.SlotsFail, top.SlotsOK, a.Stats().NodesFail)
	}
	if r, _ := b.Peek(0); r != commands.RouteLocal && r != commands.RouteMoved {
		t.Errorf("slot 0 on b: route %v", r)
	}
}

// TestHealthFlags runs the prober's rounds on a node that is not
// started, its probes answered or not as the test says, on a clock the
// test sets: one unanswered probe flags a member pfail, failProbes in a
// row fail, an answer clears the flag, with one log line per change; a
// member gossip drops as failed stays listed as fail until failedKeep
// has passed or it comes back, and one that left is forgotten at once.
func TestHealthFlags(t *testing.T) {
	var logMu sync.Mutex
	var logs []string
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.Secret = "127.0.0.1", 7000, "s"
	cfg.Logf = func(level, format string, args ...any) {
		logMu.Lock()
		logs = append(logs, level+" "+fmt.Sprintf(format, args...))
		logMu.Unlock()
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	n.health.clock = func() time.Time { return now }
	answers := map[string]bool{}
	n.health.ping = func(id string, _ *net.UDPAddr) error {
		if answers[id] {
			return nil
		}
		return errors.New("no answer")
	}
	b, c := strings.Repeat("b", 40), strings.Repeat("c", 40)
	for i, id := range []string{b, c} {
		n.healthJoined(id, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 17001 + i}, memberMeta{IP: "127.0.0.1", Port: 7001 + i})
		answers[id] = true
	}
	state := func(id string) uint8 { return n.health.view.Load().state[id] }
	lastLog := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		if len(logs) == 0 {
			return ""
		}
		return logs[len(logs)-1]
	}
	n.probeRound()
	if state(b) != healthOK || state(c) != healthOK {
		t.Fatalf("both answer: %d %d", state(b), state(c))
	}
	answers[c] = false
	n.probeRound()
	if state(c) != healthPFail || state(b) != healthOK {
		t.Fatalf("c missed one probe: c %d, b %d; want pfail, ok", state(c), state(b))
	}
	if l := lastLog(); l != "warning cluster: member "+c+" (127.0.0.1:7002) is pfail: a probe went unanswered" {
		t.Errorf("log: %q", l)
	}
	n.probeRound()
	if state(c) != healthPFail {
		t.Fatalf("c missed two probes: %d, want pfail", state(c))
	}
	n.probeRound()
	if state(c) != healthFail {
		t.Fatalf("c missed %d probes: %d, want fail", failProbes, state(c))
	}
	if l := lastLog(); !strings.Contains(l, c+" (127.0.0.1:7002) is fail: 3 probes in a row unanswered") {
		t.Errorf("log: %q", l)
	}
	answers[c] = true
	n.probeRound()
	if state(c) != healthOK {
		t.Fatalf("c answers again: %d, want ok", state(c))
	}
	if l := lastLog(); !strings.Contains(l, c+" (127.0.0.1:7002) answers again") {
		t.Errorf("log: %q", l)
	}
	// Dropped by gossip as failed: listed as fail, without slots, until
	// failedKeep has passed.
	n.healthLeft(c, memberMeta{IP: "127.0.0.1", Port: 7002, BusPort: 17002}, false)
	top := n.Topology()
	if len(top.Nodes) != 1 || top.Nodes[0].ID != c || !top.Nodes[0].Fail || len(top.Nodes[0].Slots) != 0 || top.Nodes[0].BusPort != 17002 {
		t.Fatalf("after c failed and was dropped: %+v", top.Nodes)
	}
	if st := n.Stats(); st.NodesFail != 1 || st.SlotsFail != 0 {
		t.Errorf("stats: %+v", st)
	}
	now = now.Add(failedKeep + time.Second)
	n.probeRound()
	if top := n.Topology(); len(top.Nodes) != 0 {
		t.Errorf("c still listed %v after failedKeep: %+v", failedKeep, top.Nodes)
	}
	// A member that left is forgotten at once, and one that comes back
	// after it failed is ok again.
	n.healthLeft(b, memberMeta{IP: "127.0.0.1", Port: 7001}, true)
	if v := n.health.view.Load(); len(v.gone) != 0 || len(v.state) != 0 {
		t.Errorf("b left: %+v", v)
	}
	n.healthLeft(c, memberMeta{IP: "127.0.0.1", Port: 7002}, false)
	n.healthJoined(c, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 17002}, memberMeta{IP: "127.0.0.1", Port: 7002})
	if state(c) != healthOK || len(n.health.view.Load().gone) != 0 {
		t.Errorf("c came back: state %d, gone %v", state(c), n.health.view.Load().gone)
	}
	if l := lastLog(); !strings.Contains(l, c+" (127.0.0.1:7002) is back") {
		t.Errorf("log: %q", l)
	}
	// At most maxFailedListed failed members are listed, the latest.
	for i := range maxFailedListed + 5 {
		now = now.Add(time.Second)
		n.healthLeft(fmt.Sprintf("%040x", i), memberMeta{IP: "127.0.0.1", Port: 8000 + i}, false)
	}
	if got := len(n.health.view.Load().gone); got != maxFailedListed {
		t.Errorf("%d failed members listed, want %d", got, maxFailedListed)
	}
	for _, g := range n.health.view.Load().gone {
		if g.meta.Port < 8005 {
			t.Errorf("an older failed member is listed: %+v", g)
		}
	}
}

// TestHealthOfAgreedMembers: under agreement, an agreed member gossip does
// not report is probed at the agreed address (and flagged as its probes
// say); a member the majority removed that the probes flag pfail is fail
// at once; one the probes reach, one that left, and one never seen that
// the set drops, are not flagged.
func TestHealthOfAgreedMembers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.Secret = "127.0.0.1", 7000, "s"
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]bool{}
	n.health.ping = func(id string, addr *net.UDPAddr) error {
		if answers[id] && addr != nil {
			return nil
		}
		return errors.New("no answer")
	}
	d := (*delegate)(n)
	b, c, e, l, x := strings.Repeat("b", 40), strings.Repeat("c", 40), strings.Repeat("e", 40), strings.Repeat("f", 40), strings.Repeat("a", 40)
	agreed := map[string]agreedMember{n.ID(): {IP: "127.0.0.1", Port: 7000, BusPort: 17000}}
	for i, id := range []string{b, c, e, l} {
		md := memberMeta{IP: "127.0.0.1", Port: 7001 + i, BusPort: 17001 + i, Weight: 1, Leaving: id == l}
		raw, _ := json.Marshal(md)
		d.NotifyJoin(&memberlist.Node{Name: id, Addr: net.IPv4(127, 0, 0, 1), Port: uint16(17001 + i), Meta: raw})
		agreed[id] = agreedMember{IP: md.IP, Port: md.Port, BusPort: md.BusPort, Weight: 1}
		answers[id] = id != c && id != l
	}
	// x: agreed, down, never seen by this node's gossip.
	agreed[x] = agreedMember{IP: "127.0.0.1", Port: 7009, BusPort: 17009, Weight: 1}
	fsm := (*agreedFSM)(n.agree)
	fsm.set(5, agreed)
	n.probeRound()
	state := func(id string) uint8 { return n.health.view.Load().state[id] }
	if state(x) != healthPFail || state(c) != healthPFail || state(b) != healthOK {
		t.Fatalf("after a probe round: x %d, c %d, b %d; want pfail, pfail, ok", state(x), state(c), state(b))
	}
	// The majority removes c and e (failed, to the leader), l (leaving)
	// and x: c, pfail here, is fail; e answers here, and stays ok; x,
	// which gossip never reported, is fail and listed as gone.
	now := map[string]agreedMember{n.ID(): agreed[n.ID()], b: agreed[b]}
	fsm.set(9, now)
	if state(c) != healthFail || state(e) != healthOK || state(l) != healthPFail || state(x) != healthFail {
		t.Errorf("after the removal: c %d, e %d, l %d, x %d; want fail, ok, pfail (as the probes say), fail", state(c), state(e), state(l), state(x))
	}
	if g := n.health.view.Load().gone; len(g) != 1 || g[0].id != x {
		t.Errorf("gone: %+v, want x alone", g)
	}
	// An agreed member never seen nor flagged, dropped, is forgotten.
	y := strings.Repeat("9", 40)
	fsm.set(10, map[string]agreedMember{n.ID(): agreed[n.ID()], b: agreed[b], y: {IP: "127.0.0.1", Port: 7010, BusPort: 17010}})
	fsm.set(11, now)
	if _, ok := n.health.peers[y]; ok {
		t.Errorf("y, agreed then dropped before any probe, is still in the table")
	}
}
