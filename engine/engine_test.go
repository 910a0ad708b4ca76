package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/ahead"
	"github.com/cellserver/cellserver/internal/mono"
	"github.com/cellserver/cellserver/limiter"
)

// now0 is a whole second, so that sub-second parts in the tests are
// exactly what they say.
const now0 = int64(1_700_000_000_000_000_000)

const nsPerMs = int64(1e6)

func newTestEngine(t *testing.T, shards int) (*Engine, *ManualClock) {
	t.Helper()
	clock := NewManualClock(now0)
	e, err := New(Config{Shards: shards, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, clock
}

func TestSlot(t *testing.T) {
	// Values from Redis's CLUSTER KEYSLOT.
	cases := map[string]int{
		"foo":                  12182,
		"bar":                  5061,
		"hello":                866,
		"123456789":            12739, // CRC16/XMODEM check value 0x31C3
		"{user1000}.following": Slot([]byte("user1000")),
		"foo{}{bar}":           Slot([]byte("foo{}{bar}")), // empty tag: whole key
		"foo{{bar}}zap":        Slot([]byte("{bar")),
		"foo{bar}{zap}":        Slot([]byte("bar")),
		"":                     0,
	}
	for k, want := range cases {
		if got := Slot([]byte(k)); got != want {
			t.Errorf("Slot(%q) = %d, want %d", k, got, want)
		}
	}
	if Slot([]byte("{user1000}.following")) != Slot([]byte("{user1000}.followers")) {
		t.Error("hash tags must put keys in one slot")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, n := range []int{-1, 3, 100, 32768} {
		c := Config{Shards: n}
		c.EnsureDefaults()
		if err := c.Validate(); !errors.Is(err, ErrBadShards) {
			t.Errorf("Shards %d: got %v, want ErrBadShards", n, err)
		}
	}
	for _, n := range []int{1, 2, 256, 16384} {
		if _, err := New(Config{Shards: n}); err != nil {
			t.Errorf("Shards %d: %v", n, err)
		}
	}
}

var readmeParams = limiter.GCRAParams{Interval: 2e9, Tolerance: 32e9, Limit: 16, Increment: 2e9}

func TestThrottleStorageAndExpiry(t *testing.T) {
	e, clock := newTestEngine(t, 4)
	key := []byte("user123")
	clock.Set(now0 + 500_000) // half a millisecond into a ms
	r, err := e.throttle(key, readmeParams)
	if err != nil || r != (limiter.Result{Limited: false, Limit: 16, Remaining: 15, RetryAfter: -1, ResetAfter: 2}) {
		t.Fatalf("Throttle = %+v, %v", r, err)
	}
	if tat, ok, err := e.Get(key, nil); err != nil || !ok || tat != now0+500_000+2e9 {
		t.Fatalf("Get = %d, %v, %v", tat, ok, err)
	}
	if got := e.PTTL(key, nil); got != 2000 {
		t.Fatalf("PTTL = %d, want 2000", got)
	}
	if got := e.Type(key, nil); got != limiter.KindGCRA || got.TypeName() != "string" {
		t.Fatalf("Type = %v", got)
	}
	// Expiry ms = floor(now/1e6) + 2000. Still there during that ms…
	clock.Set(now0 + 2000*nsPerMs + 999_999)
	if !e.Exists(key, nil) || e.PTTL(key, nil) != 0 {
		t.Fatalf("key must live to the end of its expiry ms (PTTL %d)", e.PTTL(key, nil))
	}
	// …and gone the ns after.
	clock.Set(now0 + 2001*nsPerMs)
	if e.Exists(key, nil) || e.PTTL(key, nil) != -2 {
		t.Fatal("key must be gone once now_ms > expire_ms")
	}
	if st := e.Stats(); st.Keys != 0 || st.ExpiredKeys != 1 {
		t.Fatalf("stats after lazy expiry: %+v", st)
	}
}

func TestQuantityZeroLeavesZeroTTLKey(t *testing.T) {
	e, clock := newTestEngine(t, 1)
	key := []byte("k")
	p := readmeParams
	p.Increment = 0
	if r, _ := e.throttle(key, p); r != (limiter.Result{Limited: false, Limit: 16, Remaining: 16, RetryAfter: -1, ResetAfter: 0}) {
		t.Fatalf("got %+v", r)
	}
	if !e.Exists(key, nil) || e.PTTL(key, nil) != 0 {
		t.Fatal("a 0 ms ttl key exists until its millisecond ends")
	}
	clock.Advance(nsPerMs)
	if e.Exists(key, nil) {
		t.Fatal("gone in the next millisecond")
	}
}

func TestWrongTypeChangesNothing(t *testing.T) {
	e, _ := newTestEngine(t, 2)
	key := []byte("k")
	if _, err := e.throttle(key, readmeParams); err != nil {
		t.Fatal(err)
	}
	before, _, _ := e.Get(key, nil)
	if _, err := e.tokenBucket(key, limiter.TokenBucketRequest{Capacity: 1, Refill: 1, Period: 1, Cost: 1}); !errors.Is(err, ErrWrongType) {
		t.Fatalf("TB on a GCRA key: %v", err)
	}
	if _, err := e.slidingWindow(key, limiter.SlidingWindowRequest{Limit: 1, Window: 1, Cost: 1}); !errors.Is(err, ErrWrongType) {
		t.Fatalf("SW on a GCRA key: %v", err)
	}
	if _, err := e.fixedWindow(key, limiter.FixedWindowRequest{Limit: 1, Window: 1, Cost: 1}); !errors.Is(err, ErrWrongType) {
		t.Fatalf("FW on a GCRA key: %v", err)
	}
	after, _, _ := e.Get(key, nil)
	if before != after {
		t.Fatal("a WRONGTYPE request changed the key")
	}
	sw := []byte("sw")
	if _, err := e.slidingWindow(sw, limiter.SlidingWindowRequest{Limit: 5, Window: 1, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slidingWindow(sw, limiter.SlidingWindowRequest{Limit: 5, Window: 1, Cost: 1, Exact: true}); !errors.Is(err, ErrWrongType) {
		t.Fatalf("EXACT on a counter key: %v", err)
	}
	if _, _, err := e.Get(sw, nil); !errors.Is(err, ErrWrongType) {
		t.Fatalf("GET on a sliding window key: %v", err)
	}
	st := e.Stats()
	if st.KeysByKind[limiter.KindGCRA] != 1 || st.KeysByKind[limiter.KindSlidingWindow] != 1 || st.Keys != 2 {
		t.Fatalf("kind counts: %+v", st)
	}
}

func TestSweepIsBoundedAndReturnsMemory(t *testing.T) {
	e, clock := newTestEngine(t, 4)
	const n = 20000
	for i := range n {
		if _, err := e.throttle(fmt.Appendf(nil, "key:%d", i), readmeParams); err != nil {
			t.Fatal(err)
		}
	}
	live := []byte("live")
	clock.Advance(10e9) // the n keys (ttl 2 s) expire; "live" is made now
	if _, err := e.throttle(live, readmeParams); err != nil {
		t.Fatal(err)
	}
	if got := e.Sweep(100); got > 100 {
		t.Fatalf("one sweep with budget 100 removed %d", got)
	}
	// Each tick may examine 4 shards × 400 entries; 20000 expired keys
	// need about 13 ticks. Allow twice that: a sweep that stalls fails.
	ticks := 0
	for e.Stats().Keys > 1 && ticks < 26 {
		e.Sweep(1 << 20)
		ticks++
	}
	if got := e.Stats().Keys; got != 1 {
		t.Fatalf("%d keys left after %d sweep ticks, want 1", got, ticks)
	}
	if !e.Exists(live, nil) {
		t.Fatal("the sweep removed a live key")
	}
	// 20000 keys took about 1 MB; what is left is one key and at most a
	// few KiB of dead bytes not worth compacting, rounded up to whole
	// pages when the arena is mapped.
	if b := e.Stats().TableBytes; b > 12<<10 {
		t.Errorf("tables hold %d bytes for one key after the sweep: memory not returned", b)
	}
	if st := e.Stats(); st.ExpiredKeys != n {
		t.Fatalf("ExpiredKeys = %d, want %d", st.ExpiredKeys, n)
	}
}

func TestKeysScanFlush(t *testing.T) {
	e, _ := newTestEngine(t, 8)
	want := map[string]bool{}
	for i := range 500 {
		k := fmt.Sprintf("k%d", i)
		want[k] = true
		e.throttle([]byte(k), readmeParams)
	}
	e.fixedWindow([]byte("fw"), limiter.FixedWindowRequest{Limit: 5, Window: 10, Cost: 1})
	seen := map[string]int{}
	cursor := uint64(0)
	for {
		next, keys := e.Scan(cursor, 10, nil, limiter.KindGCRA)
		for _, k := range keys {
			seen[string(k)]++
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	if len(seen) != len(want) {
		t.Fatalf("scan saw %d keys, want %d", len(seen), len(want))
	}
	for k, n := range seen {
		if !want[k] || n != 1 {
			t.Fatalf("scan: key %q seen %d times", k, n)
		}
	}
	var fws [][]byte
	e.Keys(func(k []byte) bool { return k[0] == 'f' }, limiter.KindNone, func(k []byte) { fws = append(fws, k) })
	if len(fws) != 1 || string(fws[0]) != "fw" {
		t.Fatalf("Keys = %q", fws)
	}
	e.Flush()
	if e.DBSize() != 0 || e.Stats().KeysByKind[limiter.KindGCRA] != 0 {
		t.Fatal("Flush left keys")
	}
}

func TestExportImportBySlot(t *testing.T) {
	src, _ := newTestEngine(t, 16)
	dst, _ := newTestEngine(t, 4)
	keys := [][]byte{[]byte("{u1}gcra"), []byte("{u1}tb"), []byte("{u1}sw"), []byte("{u1}log"), []byte("{u1}fw"), []byte("other")}
	src.throttle(keys[0], readmeParams)
	src.tokenBucket(keys[1], limiter.TokenBucketRequest{Capacity: 10, Refill: 1, Period: 1, Cost: 3})
	src.slidingWindow(keys[2], limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 2})
	src.slidingWindow(keys[3], limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 4, Exact: true})
	src.fixedWindow(keys[4], limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 5})
	src.throttle(keys[5], readmeParams)

	slot := Slot([]byte("u1"))
	recs := src.ExportSlot(slot)
	if len(recs) != 5 || src.CountKeysInSlot(slot) != 5 {
		t.Fatalf("exported %d records, want 5", len(recs))
	}
	var buf []byte
	for _, r := range recs {
		buf = r.AppendBinary(buf)
	}
	for len(buf) > 0 {
		r, n, err := DecodeRecord(buf)
		if err != nil {
			t.Fatal(err)
		}
		buf = buf[n:]
		if ok, err := dst.Import(r); !ok || err != nil {
			t.Fatalf("Import(%s) = %v, %v", r.Key, ok, err)
		}
	}
	// Both engines now answer the same for the moved keys.
	for _, k := range keys[:5] {
		if src.Type(k, nil) != dst.Type(k, nil) || src.PTTL(k, nil) != dst.PTTL(k, nil) {
			t.Fatalf("%s: type/pttl differ after import", k)
		}
	}
	a, _ := src.slidingWindow(keys[3], limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 1, Exact: true})
	b, _ := dst.slidingWindow(keys[3], limiter.SlidingWindowRequest{Limit: 10, Window: 60, Cost: 1, Exact: true})
	if a != b || a.Remaining != 5 {
		t.Fatalf("sliding log after import: src %+v dst %+v", a, b)
	}
	if n := src.DeleteSlot(slot); n != 5 || src.DBSize() != 1 {
		t.Fatalf("DeleteSlot removed %d, %d keys left", n, src.DBSize())
	}
}

func TestImportRejectsBadRecords(t *testing.T) {
	e, _ := newTestEngine(t, 1)
	bad := []Record{
		{Key: []byte("k"), Kind: limiter.KindNone, ExpireMs: now0},
		{Key: []byte("k"), Kind: 99, ExpireMs: now0},
		{Key: []byte("k"), Kind: limiter.KindSlidingLog, ExpireMs: now0 / 1e6},                                  // a log with no hits
		{Key: []byte("k"), Kind: limiter.KindGCRA, ExpireMs: now0 / 1e6, Hits: []limiter.Hit{{At: now0, N: 1}}}, // hits on a GCRA key
	}
	for _, r := range bad {
		if _, err := e.Import(r); !errors.Is(err, ErrBadRecord) {
			t.Errorf("Import(%+v) = %v, want ErrBadRecord", r, err)
		}
	}
	if ok, err := e.Import(Record{Key: []byte("old"), Kind: limiter.KindGCRA, ExpireMs: now0/1e6 - 1}); ok || err != nil {
		t.Errorf("an expired record must be dropped: %v, %v", ok, err)
	}
}

func TestDecodeRecordNeverPanics(t *testing.T) {
	good := Record{Key: []byte("key"), Kind: limiter.KindSlidingLog, ExpireMs: 5, Hits: []limiter.Hit{{At: 1, N: 2}, {At: 3, N: 4}}}.AppendBinary(nil)
	if r, n, err := DecodeRecord(good); err != nil || n != len(good) || string(r.Key) != "key" || len(r.Hits) != 2 {
		t.Fatalf("round trip: %+v %d %v", r, n, err)
	}
	for i := range good {
		if _, _, err := DecodeRecord(good[:i]); err == nil {
			t.Fatalf("truncated at %d decoded without error", i)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for range 20000 {
		b := make([]byte, rng.Intn(40))
		rng.Read(b)
		if rng.Intn(2) == 0 && len(b) > 1 {
			b[0], b[1] = recordVersion, byte(rng.Intn(6))
		}
		r, n, err := DecodeRecord(b) // must not panic
		if err != nil {
			if n != 0 || r.Key != nil || r.Hits != nil {
				t.Fatalf("%x: error %v, yet %d bytes used, %+v", b, err, n, r)
			}
			continue
		}
		// What decodes is a valid record that used only bytes it was
		// given, and encodes to bytes that decode to the same record.
		if n < 2 || n > len(b) || !r.Kind.Valid() || len(r.Key) > n || 2*len(r.Hits) > n {
			t.Fatalf("%x: decoded %+v using %d bytes", b, r, n)
		}
		again, m, err := DecodeRecord(r.AppendBinary(nil))
		if err != nil || m != len(r.AppendBinary(nil)) || !reflect.DeepEqual(again, r) {
			t.Fatalf("%x: %+v re-encoded decodes to %+v, %d, %v", b, r, again, m, err)
		}
	}
}

func TestAtomicExcludesOthers(t *testing.T) {
	e, _ := newTestEngine(t, 16)
	key := []byte("k")
	p := limiter.GCRAParams{Interval: 1e9, Tolerance: 1000e9, Limit: 1000, Increment: 1e9}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				e.throttle(key, p)
			}
		}()
	}
	for range 50 {
		e.Atomic(func(tx *View) {
			a, _, _ := tx.Get(key, nil)
			b, _, _ := tx.Get(key, nil)
			if a != b {
				t.Error("the key changed inside Atomic")
			}
			tx.throttle([]byte("other"), p)
			_ = tx.DBSize()
			_ = tx.Stats()
		})
	}
	wg.Wait()
	if tat, _, _ := e.Get(key, nil); tat != now0+400e9 {
		t.Fatalf("TAT = %d, want now+400 s (400 allowed calls)", tat-now0)
	}
}

func TestManualClock(t *testing.T) {
	var c ManualClock
	if c.Now() < now0 {
		t.Fatal("zero ManualClock must follow the wall clock")
	}
	c.Set(5)
	if c.Advance(10) != nil || c.Now() != 15 {
		t.Fatal("Advance")
	}
	if c.Advance(-1) == nil {
		t.Fatal("negative Advance must fail")
	}
	c.Set(math.MaxInt64 - 1)
	if c.Advance(2) == nil || c.Now() != math.MaxInt64-1 {
		t.Fatal("overflowing Advance must fail and change nothing")
	}
	c.Real()
	if c.Now() == math.MaxInt64-1 {
		t.Fatal("Real must return to the wall clock")
	}
}

// Two background ticks reclaim a mass expiry of 20000 keys: a tick repeats
// its round while most of what it examines has expired.
func TestSweepTickReclaimsMassExpiry(t *testing.T) {
	e, clock := newTestEngine(t, 4)
	for i := range 20000 {
		e.throttle(fmt.Appendf(nil, "k%d", i), readmeParams)
	}
	clock.Advance(10e9)
	unpaced := func() *pacer { return &pacer{slice: time.Hour, total: time.Hour} }
	e.sweepTick(65536, unpaced()) // 4 shards × 400 entries a round, 8 rounds: 12800 a tick
	e.sweepTick(65536, unpaced())
	if n := e.Stats().Keys; n != 0 {
		t.Fatalf("%d keys left after two ticks", n)
	}
}

// A tick stops once its pacer's total is used up, wherever it is: here
// after the first shard, 400 entries in.
func TestSweepTickStopsAtItsShareOfTime(t *testing.T) {
	e, clock := newTestEngine(t, 4)
	for i := range 20000 {
		e.throttle(fmt.Appendf(nil, "k%d", i), readmeParams)
	}
	clock.Advance(10e9)
	p := &pacer{slice: time.Hour, total: time.Nanosecond}
	e.sweepTick(65536, p)
	if n := e.Stats().Keys; n != 20000-sweepMaxPerShard {
		t.Fatalf("%d keys left after a tick with no time, want %d", n, 20000-sweepMaxPerShard)
	}
	if p.worked <= 0 {
		t.Fatal("the pacer counted no work")
	}
	e.sweepTick(65536, &pacer{slice: time.Nanosecond, total: time.Hour}) // pauses after every shard
	if n := e.Stats().Keys; n >= 20000-sweepMaxPerShard {
		t.Fatalf("%d keys left after a yielding tick", n)
	}
}

func TestDeleteSlotCountsLiveKeysOnly(t *testing.T) {
	e, clock := newTestEngine(t, 1)
	e.throttle([]byte("{a}old"), readmeParams)
	clock.Advance(10e9)
	e.throttle([]byte("{a}new"), readmeParams)
	if n := e.DeleteSlot(Slot([]byte("a"))); n != 1 {
		t.Fatalf("DeleteSlot = %d, want 1 (the other key had expired)", n)
	}
	if st := e.Stats(); st.Keys != 0 || st.ExpiredKeys != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCRC16 checks the eight-bytes-a-step CRC16 against the textbook one,
// a bit at a time, on every length around the step.
func TestCRC16(t *testing.T) {
	bitwise := func(b []byte) uint16 {
		var crc uint16
		for _, c := range b {
			crc ^= uint16(c) << 8
			for range 8 {
				if crc&0x8000 != 0 {
					crc = crc<<1 ^ 0x1021
				} else {
					crc <<= 1
				}
			}
		}
		return crc
	}
	rng := rand.New(rand.NewSource(1))
	for n := range 40 {
		for range 50 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if got, want := crc16(b), bitwise(b); got != want {
				t.Fatalf("crc16(%x) = %#04x, want %#04x", b, got, want)
			}
		}
	}
}

// TestPrefetchChangesNothing: prefetching, with hints fresh or stale, on
// keys present, absent or removed, leaves every answer as it was; run
// beside writers it is race-free (go test -race).
func TestPrefetchChangesNothing(t *testing.T) {
	e, _ := newTestEngine(t, 4)
	p := limiter.GCRAParams{Interval: 1e9, Tolerance: 1000e9, Limit: 1000, Increment: 1e9}
	key := func(i int) []byte { return fmt.Appendf(nil, "user:%012d", i) }
	loc := e.Ahead()
	loc.Prefetch([]ahead.Hint{{}}) // the zero Hint does nothing
	loc.PrefetchRecords([]ahead.Hint{{}})
	stale := loc.Locate(key(0))
	loc.Prefetch([]ahead.Hint{stale})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 5000 {
			hs := []ahead.Hint{loc.Locate(key(i % 700)), stale}
			loc.Prefetch(hs)
			loc.PrefetchRecords(hs)
		}
	}()
	for i := range 1000 {
		if _, err := e.throttle(key(i), p); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			e.Del(key(i/2), nil)
		}
	}
	wg.Wait()
	e.Flush()
	loc.PrefetchRecords([]ahead.Hint{stale})
	for i := range 1000 {
		hs := []ahead.Hint{loc.Locate(key(i))}
		loc.Prefetch(hs)
		loc.PrefetchRecords(hs)
		if r, err := e.throttle(key(i), p); err != nil || r.Remaining != 999 {
			t.Fatalf("key %d after a flush: %+v, %v; want a fresh key", i, r, err)
		}
	}
}

// TestAtHint: a call takes its At's Hint for the very bytes it was made
// for, and ignores it for any other bytes, equal ones included. A forged
// hint (a wrong hash) shows which: a key stored through it cannot be
// found by a call that locates the key itself.
func TestAtHint(t *testing.T) {
	e, _ := newTestEngine(t, 4)
	p := &limiter.Request{Kind: limiter.KindGCRA, GCRA: limiter.GCRAParams{Interval: 1e9, Tolerance: 10e9, Limit: 10, Increment: 1e9}}
	forged := func(key []byte) *At { h := e.Ahead().Locate(key); h.Hash ^= 1 << 40; return &At{Hint: h} }

	v := e.NewView()
	key := []byte("user:1")
	if r, err := v.Apply(key, p, &At{Hint: e.Ahead().Locate(key)}); err != nil || r.Remaining != 9 {
		t.Fatalf("with its own hint: %+v, %v", r, err)
	}
	if r, err := e.Apply(key, p, nil); err != nil || r.Remaining != 8 {
		t.Fatalf("then without: %+v, %v; want the same key", r, err)
	}

	fresh := []byte("user:2")
	if _, err := v.Apply(fresh, p, forged(fresh)); err != nil {
		t.Fatal(err)
	}
	if e.Exists(fresh, nil) {
		t.Fatal("a forged hint for these bytes was not taken")
	}
	if _, err := v.Apply(fresh, p, nil); err != nil || !e.Exists(fresh, nil) {
		t.Fatalf("a call without the hint took it (%v)", err)
	}

	equal := []byte("user:3")
	if _, err := v.Apply(equal, p, forged(bytes.Clone(equal))); err != nil || !e.Exists(equal, nil) { // equal bytes elsewhere
		t.Fatalf("a hint for other bytes was taken (%v)", err)
	}
	short := []byte("user:44")
	fw := &limiter.Request{Kind: limiter.KindFixedWindow, FixedWindow: limiter.FixedWindowRequest{Limit: 5, Window: 1e9, Cost: 1}}
	if _, err := v.Apply(short[:6], fw, forged(short)); err != nil || !e.Exists(short[:6], nil) {
		t.Fatalf("a hint for a longer key was taken (%v)", err)
	}
	other, _ := newTestEngine(t, 4)
	mine := []byte("user:5")
	if _, err := v.Apply(mine, p, &At{Hint: other.Ahead().Locate(mine)}); err != nil || !e.Exists(mine, nil) || other.Exists(mine, nil) {
		t.Fatalf("another engine's hint was taken (%v)", err)
	}
	if v.Exists(mine, forged(mine)) { // the keyspace calls take hints too
		t.Fatal("Exists did not take the hint")
	}
	if v.Del(mine, forged(mine)) || !v.Exists(mine, nil) {
		t.Fatal("Del did not take the hint")
	}
}

// TestSystemClock: the cheap wall clock reads between two readings of
// time.Now taken around it, before and after a Sync, and never runs
// backwards between syncs. Being bracketed, it does not depend on how long
// the goroutine is descheduled between the readings; the slack is for the
// wall clock being slewed (NTP) while the test runs.
func TestSystemClock(t *testing.T) {
	const slack = int64(time.Millisecond)
	c := NewSystemClock()
	prev := c.Now()
	for i := range 1000 {
		if i%100 == 0 {
			c.Sync()
		}
		before := time.Now().UnixNano()
		got := c.Now()
		after := time.Now().UnixNano()
		if got < before-slack || got > after+slack {
			t.Fatalf("Now() = %d, outside time.Now()'s %d … %d", got, before, after)
		}
		if i%100 != 0 && got < prev {
			t.Fatalf("Now() went back from %d to %d without a Sync", prev, got)
		}
		prev = got
	}
}

// TestAtMono: a call whose At carries a monotonic reading is decided at
// that instant with the system clock, and one with none reads the clock;
// with any other clock (DEBUG CLOCK's) At.Mono changes nothing.
func TestAtMono(t *testing.T) {
	sys := NewSystemClock()
	e, err := New(Config{Shards: 1, Clock: sys})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	v := e.NewView()
	gp, err := limiter.GCRARequest{MaxBurst: 0, Count: 1, Period: 3600, Quantity: 1}.Params()
	if err != nil {
		t.Fatal(err)
	}
	p := &limiter.Request{Kind: limiter.KindGCRA, GCRA: gp}
	m := mono.Now()
	var at *At
	at = &At{Mono: m - int64(3*time.Hour)} // three hours ago: the key is empty then
	if r, err := v.Apply([]byte("k"), p, at); err != nil || r.Limited {
		t.Fatalf("first call: %+v, %v", r, err)
	}
	// An hour later than that, the one token per hour is back.
	at = &At{Mono: m - int64(2*time.Hour)}
	if r, err := v.Apply([]byte("k"), p, at); err != nil || r.Limited {
		t.Fatalf("an hour later: %+v, %v", r, err)
	}
	// Back at the same instant: limited, and retry_after counts from it.
	if r, err := v.Apply([]byte("k"), p, at); err != nil || !r.Limited || r.RetryAfter != 3600 {
		t.Fatalf("at the same instant: %+v, %v", r, err)
	}
	// Reading the clock (now, an hour after the last call): allowed.
	at = nil
	if r, err := v.Apply([]byte("k"), p, at); err != nil || r.Limited {
		t.Fatalf("reading the clock: %+v, %v", r, err)
	}

	me, clock := newTestEngine(t, 1)
	mv := me.NewView()
	at = &At{Mono: m - int64(2*time.Hour)}
	if r, err := mv.Apply([]byte("k"), p, at); err != nil || r.Limited {
		t.Fatalf("manual clock, first call: %+v, %v", r, err)
	}
	at = &At{Mono: m + int64(2*time.Hour)} // ignored: the manual clock has not moved
	if r, err := mv.Apply([]byte("k"), p, at); err != nil || !r.Limited {
		t.Fatalf("manual clock: At moved it: %+v, %v (clock %d)", r, err, clock.Now())
	}
}

// BenchmarkSlidingLogKeys runs SW.HIT EXACT (limit 100 per 4 s) on keys
// drawn at random from 1M, the clock moving 1 µs per request: a key is hit
// about once a second, so its log holds about 4 hits (mostly 1 to 8),
// growing, sliding and emptying as under redis-benchmark -r 1000000. The
// engine is warmed up for one window first, so that the measured requests
// see the steady state. P1 runs the requests one by one; P16 in groups of
// 16, prefetching each group's slots then records first, as the server
// does for a pipeline. B/key is the memory the engine holds per live key
// at the end, on the Go heap and off it.
func BenchmarkSlidingLogKeys(b *testing.B) {
	const n = 1 << 20
	buf := make([]byte, 0, n*17)
	keys := make([][]byte, n)
	for i := range keys {
		buf = fmt.Appendf(buf, "user:%012d", i)
		keys[i] = buf[len(buf)-17 : len(buf) : len(buf)]
	}
	r := limiter.SlidingWindowRequest{Limit: 100, Window: 4, Cost: 1, Exact: true}
	for _, group := range []int{1, 16} {
		b.Run(fmt.Sprintf("P%d", group), func(b *testing.B) {
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			clock := NewManualClock(now0)
			e, err := New(Config{Clock: clock})
			if err != nil {
				b.Fatal(err)
			}
			x := uint64(88172645463325252)
			next := func() []byte { // xorshift64: cheap, and the same keys every run
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				return keys[x%n]
			}
			for range 4 << 20 {
				clock.Advance(1000)
				if _, err := e.slidingWindow(next(), r); err != nil {
					b.Fatal(err)
				}
			}
			batch, hints := make([][]byte, group), make([]ahead.Hint, group)
			loc := e.Ahead()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += group {
				for j := range batch {
					batch[j] = next()
				}
				if group > 1 {
					for j, k := range batch {
						hints[j] = loc.Locate(k)
					}
					loc.Prefetch(hints)
					loc.PrefetchRecords(hints)
				}
				for _, k := range batch {
					clock.Advance(1000)
					_, _ = e.slidingWindow(k, r)
				}
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			runtime.KeepAlive(keys) // counted in before
			b.ReportMetric(float64(ms.HeapAlloc+uint64(e.OffHeapBytes())-before)/float64(e.Stats().Keys), "B/key")
			e.Flush() // so that the next run's before does not count this engine
		})
	}
}

// TestImportIfAbsent: a record goes in only where no live key has its
// name; a live key keeps its state, an expired one is replaced.
func TestImportIfAbsent(t *testing.T) {
	e, clock := newTestEngine(t, 4)
	fw := limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 1}
	e.fixedWindow([]byte("live"), fw)
	e.fixedWindow([]byte("dying"), limiter.FixedWindowRequest{Limit: 10, Window: 1, Cost: 1})
	spent, _ := newTestEngine(t, 1)
	for _, k := range []string{"live", "dying", "new"} {
		spent.fixedWindow([]byte(k), limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 9})
	}
	clock.Advance(int64(2 * time.Second)) // "dying" expires here, not in spent
	for k, want := range map[string]bool{"live": false, "dying": true, "new": true} {
		var r Record
		for _, rec := range spent.ExportSlot(Slot([]byte(k))) {
			if string(rec.Key) == k {
				r = rec
			}
		}
		if ok, err := e.ImportIfAbsent(r); ok != want || err != nil {
			t.Errorf("ImportIfAbsent(%s) = %v, %v; want %v", k, ok, err, want)
		}
	}
	for k, remaining := range map[string]int64{"live": 8, "dying": 0, "new": 0} {
		if r, _ := e.fixedWindow([]byte(k), fw); r.Remaining != remaining {
			t.Errorf("%s after ImportIfAbsent: %+v, want remaining %d", k, r, remaining)
		}
	}
}

// TestLargeKeyCostsItsSize: an accepted large key (max-key-size raised to
// 1 MiB and more) is held once, in its record, whatever the requests on
// it: the tables grow by about its length, not by a multiple of it.
func TestLargeKeyCostsItsSize(t *testing.T) {
	e, clock := newTestEngine(t, 4)
	small := []byte("user:1")
	for _, k := range [][]byte{small, []byte("user:2")} { // arenas that are not empty
		if _, err := e.Apply(k, limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 1}.Request(), nil); err != nil {
			t.Fatal(err)
		}
	}
	before := e.Stats().TableBytes
	key := bytes.Repeat([]byte("k"), 1<<20)
	for _, r := range []*limiter.Request{
		limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 1}.Request(),
		limiter.FixedWindowRequest{Limit: 10, Window: 60, Cost: 3}.Request(),
	} {
		if _, err := e.Apply(key, r, nil); err != nil {
			t.Fatal(err)
		}
		clock.Advance(1e9)
	}
	grown := e.Stats().TableBytes - before
	if limit := int64(len(key)) + 16<<10; grown < int64(len(key)) || grown > limit {
		t.Fatalf("a key of %d bytes grew the tables by %d bytes, want %d to %d", len(key), grown, len(key), limit)
	}
}
