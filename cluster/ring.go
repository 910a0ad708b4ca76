package cluster

import (
	"math"
	"sort"

	"github.com/cellserver/cellserver/engine"
)

// Member is one node as the slot map sees it: its id and its weight.
type Member struct {
	ID     string  // the node id, 40 hex characters
	Weight float64 // relative capacity; 1 for an ordinary node, <= 0 owns nothing
}

// MaxWeight is the largest weight a member counts with (cluster-weight's
// range is 0 to MaxWeight): a member gossiping more counts as MaxWeight.
const MaxWeight = 1_000_000

// MaxWeightRatio caps every member's weight, in Assign, at this multiple
// of the median weight of the members that own slots: a node that
// advertises a huge weight (misconfigured, or joined by whoever holds the
// cluster secret) owns at most what a node of MaxWeightRatio times the
// median does, MaxWeightRatio/(MaxWeightRatio+N-1) of the slots among N-1
// others of the median's weight, rather than every slot.
const MaxWeightRatio = 4

// SlotMap is the owner of every hash slot, computed by Assign.
type SlotMap struct {
	// Members are the members the map was computed over, sorted by ID.
	Members []Member
	// Owner is, for each slot, the index in Members of its owner, or -1
	// when no member can own slots.
	Owner [engine.SlotCount]int16
}

// OwnerID returns the id of slot's owner, or "" when it has none.
func (m *SlotMap) OwnerID(slot int) string {
	if o := m.Owner[slot]; o >= 0 {
		return m.Members[o].ID
	}
	return ""
}

// Count returns how many slots each member owns, by ID.
func (m *SlotMap) Count() map[string]int {
	out := make(map[string]int, len(m.Members))
	for _, o := range m.Owner {
		if o >= 0 {
			out[m.Members[o].ID]++
		}
	}
	return out
}

// Assign computes the owner of every slot by rendezvous (highest random
// weight) hashing: each slot goes to the member whose score for (slot,
// member id) is highest. The result depends only on the set of members,
// not on their order, so every node that sees the same members computes
// the same map; adding or removing one member moves only the slots it
// wins or held, about 1/N of them. A member's weight scales its share
// (weighted rendezvous: score = -weight / ln(u), u uniform in (0,1)),
// after boundWeights has bounded it: no member's weight counts for more
// than MaxWeightRatio times the median. Members with a weight of zero or
// less (or not a number) own nothing; duplicate IDs count once. Members
// keep the weights they were given; only the map uses the bounded ones.
func Assign(members []Member) *SlotMap {
	m := &SlotMap{}
	seen := map[string]bool{}
	for _, mb := range members {
		if !seen[mb.ID] {
			seen[mb.ID] = true
			m.Members = append(m.Members, mb)
		}
	}
	sort.Slice(m.Members, func(i, j int) bool { return m.Members[i].ID < m.Members[j].ID })
	weights := boundWeights(m.Members)
	seeds := make([]uint64, len(m.Members))
	equal := true
	for i, mb := range m.Members {
		seeds[i] = idSeed(mb.ID)
		if weights[i] != weights[0] {
			equal = false
		}
	}
	for s := range m.Owner {
		best, bestScore := int16(-1), math.Inf(-1)
		var bestHash uint64
		for i, w := range weights {
			if w <= 0 {
				continue
			}
			h := mix(seeds[i] ^ uint64(s)*0x9e3779b97f4a7c15)
			if equal {
				// Same weights: the raw hash orders the members exactly.
				if best < 0 || h > bestHash {
					best, bestHash = int16(i), h
				}
				continue
			}
			u := (float64(h>>11) + 0.5) / (1 << 53) // in (0,1)
			if score := -w / math.Log(u); score > bestScore {
				best, bestScore = int16(i), score
			}
		}
		m.Owner[s] = best
	}
	return m
}

// boundWeights returns the weight each member counts with in Assign:
// its own, 0 when that is not a positive number, at most MaxWeight, and
// at most MaxWeightRatio times the lower median of the positive ones. The
// median, unlike the mean or the largest, moves only when at least half
// of the members owning slots advertise more, so one node (or a minority)
// cannot raise the cap it is held to. The result depends only on the set
// of members, as the map must.
func boundWeights(members []Member) []float64 {
	ws := make([]float64, len(members))
	var pos []float64
	for i, mb := range members {
		w := mb.Weight
		switch {
		case !(w > 0): // zero, negative, NaN
			w = 0
		case w > MaxWeight:
			w = MaxWeight
		}
		ws[i] = w
		if w > 0 {
			pos = append(pos, w)
		}
	}
	if len(pos) == 0 {
		return ws
	}
	sort.Float64s(pos)
	limit := MaxWeightRatio * pos[(len(pos)-1)/2]
	for i := range ws {
		ws[i] = min(ws[i], limit)
	}
	return ws
}

// idSeed hashes a node id to 64 bits (FNV-1a, then mixed).
func idSeed(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 1099511628211
	}
	return mix(h)
}

// mix is SplitMix64's finalizer: a bijection whose output bits each depend
// on every input bit.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
