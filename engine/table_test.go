package engine

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand"
	"testing"
)

// checkTable verifies the table's invariants against want, the model.
func checkTable(t *testing.T, tb *table, seed maphash.Seed, want map[string]entry) {
	t.Helper()
	if tb.count != len(want) {
		t.Fatalf("count %d, model %d", tb.count, len(want))
	}
	n := 0
	for i, s := range tb.slots {
		if s == 0 {
			continue
		}
		n++
		key := tb.keyOf(uint32(s))
		// Every key is reachable from its home slot with no gap.
		h := maphash.Bytes(seed, key)
		if slotTag(h) != s&^refMask {
			t.Fatalf("slot %d: tag does not match its key", i)
		}
		if tb.find(key, h) != i {
			t.Fatalf("slot %d: find(%q) = %d", i, key, tb.find(key, h))
		}
	}
	if n != len(want) {
		t.Fatalf("%d full slots, model %d", n, len(want))
	}
	for k, e := range want {
		i := tb.find([]byte(k), maphash.Bytes(seed, []byte(k)))
		if i < 0 {
			t.Fatalf("key %.20q lost", k)
		}
		got := tb.entryAt(i)
		if e.kind == KindSlidingLog {
			got.a, e.a = 0, 0
		}
		if fmt.Sprint(got) != fmt.Sprint(e) {
			t.Fatalf("key %.20q: entry %+v, want %+v", k, got, e)
		}
	}
	if len(tb.slots) > 0 && (tb.count*4 > len(tb.slots)*3) {
		t.Fatalf("load %d/%d above 3/4", tb.count, len(tb.slots))
	}
}

func randomEntry(rng *rand.Rand) entry {
	e := entry{kind: Kind(1 + rng.Intn(5)), expireMs: rng.Int63()}
	e.a = rng.Int63() - rng.Int63()
	if stateWords[e.kind] > 1 {
		e.b = rng.Int63()
	}
	if stateWords[e.kind] > 2 {
		e.c = -rng.Int63()
	}
	if e.kind == KindSlidingLog {
		e.a = 0
		e.log = []Hit{{rng.Int63(), rng.Int63n(10) + 1}}
	}
	if e.kind == KindGCRA && rng.Intn(2) == 0 {
		// An expiry redis-cell's rule gives: the record leaves it out.
		e.expireMs = floorDiv(e.a, nsPerMs) - rng.Int63n(2)
	}
	return e
}

func TestTableAgainstAModel(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	seed := maphash.MakeSeed()
	tb := table{mem: new(offHeap)}
	want := map[string]entry{}
	keyLens := []int{0, 1, 2, 17, 17, 17, 60, 127, 128, 300, 70000}
	keys := make([]string, 3000)
	for i := range keys {
		b := make([]byte, keyLens[rng.Intn(len(keyLens))])
		rng.Read(b)
		keys[i] = string(b)
	}
	for step := range 60000 {
		k := keys[rng.Intn(len(keys))]
		if step > 30000 && step < 45000 {
			k = keys[rng.Intn(40)] // a phase of churn on few keys: the table shrinks
		}
		h := maphash.Bytes(seed, []byte(k))
		i := tb.find([]byte(k), h)
		if (i >= 0) != (want[k].kind != KindNone) {
			t.Fatalf("step %d: find(%.20q) = %d, model has it: %v", step, k, i, want[k].kind != KindNone)
		}
		switch op := rng.Intn(10); {
		case i >= 0 && op < 4:
			tb.removeAt(i)
			delete(want, k)
		case i >= 0 && op < 8:
			e := randomEntry(rng)
			for e.kind != want[k].kind {
				e = randomEntry(rng)
			}
			if !tb.update(i, e) { // the record's layout cannot hold e
				tb.removeAt(i)
				tb.insert([]byte(k), h, e)
			}
			want[k] = e
		case i < 0:
			e := randomEntry(rng)
			tb.insert([]byte(k), h, e)
			want[k] = e
		}
		if step%997 == 0 {
			checkTable(t, &tb, seed, want)
		}
	}
	checkTable(t, &tb, seed, want)
	if offHeapMin < math.MaxInt && tb.mem.mapped.Load() == 0 {
		t.Fatal("no array was mapped: the model does not test the off-heap arrays")
	}
	// Emptied, it holds nothing, mapped or not.
	for k := range want {
		tb.removeAt(tb.find([]byte(k), maphash.Bytes(seed, []byte(k))))
		delete(want, k)
	}
	checkTable(t, &tb, seed, want)
	if tb.memory() != 0 || tb.arena != nil || tb.logs != nil || tb.mem.mapped.Load() != 0 {
		t.Fatalf("an empty table still holds %d bytes, %d mapped", tb.memory(), tb.mem.mapped.Load())
	}
}

func TestTableLeavesOutDerivableExpiry(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table{mem: new(offHeap)}
	k := []byte("user:000000000001")
	h := maphash.Bytes(seed, k)
	tat := now0 + 2_000_900_000
	tb.insert(k, h, entry{kind: KindGCRA, expireMs: tat / 1e6, a: tat})
	if len(tb.arena) != 27 {
		t.Fatalf("record of %d bytes, want 27", len(tb.arena))
	}
	for _, e := range []entry{
		{kind: KindGCRA, expireMs: tat/1e6 - 1, a: tat},
		{kind: KindGCRA, expireMs: (tat + 5e9) / 1e6, a: tat + 5e9},
	} {
		if !tb.update(tb.find(k, h), e) {
			t.Fatalf("update to %+v refused", e)
		}
		if got := tb.entryAt(tb.find(k, h)); fmt.Sprint(got) != fmt.Sprint(e) {
			t.Fatalf("update to %+v: got %+v", e, got)
		}
	}
	if tb.update(tb.find(k, h), entry{kind: KindGCRA, expireMs: tat/1e6 + 3, a: tat}) {
		t.Fatal("an expiry the record cannot derive must not be written in place")
	}
}

func TestTableCompactsDeadRecords(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table{mem: new(offHeap)}
	key := func(i int) []byte { return fmt.Appendf(nil, "user:%012d", i) }
	for i := range 10000 {
		// expireMs is not floor(a/1e6) or one less: stored explicitly.
		tb.insert(key(i), maphash.Bytes(seed, key(i)), entry{kind: KindGCRA, expireMs: int64(i) + 5, a: int64(i)})
	}
	if got := len(tb.arena); got != 10000*35 {
		t.Fatalf("arena %d bytes for 10000 17-byte GCRA keys with explicit expiry, want 350000", got)
	}
	for i := range 9000 {
		tb.removeAt(tb.find(key(i), maphash.Bytes(seed, key(i))))
	}
	if live := len(tb.arena) - tb.dead; live != 1000*35 || cap(tb.arena) > 4*live {
		t.Fatalf("after removing 90%%: arena len %d cap %d, dead %d", len(tb.arena), cap(tb.arena), tb.dead)
	}
	if len(tb.slots) > 8*1000 {
		t.Fatalf("slots not shrunk: %d for 1000 keys", len(tb.slots))
	}
	for i := 9000; i < 10000; i++ {
		j := tb.find(key(i), maphash.Bytes(seed, key(i)))
		if j < 0 || tb.entryAt(j).a != int64(i) || !bytes.Equal(tb.keyOf(uint32(tb.slots[j])), key(i)) {
			t.Fatalf("key %d lost or changed by compaction", i)
		}
	}
}

// The bytes a 17-byte CL.THROTTLE key costs, slots included, must stay
// under 56 whatever the number of keys in a table: at every count from
// 1000 to 20000, including just after each growth of slots or arena.
func TestTableBytesPerKey(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table{mem: new(offHeap)}
	worst, at := 0.0, 0
	for i := range 20000 {
		k := fmt.Appendf(nil, "user:%012d", i)
		tat := now0 + int64(i)*1e6 + 7e8
		tb.insert(k, maphash.Bytes(seed, k), entry{kind: KindGCRA, expireMs: tat/1e6 - int64(i%2), a: tat})
		if n := i + 1; n >= 1000 {
			if perKey := float64(tb.memory()) / float64(n); perKey > worst {
				worst, at = perKey, n
			}
		}
	}
	t.Logf("worst %.1f bytes per key, at %d keys", worst, at)
	if worst > 56 {
		t.Fatalf("%.1f bytes per key at %d keys, want at most 56", worst, at)
	}
}

func TestTableCompactsLogIDs(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table{mem: new(offHeap)}
	key := func(i int) []byte { return fmt.Appendf(nil, "log:%d", i) }
	for i := range 1000 {
		tb.insert(key(i), maphash.Bytes(seed, key(i)), entry{kind: KindSlidingLog, expireMs: 9, log: []Hit{{int64(i), 1}}})
	}
	for i := range 990 {
		tb.removeAt(tb.find(key(i), maphash.Bytes(seed, key(i))))
	}
	if len(tb.logs) > 200 {
		t.Fatalf("%d log ids kept for 10 logs", len(tb.logs))
	}
	for i := 990; i < 1000; i++ {
		e := tb.entryAt(tb.find(key(i), maphash.Bytes(seed, key(i))))
		if len(e.log) != 1 || e.log[0].At != int64(i) {
			t.Fatalf("log of key %d after renumbering: %+v", i, e.log)
		}
	}
}

// Records are addressed by 32-bit offsets: the arena compacts rather than
// pass the limit, and a table whose live records would not fit refuses.
func TestTableStaysWithinItsOffsets(t *testing.T) {
	seed := maphash.MakeSeed()
	sh := shard{t: table{mem: new(offHeap), limit: 1000}}
	key := func(i int) []byte { return fmt.Appendf(nil, "user:%012d", i) }
	put := func(i int) error {
		k := key(i)
		h := maphash.Bytes(seed, k)
		tat := now0 + int64(i)*1e6
		return sh.putLocked(k, h, sh.t.find(k, h), entry{kind: KindGCRA, expireMs: tat / 1e6, a: tat})
	}
	n := 0
	for ; put(n) == nil; n++ {
	}
	if n != 37 { // 27-byte records under a 1000-byte limit: 37 fit (999 bytes)
		t.Fatalf("%d keys fit, want 37", n)
	}
	if err := put(n); err != ErrShardFull || sh.t.count != 37 {
		t.Fatalf("over the limit: %v with %d keys", err, sh.t.count)
	}
	// Remove a third (the dead bytes are not enough to compact on their
	// own), then insert as many: the arena must compact at the limit, never
	// wrap, and every key must read back.
	for i := range 12 {
		sh.removeLocked(sh.t.find(key(i), maphash.Bytes(seed, key(i))))
	}
	for i := 100; i < 112; i++ {
		if err := put(i); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	if len(sh.t.arena) >= 1000 {
		t.Fatalf("arena of %d bytes past its limit", len(sh.t.arena))
	}
	for _, i := range []int{12, 36, 100, 111} {
		j := sh.t.find(key(i), maphash.Bytes(seed, key(i)))
		if j < 0 || sh.t.entryAt(j).a != now0+int64(i)*1e6 {
			t.Fatalf("key %d lost or changed", i)
		}
	}
}
