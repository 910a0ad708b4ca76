package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/internal/testkit"
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
// pfail, then fail, by the survivors' probes while gossip still counts
// it a member (its slots are then pfail, fail, and the cluster state
// fail); once gossip drops it, it stays listed as fail, without slots,
// and the cluster is ok again, its slots served by the survivors.
func TestFailedMemberReported(t *testing.T) {
	a := startNode(t)
	b := startNode(t, a.member())
	c := startNode(t, a.member())
	settled(t, a, b, c)
	if top := a.Topology(); top.SlotsPFail != 0 || top.SlotsFail != 0 || !a.Stats().StateOK {
		t.Fatalf("before the failure: %d slots pfail, %d fail", top.SlotsPFail, top.SlotsFail)
	}
	cid := c.ID()
	_ = c.Close() // no leave: as a crash, to the others
	var seen []string
	testkit.Until(t, 20*time.Second, "the survivors to flag c fail", func() error {
		f, member := flagsOf(a, cid)
		if member && (len(seen) == 0 || seen[len(seen)-1] != f) {
			seen = append(seen, f)
		}
		if f == "fail" && member {
			top := a.Topology()
			if top.SlotsFail == 0 || a.Stats().StateOK {
				return fmt.Errorf("c is fail but its slots are not: %d slots fail", top.SlotsFail)
			}
			return nil
		}
		return fmt.Errorf("c is %q, member %v", f, member)
	})
	if len(seen) < 2 || seen[len(seen)-2] != "pfail" && seen[len(seen)-2] != "ok" {
		t.Errorf("a saw c as %v while a member, want it pfail before fail", seen)
	}
	testkit.Until(t, 20*time.Second, "gossip to drop c", func() error {
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
