package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cellserver/cellserver/limiter"
)

// unpaced is a pacer that never stops a tick: the tests count ticks, not
// time.
func unpaced() *pacer { return &pacer{slice: time.Hour, total: time.Hour} }

// A mass expiry in one shard (a {tag} puts every key of a slot there) is
// reclaimed by one tick's work, lock hold after bounded lock hold, not at
// one shard's share of each tick; until then DBSIZE counts the keys not
// reclaimed yet, from the shards' counts, without walking them.
func TestSweepKeepsUpWithOneShardMassExpiry(t *testing.T) {
	e, clock := newTestEngine(t, DefaultShards)
	const n = 200000
	for i := range n {
		if _, err := e.throttle(fmt.Appendf(nil, "{t}user:%d", i), readmeParams); err != nil {
			t.Fatal(err)
		}
	}
	hot := e.shardFor([]byte("{t}"))
	clock.Advance(10e9) // every key (ttl 2 s) has expired
	if got := e.DBSize(); got != n {
		t.Fatalf("DBSIZE = %d right after the expiry, want the %d keys not reclaimed yet: it walked the keyspace", got, n)
	}
	if e.Exists([]byte("{t}user:7"), nil) {
		t.Fatal("an expired key exists")
	}
	// One hold of the shard's lock examines at most sweepMaxPerShard
	// entries, and says the shard is worth another.
	if examined, removed, more := e.sweepHold(hot, 1<<20); examined > sweepMaxPerShard || removed != examined || !more {
		t.Fatalf("one hold examined %d, removed %d, more %v; want at most %d, all, true", examined, removed, more, sweepMaxPerShard)
	}
	// A tick examines up to 8 rounds of the budget (65536 entries): 200000
	// keys take one tick. Before the sweep stayed in a hot shard, a tick
	// reclaimed 8 × 400 of them: 63 ticks, 6 s at 10 ticks a second.
	ticks := 0
	for e.DBSize() > 0 && ticks < 3 {
		e.sweepTick(65536, unpaced())
		ticks++
	}
	if got := e.DBSize(); got != 0 || ticks > 1 {
		t.Fatalf("DBSIZE = %d after %d ticks, want 0 after 1", got, ticks)
	}
	if st := e.Stats(); st.ExpiredKeys != n || st.Keys != 0 {
		t.Fatalf("stats: %d expired, %d keys", st.ExpiredKeys, st.Keys)
	}
}

// fillExpired puts n keys into sh, each expiring at now0, with hashes
// drawn from a PCG seeded with seed instead of the engine's random seed:
// where the keys lie in the table, and so where its shrinks fall in the
// sweep's walk, is the same in every run.
func fillExpired(sh *shard, n int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for i := range n {
		k := fmt.Appendf(nil, "{t}user:%d", i)
		sh.t.insert(k, rng.Uint64(), &entry{kind: limiter.KindGCRA, expireMs: now0 / 1e6, State: limiter.State{Words: [3]int64{now0}}}, 0)
		sh.kinds[limiter.KindGCRA]++
	}
}

// A sample examines as many entries as it asks for while its shard holds
// that many, so that the sweep never takes a shard for done while it is
// still mostly expired. The sweep removes keys in slot order, so those
// left lie at the far end of the table; a removal that shrinks it (again
// and again as it empties) starts the walk over at the first of the new
// slots, and the walk crosses the empty ones before it reaches them. That
// walk has the whole new table to cover, whatever the steps already taken
// in the larger one.
func TestSweepSampleSpansAShrink(t *testing.T) {
	for seed := range uint64(4) {
		e, clock := newTestEngine(t, 1)
		sh := &e.shards[0]
		fillExpired(sh, 20000, seed)
		clock.Advance(10e9)
		nowMs := unixMs(clock.Now())
		sh.mu.Lock()
		for samples := 0; sh.t.count > 0; samples++ {
			count, size := sh.t.count, len(sh.t.slots)
			if n, _ := sh.sweepLocked(nowMs, sweepSample); n != min(count, sweepSample) {
				t.Fatalf("seed %d, sample %d: examined %d entries of a shard of %d keys in %d slots (%d after), want %d",
					seed, samples, n, count, size, len(sh.t.slots), min(count, sweepSample))
			}
		}
		sh.mu.Unlock()
	}
}

// TestSweepKeepsUpWithOneShardMassExpiry's promise, one tick, under fixed
// hashes: seeds whose table shrinks inside several of the last samples
// (were each such sample to end the shard's turn in its round, those turns
// would use up the tick's rounds).
func TestSweepOneTickReclaimsOneShardForFixedHashes(t *testing.T) {
	for _, seed := range []uint64{4, 10} {
		e, clock := newTestEngine(t, DefaultShards)
		fillExpired(e.shardFor([]byte("{t}")), 200000, seed)
		clock.Advance(10e9)
		e.sweepTick(65536, unpaced())
		if got := e.DBSize(); got != 0 {
			t.Fatalf("seed %d: DBSIZE = %d after one tick, want 0", seed, got)
		}
	}
}

// A tick whose budget runs out in a hot shard goes on in that shard at the
// next tick, before the others, whether or not the budget ends on a whole
// sample.
func TestSweepResumesInAHotShard(t *testing.T) {
	for _, budget := range []int{1000, 1010} {
		e, clock := newTestEngine(t, 4)
		for i := range 5000 {
			e.throttle(fmt.Appendf(nil, "{t}k%d", i), readmeParams)
		}
		clock.Advance(10e9)
		hot := e.shardFor([]byte("{t}")).idx
		e.sweepNext = hot
		if got := e.Sweep(budget); got != budget {
			t.Fatalf("Sweep(%d) removed %d", budget, got)
		}
		if e.sweepNext != hot {
			t.Fatalf("after Sweep(%d), the next sweep starts at shard %d, not at the hot shard %d", budget, e.sweepNext, hot)
		}
	}
}

// KEYS walks a shard of any size a chunk at a time: keep, which runs
// under the shard's lock, is never called more than a chunk's worth of
// times without the lock being let go (fn runs in between, unlocked).
func TestKeysLetsGoOfTheLockBetweenChunks(t *testing.T) {
	e, _ := newTestEngine(t, 1)
	const n = 10 * keysChunk
	for i := range n {
		e.throttle(fmt.Appendf(nil, "k%d", i), readmeParams)
	}
	sh := &e.shards[0]
	run, longest, got := 0, 0, 0
	e.Keys(func([]byte) bool {
		run++
		longest = max(longest, run)
		return true
	}, 0, func([]byte) {
		if !sh.mu.TryLock() {
			t.Fatal("fn runs with the shard locked")
		}
		sh.mu.Unlock()
		run = 0
		got++
	})
	if got != n || longest > keysChunk+keysChunk/4 {
		t.Fatalf("Keys passed %d of %d keys, up to %d under one hold of the lock (a chunk is %d)", got, n, longest, keysChunk)
	}
}

// SlotKeys passes the live keys of one slot, up to its max; CountKeysInSlot
// counts them.
func TestSlotKeys(t *testing.T) {
	e, clock := newTestEngine(t, 1)
	for i := range 3000 {
		e.throttle(fmt.Appendf(nil, "{a}k%d", i), readmeParams)
		e.throttle(fmt.Appendf(nil, "{b}k%d", i), readmeParams)
	}
	slot := Slot([]byte("a"))
	seen := map[string]bool{}
	if n := e.SlotKeys(slot, -1, func(k []byte) { seen[string(k)] = true }); n != 3000 || len(seen) != 3000 {
		t.Fatalf("SlotKeys passed %d keys, %d distinct; want 3000", n, len(seen))
	}
	for k := range seen {
		if Slot([]byte(k)) != slot {
			t.Fatalf("SlotKeys passed %q of another slot", k)
		}
	}
	if n := e.SlotKeys(slot, 10, func([]byte) {}); n != 10 {
		t.Fatalf("SlotKeys with max 10 passed %d", n)
	}
	if n := e.CountKeysInSlot(slot); n != 3000 {
		t.Fatalf("CountKeysInSlot = %d", n)
	}
	clock.Advance(10e9)
	if n := e.CountKeysInSlot(slot); n != 0 {
		t.Fatalf("CountKeysInSlot = %d after expiry", n)
	}
}

// longestRun returns the longest run of full slots in t.
func longestRun(t *table) int {
	longest, run := 0, 0
	for _, s := range append(t.slots, t.slots...) { // twice round: a run may wrap
		if s == 0 {
			run = 0
			continue
		}
		run++
		longest = max(longest, min(run, len(t.slots)))
	}
	return longest
}

// The sweep removes keys in slot order, so those it has not reached yet
// lie in one part of hash space. A table that shrinks meanwhile keeps them
// spread over its slots (table.shrink): rehashed into twice their number
// of slots, they would form one run as long as they are many, which every
// removal at its start walks, and a mass expiry of one shard would take
// seconds of its lock.
func TestShrinkMidSweepKeepsRunsShort(t *testing.T) {
	e, clock := newTestEngine(t, 1)
	const n = 50000
	for i := range n {
		e.throttle(fmt.Appendf(nil, "k%d", i), readmeParams)
	}
	clock.Advance(10e9)
	sh := &e.shards[0]
	for calls := 0; sh.t.count > 0; calls++ {
		size := len(sh.t.slots)
		e.Sweep(sweepSample)
		if len(sh.t.slots) == size && calls%50 != 0 {
			continue
		}
		if run := longestRun(&sh.t); run > 1000 {
			t.Fatalf("a run of %d full slots of %d, with %d keys left", run, len(sh.t.slots), sh.t.count)
		}
	}
	if len(sh.t.slots) != 0 {
		t.Fatalf("%d slots left", len(sh.t.slots))
	}
}

// ExportSlot and DeleteSlot walk a slot's shard a chunk at a time, the
// lock let go in between, and still export, then delete, every key of the
// slot and no other.
func TestSlotWalksLetGoOfTheLock(t *testing.T) {
	e, clock := newTestEngine(t, 1)
	const n = 10 * keysChunk
	e.throttle([]byte("{a}old"), readmeParams)
	clock.Advance(10e9) // {a}old (ttl 2 s) expires; the keys made now live
	for i := range n {
		e.throttle(fmt.Appendf(nil, "{a}k%d", i), readmeParams)
		e.throttle(fmt.Appendf(nil, "{b}k%d", i), readmeParams)
	}
	sh := &e.shards[0]
	between := 0
	walkBetween = func() {
		if !sh.mu.TryLock() {
			t.Fatal("the shard is locked between chunks")
		}
		sh.mu.Unlock()
		between++
	}
	defer func() { walkBetween = nil }()
	slot := Slot([]byte("a"))
	if recs := e.ExportSlot(slot); len(recs) != n {
		t.Fatalf("ExportSlot: %d records, want %d", len(recs), n)
	}
	if between < 8 {
		t.Fatalf("ExportSlot let go of the lock %d times over %d keys", between, 2*n)
	}
	if got := e.DeleteSlot(slot); got != n {
		t.Fatalf("DeleteSlot = %d, want %d (the expired key not counted)", got, n)
	}
	if got, want := e.DBSize(), int64(n); got != want {
		t.Fatalf("DBSIZE %d after DeleteSlot, want the %d keys of {b}", got, want)
	}
	if st := e.Stats(); st.ExpiredKeys != 1 {
		t.Fatalf("%d expired, want {a}old", st.ExpiredKeys)
	}
}
