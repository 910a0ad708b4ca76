package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand"
	"runtime"
	"slices"
	"testing"

	"github.com/cellserver/cellserver/internal/manual"
	"github.com/cellserver/cellserver/limiter"
)

// checkTable verifies the table's invariants against want, the model.
func checkTable(t *testing.T, tb *table, seed maphash.Seed, want map[string]entry) {
	t.Helper()
	if tb.count != len(want) {
		t.Fatalf("count %d, model %d", tb.count, len(want))
	}
	n, live := 0, 0
	refs := map[uint32]bool{}
	for i, s := range tb.slots {
		if s == 0 {
			continue
		}
		n++
		refs[uint32(s)] = true
		key := tb.keyOf(uint32(s))
		// Every key is reachable from its home slot with no gap.
		h := maphash.Bytes(seed, key)
		if slotTag(h) != s&^refMask {
			t.Fatalf("slot %d: tag does not match its key", i)
		}
		if tb.find(key, h) != i {
			t.Fatalf("slot %d: find(%q) = %d", i, key, tb.find(key, h))
		}
		live += tb.recordSize(uint32(s))
		if tb.kindAt(i) == limiter.KindSlidingLog {
			room, hits, _ := tb.logFields(tb.stateAt(uint32(s)) + 8)
			if hits > room {
				t.Fatalf("slot %d: a log of %d hits in room for %d", i, hits, room)
			}
		}
	}
	if n != len(want) {
		t.Fatalf("%d full slots, model %d", n, len(want))
	}
	// The dead bytes are what the live records do not account for, and
	// the dead records kept for reuse are among them.
	if live != len(tb.arena)-tb.dead {
		t.Fatalf("live records take %d bytes, arena %d with %d dead", live, len(tb.arena), tb.dead)
	}
	kept := 0
	for _, l := range tb.holes {
		for h := l.last; h != 0; h = binary.LittleEndian.Uint32(tb.arena[h:]) {
			if ref := h - 1; refs[ref] || int(ref+l.size) > len(tb.arena) || kept > tb.dead {
				t.Fatalf("dead record of %d bytes at %d: live, past the arena, or more than the dead bytes", l.size, ref)
			}
			kept += int(l.size)
		}
	}
	for k, e := range want {
		i := tb.find([]byte(k), maphash.Bytes(seed, []byte(k)))
		if i < 0 {
			t.Fatalf("key %.20q lost", k)
		}
		got := tb.entryAt(i)
		if got.Log != nil {
			t.Fatalf("key %.20q: entryAt decoded a log", k)
		}
		if e.kind == limiter.KindSlidingLog {
			if hits := tb.logAt(i); !slices.Equal(hits, e.Log) {
				t.Fatalf("key %.20q: log of %d hits %v…, want %d: %v…", k, len(hits), hits[:min(len(hits), 3)],
					len(e.Log), e.Log[:min(len(e.Log), 3)])
			}
			e.Log = nil
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
	e := entry{kind: limiter.Kind(1 + rng.Intn(5)), expireMs: rng.Int63()}
	e.Words[0] = rng.Int63() - rng.Int63()
	if limiter.Kinds[e.kind].Words > 1 {
		e.Words[1] = rng.Int63()
	}
	if limiter.Kinds[e.kind].Words > 2 {
		e.Words[2] = -rng.Int63()
	}
	if e.kind == limiter.KindSlidingLog {
		e.Words[0] = 0 // a log keeps no state words
		e.Log = randomLog(rng, 1+rng.Intn(8), nil)
	}
	if e.kind == limiter.KindGCRA && rng.Intn(2) == 0 {
		// An expiry redis-cell's rule gives: the record leaves it out.
		e.expireMs = unixMs(e.Words[0]) - rng.Int63n(2)
	}
	return e
}

// randomLog returns a new log of n hits: prev's first ones, then random
// ones. Hits of any value must survive the record (Import takes any).
func randomLog(rng *rand.Rand, n int, prev []limiter.Hit) []limiter.Hit {
	log := make([]limiter.Hit, n)
	k := copy(log, prev)
	for ; k < n; k++ {
		log[k] = limiter.Hit{At: rng.Int63() - rng.Int63(), N: rng.Int63n(10) + 1}
		if rng.Intn(20) == 0 {
			log[k].N = -rng.Int63()
		}
	}
	return log
}

// nextLog returns the log a key holding prev might hold next: one or a
// few hits more (the usual growth), a fraction of it (hits left the
// window), or any length, up to a few hundred (beyond scratchKeep).
func nextLog(rng *rand.Rand, prev []limiter.Hit) []limiter.Hit {
	switch n := len(prev); rng.Intn(6) {
	case 0, 1:
		return randomLog(rng, n+1, prev)
	case 2:
		return randomLog(rng, n+1+rng.Intn(4), prev[min(n, rng.Intn(3)):])
	case 3:
		return randomLog(rng, max(1, n/(2+rng.Intn(8))), prev[n/2:])
	case 4:
		return randomLog(rng, n, prev[:n-1]) // the same length: the newest hit changed
	default:
		return randomLog(rng, 1+rng.Intn(400), nil)
	}
}

func TestTableAgainstAModel(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	seed := maphash.MakeSeed()
	tb := table{mem: new(manual.Allocator)}
	want := map[string]entry{}
	keyLens := []int{0, 1, 2, 17, 17, 17, 60, 127, 128, 300, 70000}
	keys := make([]string, 3000)
	for i := range keys {
		b := make([]byte, keyLens[rng.Intn(len(keyLens))])
		rng.Read(b)
		keys[i] = string(b)
	}
	moved := 0 // records rewritten elsewhere than in place
	for step := range 60000 {
		k := keys[rng.Intn(len(keys))]
		if step > 30000 && step < 45000 {
			k = keys[rng.Intn(40)] // a phase of churn on few keys: the table shrinks
		}
		h := maphash.Bytes(seed, []byte(k))
		i := tb.find([]byte(k), h)
		if (i >= 0) != (want[k].kind != limiter.KindNone) {
			t.Fatalf("step %d: find(%.20q) = %d, model has it: %v", step, k, i, want[k].kind != limiter.KindNone)
		}
		var e entry
		switch op := rng.Intn(10); {
		case i >= 0 && op < 3:
			tb.removeAt(i)
			delete(want, k)
			continue
		case i >= 0 && op < 8: // the key's next state
			e = randomEntry(rng)
			for e.kind != want[k].kind {
				e = randomEntry(rng)
			}
			if e.kind == limiter.KindSlidingLog {
				e.Log = nextLog(rng, want[k].Log)
			}
		case i >= 0 && op < 9: // any kind, as Import may store
			e = randomEntry(rng)
		case i >= 0:
			continue
		default:
			e = randomEntry(rng)
		}
		ref := uint32(0)
		if i >= 0 {
			ref = uint32(tb.slots[i])
		}
		if !tb.put(i, []byte(k), h, &e) {
			t.Fatalf("step %d: put refused with no limit", step)
		}
		if j := tb.find([]byte(k), h); i >= 0 && (j != i || uint32(tb.slots[j]) != ref) {
			moved++
		}
		want[k] = e
		if step%997 == 0 {
			checkTable(t, &tb, seed, want)
			if tb.releaseScratch(); cap(tb.scratch) > scratchKeep {
				t.Fatalf("scratch of %d hits kept", cap(tb.scratch))
			}
		}
	}
	checkTable(t, &tb, seed, want)
	t.Logf("%d records moved; arena %d bytes, %d dead", moved, len(tb.arena), tb.dead)
	if manual.Enabled && tb.mem.Mapped() == 0 {
		t.Fatal("no array was mapped: the model does not test the off-heap arrays")
	}
	// Emptied, it holds nothing, mapped or not.
	for k := range want {
		tb.removeAt(tb.find([]byte(k), maphash.Bytes(seed, []byte(k))))
		delete(want, k)
	}
	checkTable(t, &tb, seed, want)
	if tb.memory() != 0 || tb.arena != nil || tb.scratch != nil || tb.mem.Mapped() != 0 {
		t.Fatalf("an empty table still holds %d bytes, %d mapped", tb.memory(), tb.mem.Mapped())
	}
}

func TestTableLeavesOutDerivableExpiry(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table{mem: new(manual.Allocator)}
	k := []byte("user:000000000001")
	h := maphash.Bytes(seed, k)
	tat := now0 + 2_000_900_000
	tb.insert(k, h, &entry{kind: limiter.KindGCRA, expireMs: tat / 1e6, State: limiter.State{Words: [3]int64{tat}}}, 0)
	if len(tb.arena) != 27 {
		t.Fatalf("record of %d bytes, want 27", len(tb.arena))
	}
	for _, e := range []entry{
		{kind: limiter.KindGCRA, expireMs: tat/1e6 - 1, State: limiter.State{Words: [3]int64{tat}}},
		{kind: limiter.KindGCRA, expireMs: (tat + 5e9) / 1e6, State: limiter.State{Words: [3]int64{tat + 5e9}}},
	} {
		if !tb.update(tb.find(k, h), &e) {
			t.Fatalf("update to %+v refused", e)
		}
		if got := tb.entryAt(tb.find(k, h)); fmt.Sprint(got) != fmt.Sprint(e) {
			t.Fatalf("update to %+v: got %+v", e, got)
		}
	}
	if tb.update(tb.find(k, h), &entry{kind: limiter.KindGCRA, expireMs: tat/1e6 + 3, State: limiter.State{Words: [3]int64{tat}}}) {
		t.Fatal("an expiry the record cannot derive must not be written in place")
	}
}

func TestTableCompactsDeadRecords(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table{mem: new(manual.Allocator)}
	key := func(i int) []byte { return fmt.Appendf(nil, "user:%012d", i) }
	for i := range 10000 {
		// expireMs is not floor(a/1e6) or one less: stored explicitly.
		tb.insert(key(i), maphash.Bytes(seed, key(i)), &entry{kind: limiter.KindGCRA, expireMs: int64(i) + 5, State: limiter.State{Words: [3]int64{int64(i)}}}, 0)
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
		if j < 0 || tb.entryAt(j).Words[0] != int64(i) || !bytes.Equal(tb.keyOf(uint32(tb.slots[j])), key(i)) {
			t.Fatalf("key %d lost or changed by compaction", i)
		}
	}
}

// The bytes a 17-byte CL.THROTTLE key costs, slots included, must stay
// under 56 whatever the number of keys in a table: at every count from
// 1000 to 20000, including just after each growth of slots or arena.
func TestTableBytesPerKey(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table{mem: new(manual.Allocator)}
	worst, at := 0.0, 0
	for i := range 20000 {
		k := fmt.Appendf(nil, "user:%012d", i)
		tat := now0 + int64(i)*1e6 + 7e8
		tb.insert(k, maphash.Bytes(seed, k), &entry{kind: limiter.KindGCRA, expireMs: tat/1e6 - int64(i%2), State: limiter.State{Words: [3]int64{tat}}}, 0)
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

// Records are addressed by 32-bit offsets: the arena compacts rather than
// pass the limit, and a table whose live records would not fit refuses.
func TestTableStaysWithinItsOffsets(t *testing.T) {
	seed := maphash.MakeSeed()
	sh := shard{t: table{mem: new(manual.Allocator), limit: 1000}}
	key := func(i int) []byte { return fmt.Appendf(nil, "user:%012d", i) }
	put := func(i int) error {
		k := key(i)
		h := maphash.Bytes(seed, k)
		tat := now0 + int64(i)*1e6
		return sh.putLocked(k, h, sh.t.find(k, h), &entry{kind: limiter.KindGCRA, expireMs: tat / 1e6, State: limiter.State{Words: [3]int64{tat}}})
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
	// own), then insert as many shorter keys, whose records cannot reuse
	// the dead ones: the arena must compact at the limit, never wrap, and
	// every key must read back.
	for i := range 12 {
		sh.removeLocked(sh.t.find(key(i), maphash.Bytes(seed, key(i))))
	}
	short := func(i int) []byte { return fmt.Appendf(nil, "u:%012d", i) }
	for i := 100; i < 112; i++ {
		k := short(i)
		h := maphash.Bytes(seed, k)
		tat := now0 + int64(i)*1e6
		if err := sh.putLocked(k, h, -1, &entry{kind: limiter.KindGCRA, expireMs: tat / 1e6, State: limiter.State{Words: [3]int64{tat}}}); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	if len(sh.t.arena) >= 1000 || sh.t.dead != 0 {
		t.Fatalf("arena of %d bytes, %d dead: past its limit or not compacted", len(sh.t.arena), sh.t.dead)
	}
	for _, k := range [][]byte{key(12), key(36), short(100), short(111)} {
		j := sh.t.find(k, maphash.Bytes(seed, k))
		if j < 0 || sh.t.entryAt(j).expireMs != sh.t.entryAt(j).Words[0]/1e6 {
			t.Fatalf("key %s lost or changed", k)
		}
	}
}

// A removed record's bytes are taken by the next record of the same size,
// most recently freed first, so that churn neither grows the arena nor
// waits for compaction.
func TestTableReusesDeadRecords(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table{mem: new(manual.Allocator)}
	key := func(i int) []byte { return fmt.Appendf(nil, "user:%012d", i) }
	put := func(i int) {
		k := key(i)
		tb.put(-1, k, maphash.Bytes(seed, k), &entry{kind: limiter.KindGCRA, expireMs: 5, State: limiter.State{Words: [3]int64{int64(i)}}})
	}
	for i := range 1000 {
		put(i)
	}
	size, ref := len(tb.arena), uint32(tb.slots[tb.find(key(500), maphash.Bytes(seed, key(500)))])
	for i := 200; i < 700; i++ {
		tb.removeAt(tb.find(key(i), maphash.Bytes(seed, key(i))))
	}
	for i := 1000; i < 1500; i++ {
		put(i)
	}
	if len(tb.arena) != size || tb.dead != 0 {
		t.Fatalf("arena %d bytes (%d dead) after 500 keys replaced 500 of the same size, was %d", len(tb.arena), tb.dead, size)
	}
	if j := tb.find(key(1199), maphash.Bytes(seed, key(1199))); uint32(tb.slots[j]) != ref {
		t.Fatal("key 500's record was not taken by key 1199")
	}
	for i := range 1500 {
		j := tb.find(key(i), maphash.Bytes(seed, key(i)))
		if (j >= 0) != (i < 200 || i >= 700) || j >= 0 && tb.entryAt(j).Words[0] != int64(i) {
			t.Fatalf("key %d lost, kept or changed", i)
		}
	}
}

// A sliding log lives in its record: a new key's log has room for two
// hits, a growing one moves to a record with room for half as many hits again
// (so a few moves take it to thousands of hits), and one that shrank far
// below its room moves to a smaller record, so that memory follows the
// live hits, yet few times however it shrinks.
func TestTableLogRecords(t *testing.T) {
	seed := maphash.MakeSeed()
	tb := table{mem: new(manual.Allocator)}
	k := []byte("user:000000000001")
	h := maphash.Bytes(seed, k)
	put := func(log []limiter.Hit) uint32 {
		t.Helper()
		if !tb.put(tb.find(k, h), k, h, &entry{kind: limiter.KindSlidingLog, expireMs: 7, State: limiter.State{Log: log}}) {
			t.Fatalf("a log of %d hits refused", len(log))
		}
		i := tb.find(k, h)
		if len(log)%100 > 2 {
			return uint32(tb.slots[i]) // read back a few only: each takes O(n)
		}
		if got := tb.logAt(i); !slices.Equal(got, log) {
			t.Fatalf("a log of %d hits read back as %d: %v", len(log), len(got), got[:min(len(got), 4)])
		}
		if e := tb.entryAt(i); e.kind != limiter.KindSlidingLog || e.expireMs != 7 {
			t.Fatalf("entry %+v", e)
		}
		return uint32(tb.slots[i])
	}
	log := []limiter.Hit{{At: now0, N: 1}}
	ref := put(log)
	// 1 + 1 + 17 + 8 of head, key and expiry, 3 + 8 + 3 of log fields
	// (compact) and 2 × 8 of room.
	if len(tb.arena) != 57 {
		t.Fatalf("a 17-byte key with one hit takes %d bytes, want 57 (room for 2)", len(tb.arena))
	}
	const most = 1500 // past room 2^6: 2-byte room, head and count fields
	moves := 0
	for n := 2; n <= most; n++ {
		log = append(log, limiter.Hit{At: now0 + int64(n), N: int64(n%3 + 1)})
		if r := put(log); r != ref {
			moves++
			ref = r
		}
	}
	// Room 2, then each time the log outgrows its room, half as many hits
	// again: 4, 7, 12, 19, 30, …, 1231, 1848.
	wantRoom, wantMoves := 2, 0
	for ; wantRoom < most; wantMoves++ {
		wantRoom = (wantRoom + 1) + (wantRoom+1)/2
	}
	if room, n, _ := tb.logFields(tb.stateAt(ref) + 8); moves != wantMoves || room != wantRoom || n != most {
		t.Fatalf("%d hits one at a time: %d moves, room %d for %d, want %d moves, room %d",
			most, moves, room, n, wantMoves, wantRoom)
	}
	// Within twice its hits and 16 over, a log stays where it is.
	least := (wantRoom - 16 + 1) / 2
	if r := put(log[:least]); r != ref {
		t.Fatalf("a log of %d hits in room for %d moved", least, wantRoom)
	}
	// Below, it moves to a record with room for half as many hits again:
	// shrinking one hit at a time, it moves each time it loses a quarter.
	moves = 0
	for n := least - 1; n >= 1; n-- {
		if r := put(log[len(log)-n:]); r != ref {
			moves++
			ref = r
		}
		if room, _, _ := tb.logFields(tb.stateAt(ref) + 8); room > 2*n+16 {
			t.Fatalf("room for %d hits kept for %d", room, n)
		}
	}
	if moves == 0 || moves > 30 {
		t.Fatalf("shrinking from %d hits to 1: %d moves", least-1, moves)
	}
	// What is left is the record and at most a few KiB of dead bytes not
	// worth compacting (the log took 24 KiB).
	tb.releaseScratch()
	if tb.memory() > 8192 {
		t.Fatalf("%d bytes held for one log of one hit", tb.memory())
	}

	// Past room 2^13, the room, head and count fields take 3 bytes.
	big := make([]limiter.Hit, 1<<14+10)
	for n := range big {
		big[n] = limiter.Hit{At: now0 + int64(n), N: int64(n%7 + 1)}
	}
	ref = put(big[:len(big)-1])
	if r := put(big); r != ref {
		t.Fatal("a log grown by one hit within its room moved")
	}
	if got := tb.logAt(tb.find(k, h)); !slices.Equal(got, big) {
		t.Fatalf("a log of %d hits read back as %d", len(big), len(got))
	}
	if room, n, at := tb.logFields(tb.stateAt(ref) + 8); n != len(big) || at-(tb.stateAt(ref)+8) != 20 || room < len(big) {
		t.Fatalf("a log of %d hits: room %d, n %d, fields of %d bytes", len(big), room, n, at-(tb.stateAt(ref)+8))
	}
}

// At the arena's limit, a log that must move and cannot fit is refused
// with ErrShardFull, and nothing changes; one that shrank stays in place
// rather than fail.
func TestTableLogAtTheLimit(t *testing.T) {
	seed := maphash.MakeSeed()
	sh := shard{t: table{mem: new(manual.Allocator), limit: 4096}}
	k := []byte("log")
	h := maphash.Bytes(seed, k)
	put := func(key []byte, e entry) error {
		return sh.putLocked(key, maphash.Bytes(seed, key), sh.t.find(key, maphash.Bytes(seed, key)), &e)
	}
	var log []limiter.Hit
	for {
		log = append(log, limiter.Hit{At: now0 + int64(len(log)), N: 1})
		arena, slots, dead := bytes.Clone(sh.t.arena), slices.Clone(sh.t.slots), sh.t.dead
		err := put(k, entry{kind: limiter.KindSlidingLog, expireMs: 9, State: limiter.State{Log: log}})
		if err == nil {
			continue
		}
		if err != ErrShardFull {
			t.Fatalf("a log of %d hits: %v", len(log), err)
		}
		if !bytes.Equal(sh.t.arena, arena) || !slices.Equal(sh.t.slots, slots) || sh.t.dead != dead {
			t.Fatalf("a refused log of %d hits changed the table", len(log))
		}
		break
	}
	log = log[:len(log)-1]
	if got := sh.t.logAt(sh.t.find(k, h)); !slices.Equal(got, log) || sh.kinds[limiter.KindSlidingLog] != 1 {
		t.Fatalf("after the refusal: %d hits, want %d", len(got), len(log))
	}
	// Room 2, 4, 7, 12, 19, 30, 46, 70, 106, 160, 241: the 242nd hit
	// needs the old record (13 bytes of head, key and expiry, 17+8·241 of
	// log) and the new one (room 362: 13+17+8·362) both, 4884 bytes.
	if len(log) != 241 {
		t.Fatalf("refused at %d hits, want 242", len(log)+1)
	}
	// Fill the arena, then shrink the log to one hit: it cannot move.
	for i := 0; put(fmt.Appendf(nil, "gcra:%d", i), entry{kind: limiter.KindGCRA, expireMs: 5, State: limiter.State{Words: [3]int64{1e9}}}) == nil; i++ {
	}
	ref := uint32(sh.t.slots[sh.t.find(k, h)])
	if err := put(k, entry{kind: limiter.KindSlidingLog, expireMs: 9, State: limiter.State{Log: log[:1]}}); err != nil {
		t.Fatalf("a log that shrank, at the limit: %v", err)
	}
	i := sh.t.find(k, h)
	if uint32(sh.t.slots[i]) != ref || !slices.Equal(sh.t.logAt(i), log[:1]) {
		t.Fatal("the shrunk log moved or changed")
	}
	if len(sh.t.arena) >= 4096 {
		t.Fatalf("arena of %d bytes past its limit", len(sh.t.arena))
	}
}

// Through the engine: SW.HIT EXACT on a log the arena cannot move replies
// ErrShardFull and leaves the log, and every other key, as they were.
func TestSlidingLogPastTheArenaLimit(t *testing.T) {
	e, clock := newTestEngine(t, 1)
	e.shards[0].t.limit = 8192
	log, other := []byte("log"), []byte("other")
	if _, err := e.throttle(other, readmeParams); err != nil {
		t.Fatal(err)
	}
	hit := swExact(100_000, 3600, 1)
	n := 0
	for ; ; n++ {
		clock.Advance(1000) // a new instant: one more hit in the log
		_, err := e.slidingWindow(log, hit)
		if err != nil {
			if !errors.Is(err, ErrShardFull) {
				t.Fatalf("hit %d: %v", n+1, err)
			}
			break
		}
		if n > 1000 {
			t.Fatal("a log past the arena's limit was never refused")
		}
	}
	for range 2 { // the refused hit left nothing behind, and is refused again
		if r, err := e.slidingWindow(log, swExact(100_000, 3600, 0)); err != nil || r.Remaining != 100_000-int64(n) {
			t.Fatalf("read after the refusal: %+v %v, want %d remaining", r, err, 100_000-n)
		}
		if recs := e.ExportSlot(Slot(log)); len(recs) != 1 || len(recs[0].Hits) != n {
			t.Fatalf("exported %+v, want %d hits", recs, n)
		}
		if _, err := e.slidingWindow(log, hit); !errors.Is(err, ErrShardFull) {
			t.Fatalf("hit on a full log: %v", err)
		}
	}
	if _, ok, err := e.Get(other, nil); !ok || err != nil || e.DBSize() != 2 {
		t.Fatalf("other key: %v %v; %d keys", ok, err, e.DBSize())
	}
	// A refund shrinks the log, and hits are taken again.
	if _, err := e.slidingWindow(log, swExact(100_000, 3600, -int64(n))); err != nil || e.Exists(log, nil) {
		t.Fatalf("refund of every hit: %v, key exists: %v", err, e.Exists(log, nil))
	}
	if r, err := e.slidingWindow(log, hit); err != nil || r.Remaining != 100_000-1 {
		t.Fatalf("hit after the refund: %+v %v", r, err)
	}
}

// A limited request and a read (cost 0) leave the record alone: its log
// still holds a hit that has left the window, which a write would prune.
func TestSlidingLogWriteNoneLeavesTheRecord(t *testing.T) {
	e, clock := newTestEngine(t, 1)
	k := []byte("k")
	for _, at := range []int64{0, 9e9, 9.5e9} {
		clock.Set(now0 + at)
		if r, err := e.slidingWindow(k, swExact(3, 10, 1)); err != nil || r.Limited {
			t.Fatalf("hit at +%d ns: %+v %v", at, r, err)
		}
	}
	clock.Set(now0 + 10e9) // the hit at now0 has left; 2 count: a limit of 2 is reached
	was := bytes.Clone(e.shards[0].t.arena)
	for _, cost := range []int64{1, 0, 3} {
		r, err := e.slidingWindow(k, swExact(2, 10, cost))
		if err != nil || r.Limited != (cost != 0) || r.Remaining != 0 {
			t.Fatalf("cost %d: %+v %v", cost, r, err)
		}
		if !bytes.Equal(e.shards[0].t.arena, was) {
			t.Fatalf("cost %d: the record was rewritten", cost)
		}
	}
}

// Keys whose logs grow allocate nothing per request: a log that outgrows
// its record moves within the arena, which grows by an eighth at a time
// (and off the Go heap once large), where a log on the Go heap took a new
// array at each growth.
func TestSlidingLogGrowthDoesNotAllocate(t *testing.T) {
	e, clock := newTestEngine(t, 1)
	keys := make([][]byte, 20000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:%012d", i)
	}
	hit := swExact(100, 60, 1)
	var before, after runtime.MemStats
	// Pass 0 makes each key, with room for two hits; pass 1 writes in
	// place; pass 2 moves each log (room 4); pass 3 writes in place.
	for pass := range 4 {
		runtime.ReadMemStats(&before)
		for _, k := range keys {
			clock.Advance(1000)
			if r, err := e.slidingWindow(k, hit); err != nil || r.Remaining != 99-int64(pass) {
				t.Fatalf("pass %d: %+v %v", pass, r, err)
			}
		}
		runtime.ReadMemStats(&after)
		if n := after.Mallocs - before.Mallocs; n > uint64(len(keys)/200) {
			t.Fatalf("pass %d: %d allocations for %d requests", pass, n, len(keys))
		}
	}
}

// swExact is an SW.HIT EXACT request in seconds.
func swExact(limit, window, cost int64) limiter.SlidingWindowRequest {
	return limiter.SlidingWindowRequest{Limit: limit, Window: window, Cost: cost, Exact: true}
}
