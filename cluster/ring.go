package cluster

import (
	"math"
	"slices"
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

// BlockSlots is how many contiguous slots Assign places together: the
// 16384 slots are Blocks blocks of BlockSlots slots each.
const BlockSlots = 64

// Blocks is how many blocks of slots Assign places.
const Blocks = engine.SlotCount / BlockSlots

// Assign computes the owner of every slot. It places blocks of
// BlockSlots contiguous slots rather than single slots, so that a member
// owns a few long ranges (about Blocks*(N-1)/N ranges in all for N
// members, not about 16384*(N-1)/N), and it gives each member its share
// exactly (to the slot), by weight, rather than by chance:
//
//   - Each member's share is its weight, bounded by boundWeights (no
//     member counts for more than MaxWeightRatio times the median), over
//     the total, in slots, rounded by largest remainder (shares).
//   - Every (block, member) pair gets a score, weighted rendezvous
//     (highest random weight) hashing of the block and the member's id:
//     -weight/ln(u), u uniform in (0,1) from the hash. Pairs are taken
//     from the highest score down, and each gives its member as many of
//     the block's slots still without an owner as the member has room
//     for within its share, from the first such slot. A block is thus
//     whole with one member, but where a member's share ends, split.
//
// The result depends only on the set of members, not on their order, so
// every node that sees the same members computes the same map. A join or
// a leave moves about 1/N of the slots: the pairs keep their scores, so
// a member that joins takes the blocks it scores highest on, within its
// share, and those of a member that leaves go to the next in their
// pairs' order. Since every member's share changes too, by a part of a
// block, slots also pass between the other members, along the ranking:
// the slots moved are 1.0 to 1.1 times the least possible up to five
// members, about 1.4 times at ten and 3 times at fifty (TestAssignMoves).
// Members with a weight of zero or less (or not a number) own nothing;
// duplicate IDs count once. Members keep the weights they were given;
// only the map uses the bounded ones.
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
	room := shares(weights)
	fill(m, rankPairs(m.Members, weights, room), room, nil)
	return m
}

// rankPair is a (block, member) pair of Assign's ranking; mb indexes the
// sorted members the pairs were ranked over.
type rankPair struct {
	score float64
	block int32
	mb    int16
}

// rankPairs returns the pairs of the members with room (all of them when
// room is nil), highest score first.
func rankPairs(members []Member, weights []float64, room []int) []rankPair {
	equal := true
	for _, w := range weights {
		if w != weights[0] {
			equal = false
		}
	}
	pairs := make([]rankPair, 0, Blocks*len(weights))
	for i, mb := range members {
		if room != nil && room[i] == 0 {
			continue
		}
		seed := idSeed(mb.ID)
		for b := range Blocks {
			h := mix(seed ^ uint64(b+1)*0x9e3779b97f4a7c15)
			// Same weights: the hash orders the pairs exactly (an integer
			// under 2^53 is exact as a float), with no logarithm whose
			// last bit might differ between machines.
			score := float64(h >> 11)
			if !equal {
				u := (score + 0.5) / (1 << 53) // in (0,1)
				score = -weights[i] / math.Log(u)
			}
			pairs = append(pairs, rankPair{score, int32(b), int16(i)})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].score != pairs[j].score {
			return pairs[i].score > pairs[j].score
		}
		if pairs[i].block != pairs[j].block {
			return pairs[i].block < pairs[j].block
		}
		return pairs[i].mb < pairs[j].mb
	})
	return pairs
}

// fill gives m's slots their owners from pairs, in order, each member up
// to its room (by its index in m.Members). With sub, the pairs index a
// larger set of members, and sub maps that index to m.Members' (-1: a
// member left out, whose pairs are skipped).
func fill(m *SlotMap, pairs []rankPair, room []int, sub []int16) {
	for s := range m.Owner {
		m.Owner[s] = -1
	}
	// A pair gives its member as many of the block's slots still without
	// an owner as the member has room for, from the block's first such
	// slot: a block is whole with one member, or split in two or three
	// pieces where a member's share ends inside it.
	var next [Blocks]int // how many of each block's slots have an owner
	left := engine.SlotCount
	for _, p := range pairs {
		mb := p.mb
		if sub != nil {
			if mb = sub[mb]; mb < 0 {
				continue
			}
		}
		take := min(room[mb], BlockSlots-next[p.block])
		if take == 0 {
			continue
		}
		first := int(p.block)*BlockSlots + next[p.block]
		for s := first; s < first+take; s++ {
			m.Owner[s] = mb
		}
		next[p.block] += take
		room[mb] -= take
		if left -= take; left == 0 {
			break
		}
	}
}

// subsets computes the maps of subsets of one map's members, as Assign
// would, for replica placement, which asks for many: Assign(members less
// a few). When every member has the same positive weight, a pair's score
// is its hash alone, the same in every subset (whose members all have
// the same weight too), so a subset's ranking is the whole set's less
// the pairs of the members left out: it is sorted once, and each subset
// costs one pass over it rather than a sort. With weights that differ,
// each subset is ranked anew by Assign.
type subsets struct {
	members []Member   // the whole set's, sorted by ID
	pairs   []rankPair // its ranking of every member's pairs; nil: use Assign
}

func newSubsets(m *SlotMap) *subsets {
	ss := &subsets{members: m.Members}
	w := boundWeights(m.Members)
	if len(w) > 0 && w[0] > 0 && len(m.Members) <= 1<<15 {
		for _, x := range w {
			if x != w[0] {
				return ss
			}
		}
		ss.pairs = rankPairs(m.Members, w, nil)
	}
	return ss
}

// without returns Assign(the members less those at the indexes ex), and
// the index in the whole set of each of its members.
func (ss *subsets) without(ex []int16) (*SlotMap, []int16) {
	out := &SlotMap{}
	sub := make([]int16, len(ss.members))
	var back []int16
	for i, mb := range ss.members {
		sub[i] = -1
		if !slices.Contains(ex, int16(i)) {
			sub[i] = int16(len(out.Members))
			out.Members = append(out.Members, mb)
			back = append(back, int16(i))
		}
	}
	if ss.pairs == nil {
		// Assign sorts by id, as ss.members are: its members keep
		// out.Members' order, and back holds.
		return Assign(out.Members), back
	}
	room := shares(boundWeights(out.Members))
	fill(out, ss.pairs, room, sub)
	return out, back
}

// shares returns how many slots each member owns, by weight: its share
// of engine.SlotCount, rounded down, and one more for the members with
// the largest remainders (ties to the lower index, the lower id).
func shares(weights []float64) []int {
	out := make([]int, len(weights))
	var total float64
	for _, w := range weights {
		total += w
	}
	if !(total > 0) {
		return out
	}
	type rem struct {
		frac float64
		i    int
	}
	var rems []rem
	given := 0
	for i, w := range weights {
		if w <= 0 {
			continue
		}
		exact := float64(w / total * engine.SlotCount) // rounded here: never fused with the subtraction below
		out[i] = int(exact)
		given += out[i]
		rems = append(rems, rem{exact - float64(out[i]), i})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].frac > rems[b].frac })
	for k := 0; given < engine.SlotCount; k = (k + 1) % len(rems) {
		out[rems[k].i]++
		given++
	}
	return out
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
