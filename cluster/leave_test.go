package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// A node whose every peer is leaving too leaves promptly, without its
// slots' hand-off, rather than retry them to the leavers until its leave
// timeout: b has begun to leave and not gossiped it yet (as when a whole
// cluster gets SIGTERM at once), and refuses a's hand-offs for that; a
// learns from the refusal, and its Leave returns ErrAlone at once.
func TestLeaveWhenPeersLeave(t *testing.T) {
	a := startNode(t)
	b := startNode(t, a.member())
	settled(t, a, b)
	b.mu.Lock()
	b.leaving = true // as Leave begins, before its gossip
	b.gossipedMu.Lock()
	b.selfMeta.Leaving = true
	b.gossipedMu.Unlock()
	b.mu.Unlock()
	a.cfg.LeaveTimeout = 10 * time.Second
	began := time.Now()
	err := a.Leave()
	if took := time.Since(began); !errors.Is(err, ErrAlone) || took > 5*time.Second {
		t.Fatalf("Leave with every peer leaving: %v after %v; want %v at once", err, took, ErrAlone)
	}
}

// TestLeaveIsToldFromFailure: gossip's report of a member gone is a clean
// leave when the member gossiped its leave (or handed over as leaving)
// before, and a failure otherwise; memberlist's own Node.State cannot tell
// (it stays StateAlive in the events).
func TestLeaveIsToldFromFailure(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.Secret = "127.0.0.1", 7000, "s"
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := (*delegate)(n)
	leaver, crasher, handed := strings.Repeat("b", 40), strings.Repeat("c", 40), strings.Repeat("d", 40)
	for i, id := range []string{leaver, crasher, handed} {
		md := memberMeta{IP: "127.0.0.1", Port: 7001 + i, BusPort: 17001 + i, Weight: 1, Leaving: id == leaver}
		b, _ := json.Marshal(md)
		d.NotifyUpdate(&memberlist.Node{Name: id, Addr: net.IPv4(127, 0, 0, 1), Port: uint16(17001 + i), Meta: b})
	}
	n.mu.Lock()
	n.leavers[handed] = true // its hand-off said it leaves, ahead of gossip
	n.mu.Unlock()
	for _, id := range []string{leaver, crasher, handed} {
		d.NotifyLeave(&memberlist.Node{Name: id, Addr: net.IPv4(127, 0, 0, 1)})
	}
	if !n.isLeftClean(leaver) || !n.isLeftClean(handed) || n.isLeftClean(crasher) {
		t.Errorf("left clean: leaver %v, handed over %v, crashed %v; want true, true, false",
			n.isLeftClean(leaver), n.isLeftClean(handed), n.isLeftClean(crasher))
	}
}

// TestLeaveOfOneOfTwo: under agreement, a member of a cluster of two that
// leaves is out of the agreed set before it stops gossip, so the other,
// alone, is a majority of the members, and serves every slot with the
// keys the leaver handed over. Were the leaver gone first, the other
// would hold a set of two with one gone: no majority, ever again. The
// test holds the leader's agreement loop, which removes a leaving member,
// while b hands its slots over: b's Leave must wait for it.
func TestLeaveOfOneOfTwo(t *testing.T) {
	a := startNode(t)
	b := startNode(t, a.member())
	settled(t, a, b)
	var keys []string
	for i := 0; len(keys) < 20; i++ {
		k := fmt.Sprintf("k%d", i)
		if owner(t, k, a, b) == b {
			exhaust(t, b, k)
			keys = append(keys, k)
		}
	}
	testkit.WaitFor(t, "a to lead", func() bool { return a.agree.raft().State() == raft.Leader })
	a.agree.rmu.Lock() // a's agreement loop waits for it, at its next tick
	held := true
	release := func() {
		if held {
			held = false
			a.agree.rmu.Unlock()
		}
	}
	t.Cleanup(release)
	left := make(chan error, 1)
	go func() { left <- b.Leave() }()
	testkit.WaitFor(t, "b to hand its slots over", func() bool { return b.servedSlots() == 0 })
	select {
	case err := <-left:
		t.Fatalf("b's Leave returned (%v) before the agreed set could drop it", err)
	case <-time.After(time.Second):
	}
	release()
	if err := <-left; err != nil {
		t.Fatal(err)
	}
	if f := a.agree.raft().GetConfiguration(); f.Error() != nil || len(f.Configuration().Servers) != 1 {
		t.Fatalf("after b left, a's configuration: %+v %v; want a alone", f.Configuration().Servers, f.Error())
	}
	testkit.Until(t, 10*time.Second, "a to serve every slot", func() error {
		for s := range engine.SlotCount {
			if r, _ := a.Peek(s); r != commands.RouteLocal {
				return fmt.Errorf("slot %d: route %v", s, r)
			}
		}
		return nil
	})
	spentOnOwners(t, keys, a)
}
