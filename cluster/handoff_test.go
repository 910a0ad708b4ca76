package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/testkit"
)

// A hand-off goes in messages a receiver takes whatever its client
// limits: b's client port takes no argument over 5 KiB (as
// proto-max-bulk-len does, at 1 MiB or more; a's messages are bounded at
// 4 KiB here, scaled down as b's limit is, so that the test is quick),
// and a's keys, 250 KB of them, reach it all the same, each with its
// state. A slot with a record b will not take cannot move: it stays
// served by a, b sends its clients there (MOVED) instead of serving it
// empty, a reports it, and every other slot moves.
func TestHandoffInChunks(t *testing.T) {
	a := startNode(t) // on UDP: the leave at the end needs it (see TestHandoffOnJoinAndLeave)
	var keys []string
	for i := range 2000 {
		k := fmt.Sprintf("user:%d:%s", i, strings.Repeat("x", 100))
		keys = append(keys, k)
		exhaust(t, a, k)
	}
	bigSlots := map[int]bool{}
	for i := 0; len(bigSlots) < 16; i++ {
		k := fmt.Sprintf("big%d:%s", i, strings.Repeat("y", 6<<10))
		if bigSlots[engine.Slot([]byte(k))] {
			continue
		}
		bigSlots[engine.Slot([]byte(k))] = true
		keys = append(keys, k)
		exhaust(t, a, k)
	}
	b := startNode(t)
	a.chunk = 4 << 10 // maxChunk and a receiver's least limit, scaled down
	b.maxBulk.Store(5 << 10)
	if err := b.Meet("127.0.0.1", a.cfg.Port, a.cfg.BusPort); err != nil {
		t.Fatal(err)
	}
	var held []int // the big keys' slots b owns
	testkit.Until(t, 30*time.Second, "the slots to move but those with a big key", func() error {
		ta, tb := a.routes.Load(), b.routes.Load()
		if len(ta.members) != 2 || len(tb.members) != 2 || ta.m.Owner != tb.m.Owner {
			return fmt.Errorf("the nodes do not agree on the map yet")
		}
		held = held[:0]
		for s := range engine.SlotCount {
			for _, n := range []*testNode{a, b} {
				if st := n.slots[s].state.Load(); st == moving || st == pending {
					return fmt.Errorf("slot %d: still being handed over", s)
				}
			}
			ra, _ := a.Peek(s)
			rb, addr := b.Peek(s)
			switch {
			case bigSlots[s] && ta.m.OwnerID(s) == b.ID():
				held = append(held, s)
				if ra != commands.RouteLocal || rb != commands.RouteMoved || addr != a.addr {
					return fmt.Errorf("slot %d, which cannot move: a %v, b %v %s; want a serving it, b sending its clients there", s, ra, rb, addr)
				}
			case (ra == commands.RouteLocal) == (rb == commands.RouteLocal):
				return fmt.Errorf("slot %d: served by a %v, by b %v", s, ra == commands.RouteLocal, rb == commands.RouteLocal)
			case ta.m.OwnerID(s) == b.ID() && rb != commands.RouteLocal:
				return fmt.Errorf("slot %d: b owns it and does not serve it", s)
			}
		}
		return nil
	})
	if len(held) == 0 {
		t.Fatal("b owns none of the big keys' slots: the test needs some")
	}
	if got := a.Stats().SlotsHeld; got != len(held) {
		t.Errorf("a reports %d slots it could not hand over, want %d", got, len(held))
	}
	if top := a.Topology(); top.SlotsHeld != len(held) {
		t.Errorf("a's topology reports %d slots it could not hand over, want %d", top.SlotsHeld, len(held))
	}
	onB := 0
	for _, o := range spentOnOwners(t, keys, a, b) {
		if o == b {
			onB++
		}
	}
	if onB < len(keys)/4 {
		t.Errorf("%d of %d keys moved to b, want about half", onB, len(keys))
	}
	// a cannot leave with the held slots' keys: it says so at once, not
	// at its leave timeout, and b serves them (empty) once a has gone.
	began := time.Now()
	if err := a.Leave(); !errors.Is(err, ErrLeaveTime) || time.Since(began) > 10*time.Second {
		t.Fatalf("Leave with %d held slots: %v after %v; want %v at once", len(held), err, time.Since(began), ErrLeaveTime)
	}
	_ = a.Close() // as package daemon does after Leave
	testkit.Until(t, 15*time.Second, "b to serve every slot", func() error {
		for s := range engine.SlotCount {
			if r, _ := b.Peek(s); r != commands.RouteLocal {
				return fmt.Errorf("slot %d: %v", s, r)
			}
		}
		return nil
	})
}

// TestLostPendingSlotReleased: a node that loses a slot it waited for,
// its previous owner gone, releases it to its new owner, which, its own
// previous map naming that node, waits for it: as when a member's removal
// gives a slot to b, which waits for the removed member, and the next
// removal gives it to a, which waits for b. a serves it at once, not at
// the pending timeout (30 s).
func TestLostPendingSlotReleased(t *testing.T) {
	a := startNode(t)
	b := startNode(t, a.member())
	settled(t, a, b)
	m := a.routes.Load().m
	s := 0
	for m.OwnerID(s) != a.ID() {
		s++
	}
	a.mu.Lock()
	a.slots[s].state.Store(pending) // a waits for b
	a.prevOwner[s], a.stateSince[s] = b.ID(), time.Now()
	a.mu.Unlock()
	b.mu.Lock()
	b.slots[s].state.Store(pending) // b waited for a member now gone
	b.prevOwner[s], b.stateSince[s] = strings.Repeat("9", 40), time.Now()
	b.mu.Unlock()
	b.poke()
	testkit.Until(t, 5*time.Second, "a to serve the slot", func() error {
		if r, _ := a.Peek(s); r != commands.RouteLocal {
			return fmt.Errorf("slot %d on a: %v", s, r)
		}
		return nil
	})
	settled(t, a, b)
}

// TestReleaseFollowsNewOwner: a release not yet taken when its slot's
// owner changes goes to the new owner (it may wait for this node, or for
// a member that never served the slot, as after a partition heals); one
// whose slot comes back to this node, or older than the pending timeout,
// is dropped.
func TestReleaseFollowsNewOwner(t *testing.T) {
	ids := []string{strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)}
	m := Assign([]Member{{ID: ids[0], Weight: 1}, {ID: ids[1], Weight: 1}, {ID: ids[2], Weight: 1}})
	slotOf := func(id string) int {
		for s := range engine.SlotCount {
			if m.OwnerID(s) == id {
				return s
			}
		}
		t.Fatalf("%s owns no slot", id)
		return -1
	}
	now := time.Now()
	n := &Node{cfg: Config{ID: ids[0], PendingTimeout: 30 * time.Second}, releases: map[int]release{}}
	toB, toC, mine, old := slotOf(ids[1]), slotOf(ids[2]), slotOf(ids[0]), -1
	for s := range engine.SlotCount {
		if s != toB && m.OwnerID(s) == ids[1] {
			old = s
			break
		}
	}
	n.releases[toB] = release{to: ids[1], since: now}                   // still b's
	n.releases[toC] = release{to: ids[1], since: now}                   // moved from b to c
	n.releases[mine] = release{to: ids[1], since: now}                  // back to this node
	n.releases[old] = release{to: ids[1], since: now.Add(-time.Minute)} // b stopped waiting
	rel := n.releasesDueLocked(m, now)
	if got := rel[ids[1]]; len(got) != 1 || got[0] != toB {
		t.Errorf("released to b: %v, want [%d]", got, toB)
	}
	if got := rel[ids[2]]; len(got) != 1 || got[0] != toC {
		t.Errorf("released to c: %v, want [%d] (its owner changed)", got, toC)
	}
	if len(rel) != 2 || len(n.releases) != 2 || n.releases[toC].to != ids[2] {
		t.Errorf("releases due %v, kept %v: want the one back to this node and the old one dropped", rel, n.releases)
	}
}
