package persist

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// eachSorted hands the puts and deletes between two flushes in key order,
// a later op on a key after an earlier one, and each flush where it was.
func TestOpsEachSorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var o ops
	type op struct {
		op      byte
		shard   int
		k, v    string
		ordinal int // order of addition
	}
	var added []op
	for i := range 5000 {
		switch {
		case i == 1700 || i == 3300:
			o.add(opFlush, i%7, nil, nil)
			added = append(added, op{opFlush, i % 7, "", "", i})
			continue
		}
		k := binary.BigEndian.AppendUint16(nil, uint16(rng.IntN(40)*400)) // few slots: many keys share one
		k = fmt.Appendf(k, "key%d", rng.IntN(300))
		kind, v := byte(opPut), fmt.Sprint(i)
		if rng.IntN(4) == 0 {
			kind, v = opDelete, ""
		}
		o.add(kind, 0, k, []byte(v))
		added = append(added, op{kind, 0, string(k), v, i})
	}
	// The expected order: each segment between flushes sorted stably by key.
	var want []op
	seg := []op{}
	for _, a := range added {
		if a.op == opFlush {
			slices.SortStableFunc(seg, func(x, y op) int {
				switch {
				case x.k < y.k:
					return -1
				case x.k > y.k:
					return 1
				}
				return 0
			})
			want = append(append(want, seg...), a)
			seg = seg[:0]
			continue
		}
		seg = append(seg, a)
	}
	slices.SortStableFunc(seg, func(x, y op) int {
		switch {
		case x.k < y.k:
			return -1
		case x.k > y.k:
			return 1
		}
		return 0
	})
	want = append(want, seg...)
	for round := range 2 { // the second reuses the scratch
		i := 0
		o.eachSorted(func(kind byte, shard int, k, v []byte) {
			if i >= len(want) {
				t.Fatalf("round %d: more ops than added", round)
			}
			w := want[i]
			if kind != w.op || shard != w.shard || string(k) != w.k || string(v) != w.v {
				t.Fatalf("round %d: op %d = %d %d %q %q, want %+v", round, i, kind, shard, k, v, w)
			}
			i++
		})
		if i != len(want) {
			t.Fatalf("round %d: %d ops, want %d", round, i, len(want))
		}
	}
}
