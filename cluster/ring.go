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
// (weighted rendezvous: score = -weight / ln(u), u uniform in (0,1)).
// Members with a weight of zero or less own nothing; duplicate IDs count
// once.
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
	seeds := make([]uint64, len(m.Members))
	equal := true
	for i, mb := range m.Members {
		seeds[i] = idSeed(mb.ID)
		if mb.Weight != m.Members[0].Weight {
			equal = false
		}
	}
	for s := range m.Owner {
		best, bestScore := int16(-1), math.Inf(-1)
		var bestHash uint64
		for i, mb := range m.Members {
			if mb.Weight <= 0 {
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
			if score := -mb.Weight / math.Log(u); score > bestScore {
				best, bestScore = int16(i), score
			}
		}
		m.Owner[s] = best
	}
	return m
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
