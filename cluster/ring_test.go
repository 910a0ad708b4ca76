package cluster

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cellserver/cellserver/engine"
)

func members(n int) []Member {
	out := make([]Member, n)
	for i := range out {
		out[i] = Member{ID: fmt.Sprintf("%040x", uint64(i)*0x9e3779b97f4a7c15+1), Weight: 1}
	}
	return out
}

// moved counts the slots whose owner differs between a and b, and checks
// that every moved slot involves member id: it was id's before or is now.
func moved(t *testing.T, a, b *SlotMap, id string) int {
	t.Helper()
	n := 0
	for s := range engine.SlotCount {
		before, after := a.OwnerID(s), b.OwnerID(s)
		if before == after {
			continue
		}
		n++
		if before != id && after != id {
			t.Fatalf("slot %d moved from %s to %s, neither of which is %s", s, before, after, id)
		}
	}
	return n
}

// TestAssignSimulation simulates 100 nodes in one process, each computing
// the map from the member list in its own order (25 of them, to keep
// the test quick under -race): they agree; a join or a
// leave moves about 1/N of the slots, all to or from the node concerned.
func TestAssignSimulation(t *testing.T) {
	const n = 100
	ms := members(n + 1)
	base, joiner := ms[:n], ms[n]
	want := Assign(base)
	rng := rand.New(rand.NewPCG(1, 2))
	for node := range 25 { // 25 of the nodes, each seeing the members in its own order
		view := append([]Member(nil), base...)
		rng.Shuffle(len(view), func(i, j int) { view[i], view[j] = view[j], view[i] })
		if got := Assign(view); got.Owner != want.Owner {
			t.Fatalf("node %d computes a different map", node)
		}
	}
	// Shares: each node owns about 16384/100 = 164 slots.
	for id, c := range want.Count() {
		if c < 100 || c > 240 {
			t.Errorf("node %s owns %d slots, want about 164", id[:8], c)
		}
	}
	// A join moves ~1/(N+1) of the slots, all to the joiner.
	joined := Assign(append(append([]Member(nil), base...), joiner))
	if got := moved(t, want, joined, joiner.ID); got < 100 || got > 240 {
		t.Errorf("a join moved %d slots, want about %d", got, engine.SlotCount/(n+1))
	}
	if c := joined.Count()[joiner.ID]; c != moved(t, want, joined, joiner.ID) {
		t.Errorf("the joiner owns %d slots, but not only moved ones", c)
	}
	// A leave moves exactly the leaver's slots, spread over the others.
	leaver := base[37]
	left := Assign(append(append([]Member(nil), base[:37]...), base[38:]...))
	if got, had := moved(t, want, left, leaver.ID), want.Count()[leaver.ID]; got != had {
		t.Errorf("a leave moved %d slots, want the leaver's %d", got, had)
	}
	gainers := map[string]bool{}
	for s := range engine.SlotCount {
		if want.OwnerID(s) == leaver.ID {
			gainers[left.OwnerID(s)] = true
		}
	}
	if len(gainers) < 50 {
		t.Errorf("the leaver's slots went to %d nodes, want them spread over most of 99", len(gainers))
	}
}

func TestAssignWeights(t *testing.T) {
	ms := members(3)
	ms[0].Weight = 2
	c := Assign(ms).Count()
	// Expected shares: 1/2, 1/4, 1/4 of 16384.
	if got := c[ms[0].ID]; got < 7700 || got > 8700 {
		t.Errorf("weight 2 owns %d slots, want about 8192", got)
	}
	for _, m := range ms[1:] {
		if got := c[m.ID]; got < 3700 || got > 4500 {
			t.Errorf("weight 1 owns %d slots, want about 4096", got)
		}
	}
	ms[2].Weight = 0
	if got := Assign(ms).Count()[ms[2].ID]; got != 0 {
		t.Errorf("weight 0 owns %d slots, want 0", got)
	}
}

func TestAssignEmpty(t *testing.T) {
	m := Assign(nil)
	for s := range engine.SlotCount {
		if m.Owner[s] != -1 || m.OwnerID(s) != "" {
			t.Fatalf("slot %d has an owner with no members", s)
		}
	}
	one := Assign(members(1))
	if c := one.Count(); c[one.Members[0].ID] != engine.SlotCount {
		t.Fatalf("a single node owns %v, want every slot", c)
	}
}

// TestAssignBoundsWeight: a member advertising a weight of 1e9 owns no
// more than a member of MaxWeightRatio times the median weight would,
// MaxWeightRatio/(MaxWeightRatio+N-1) of the slots among N-1 ordinary
// ones, whatever the cluster size; a weight that is not a number owns
// nothing, and honest weights within the ratio keep their shares.
func TestAssignBoundsWeight(t *testing.T) {
	for _, n := range []int{2, 4, 10} {
		ms := members(n)
		greedy := ms[n-1].ID
		ms[n-1].Weight = 1e9
		got := Assign(ms).Count()[greedy]
		bound := float64(engine.SlotCount) * MaxWeightRatio / float64(MaxWeightRatio+n-1)
		if float64(got) > bound*1.05 {
			t.Errorf("%d members: weight 1e9 owns %d slots, want at most about %.0f", n, got, bound)
		}
		ms[n-1].Weight = MaxWeightRatio // the cap itself: the same share
		if capped := Assign(ms).Count()[greedy]; capped != got {
			t.Errorf("%d members: weight 1e9 owns %d slots, weight %d owns %d; want the same", n, got, MaxWeightRatio, capped)
		}
	}
	// Two members over the ratio are bounded by the median too: the
	// lower median of {1, 1, 1e9, 1e9} is 1.
	ms := members(4)
	ms[2].Weight, ms[3].Weight = 1e9, 1e9
	c := Assign(ms).Count()
	if got := c[ms[2].ID] + c[ms[3].ID]; float64(got) > float64(engine.SlotCount)*8/10*1.05 {
		t.Errorf("two members of weight 1e9 among 4 own %d slots, want at most about 8/10", got)
	}
	ms = members(3)
	ms[2].Weight = math.NaN()
	if got := Assign(ms).Count()[ms[2].ID]; got != 0 {
		t.Errorf("weight NaN owns %d slots, want 0", got)
	}
	// Every member at MaxWeight (or over it) splits the slots evenly.
	ms = members(2)
	ms[0].Weight, ms[1].Weight = MaxWeight, 2*MaxWeight
	if got := Assign(ms).Count()[ms[1].ID]; got < 7700 || got > 8700 {
		t.Errorf("weights %d and %d: the larger owns %d slots, want about half (both count as MaxWeight)", MaxWeight, 2*MaxWeight, got)
	}
}
