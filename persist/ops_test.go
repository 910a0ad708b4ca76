package persist

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// each hands the net effect of the parts: the slots of the flushed shards
// as runs, then every key left once, in key order, with its last op; a
// flush voids the parts of its shard before it, not its own ops. Three
// takes of every shard (as after two failed snapshots), the first and the
// third one only, give both of each's ways: one run a slot, and several
// merged.
func TestOpsEach(t *testing.T) {
	for _, takes := range []int{1, 3} {
		t.Run(fmt.Sprintf("takes=%d", takes), func(t *testing.T) { testOpsEach(t, takes) })
	}
}

func testOpsEach(t *testing.T, takes int) {
	rng := rand.New(rand.NewPCG(1, uint64(takes)))
	const shards = 8
	slotsOf := func(shard int) []int {
		var s []int
		for slot := range engine.SlotCount {
			if slot%shards == shard {
				s = append(s, slot)
			}
		}
		return s
	}
	var o ops
	defer o.reset() // gives its mapped buffers back
	var p part
	type last struct {
		op byte
		v  string
	}
	want := map[string]last{}
	flushed := map[int]bool{}
	ops := 0
	for take := range takes {
		for shard := range shards {
			p.reset(shard)
			if (take == takes-1 && shard == 3) || (take == 0 && shard == 5) || (takes > 1 && take == 1 && shard == 5) {
				p.flushed = true
				flushed[shard] = true
				for k := range want {
					if int(binary.BigEndian.Uint16([]byte(k)))%shards == shard {
						delete(want, k)
					}
				}
			}
			for i := range 300 {
				// Few slots per shard: many keys share one.
				slot := (rng.IntN(10)*37*shards + shard) % engine.SlotCount
				k := binary.BigEndian.AppendUint16(nil, uint16(slot))
				if rng.IntN(2) == 0 {
					k = fmt.Appendf(k, "key%d", rng.IntN(60))
				} else { // alike in the 16 bytes keyWords reads, and with a zero byte
					k = fmt.Appendf(k, "a-long-shared-prefix:%d\x00%d", rng.IntN(5), rng.IntN(5))
				}
				kind, v := byte(opPut), fmt.Sprint(take, shard, i)
				if rng.IntN(4) == 0 {
					kind, v = opDelete, ""
					p.add(kind, k, nil)
				} else {
					r := engine.Record{Key: []byte(v), Kind: limiter.KindGCRA}
					p.addRecord(k, r)
					v = string(r.AppendBinary(nil))
				}
				want[string(k)] = last{kind, v}
				ops++
			}
			o.addPart(&p)
		}
	}
	var wantKeys []string
	for k := range want {
		wantKeys = append(wantKeys, k)
	}
	slices.Sort(wantKeys)
	var wantDrops [][2]int
	for lo := 0; lo < engine.SlotCount; lo++ {
		if flushed[lo%shards] {
			if n := len(wantDrops); n > 0 && wantDrops[n-1][1] == lo {
				wantDrops[n-1][1] = lo + 1
			} else {
				wantDrops = append(wantDrops, [2]int{lo, lo + 1})
			}
		}
	}
	for round := range 2 { // the second reuses the scratch
		var drops [][2]int
		var keys []string
		err := o.each(slotsOf, func(lo, hi int) error {
			if len(keys) > 0 {
				t.Fatalf("round %d: a dropped range after a key", round)
			}
			drops = append(drops, [2]int{lo, hi})
			return nil
		}, func(op byte, k, v []byte) error {
			w, ok := want[string(k)]
			if !ok || op != w.op || string(v) != w.v {
				t.Fatalf("round %d: key %q: op %d %q, want %+v (present %v)", round, k, op, v, w, ok)
			}
			keys = append(keys, string(k))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(keys, wantKeys) {
			t.Fatalf("round %d: %d keys, want %d, in order", round, len(keys), len(wantKeys))
		}
		if !slices.Equal(drops, wantDrops) {
			t.Fatalf("round %d: dropped %v, want %v", round, drops, wantDrops)
		}
	}
	if o.n > ops || o.n < len(want) {
		t.Fatalf("%d ops kept of %d added, %d keys", o.n, ops, len(want))
	}
	o.reset()
	if o.len() != 0 || o.size() != 0 {
		t.Fatal("reset left ops")
	}
}

// each refuses a change outside its shard's slots, rather than lose it.
func TestOpsEachRefusesStrayKey(t *testing.T) {
	slotsOf := func(shard int) []int { return []int{shard} }
	var o ops
	defer o.reset() // gives its mapped buffers back
	var p part
	p.reset(1)
	p.add(opPut, []byte("\x00\x05a"), nil) // slot 5, not shard 1's
	o.addPart(&p)
	err := o.each(slotsOf, nil, func(byte, []byte, []byte) error { return nil })
	if err == nil {
		t.Fatal("each = nil error for a key outside its shard's slots")
	}
	stop := fmt.Errorf("stop")
	o.reset()
	p.reset(5)
	p.add(opPut, []byte("\x00\x05a"), nil)
	o.addPart(&p)
	if err := o.each(slotsOf, nil, func(byte, []byte, []byte) error { return stop }); err != stop {
		t.Fatalf("each returned %v, want point's error", err)
	}
}
