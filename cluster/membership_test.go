package cluster

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
)

// TestGossipedWeightBounded: a member that gossips a weight of 1e9 (past
// Validate, as a node built by hand or by an older cellserver could) owns
// at most the share MaxWeightRatio gives it, on every node's map, not
// every slot.
func TestGossipedWeightBounded(t *testing.T) {
	var g testkit.Gossip
	a := startGossipNode(t, &g)
	b := startGossipNode(t, &g, a.member())
	settled(t, a, b)
	b.gossipedMu.Lock()
	b.selfMeta.Weight = 1e9
	b.gossipedMu.Unlock()
	if err := b.ml.UpdateNode(time.Second); err != nil {
		t.Fatal(err)
	}
	// The mock network carries streams only (its transports are not named
	// as the nodes), so the update goes by a state exchange.
	b.syncMembers(nil)
	testkit.Until(t, 15*time.Second, "a to see b's weight", func() error {
		if w := a.routes.Load().members[b.cfg.ID].Weight; w != 1e9 {
			return fmt.Errorf("a sees weight %v", w)
		}
		return nil
	})
	settled(t, a, b)
	bound := float64(engine.SlotCount) * MaxWeightRatio / (MaxWeightRatio + 1)
	for _, n := range []*testNode{a, b} {
		if got := n.routes.Load().m.Count()[b.cfg.ID]; float64(got) > bound*1.05 {
			t.Errorf("%s's map gives b %d slots, want at most about %.0f", n.addr, got, bound)
		}
	}
}

// TestConfigWeightRange: Validate takes weights from 0 to MaxWeight only.
func TestConfigWeightRange(t *testing.T) {
	for w, ok := range map[float64]bool{0: true, 1: true, 2.5: true, MaxWeight: true, -1: false, MaxWeight + 1: false, 1e9: false, math.NaN(): false} {
		cfg := DefaultConfig()
		cfg.IP, cfg.Port, cfg.Secret, cfg.Weight = "127.0.0.1", 7000, "s", w
		cfg.EnsureDefaults()
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("weight %v: Validate = %v, want ok %v", w, err, ok)
		}
	}
}

// TestMeetAnswersAtOnce: Meet returns nil before it dials, for a closed
// port as for a live member, which the node then joins; an address that
// does not parse is still refused at once.
func TestMeetAnswersAtOnce(t *testing.T) {
	a := startNode(t)
	b := startNode(t)
	closed := testkit.FreePort(t) // nothing gossips there
	if err := a.Meet("127.0.0.1", 1, closed); err != nil {
		t.Errorf("Meet of a closed port: %v, want nil", err)
	}
	if err := a.Meet("127.0.0.1", testkit.Port(testkit.Listen(t)), b.cfg.BusPort); err != nil {
		t.Errorf("Meet of a member: %v, want nil", err)
	}
	settled(t, a, b)
	if err := a.Meet("127.0.0.1", 60000, 0); err == nil {
		t.Errorf("Meet of port 60000 with no bus port (70000): nil, want an error")
	}
}
