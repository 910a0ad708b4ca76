package engine

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/internal/manual"
	"github.com/cellserver/cellserver/limiter"
)

// limitedEngine returns an engine of 16 shards under memLimit and p. The
// limit counts the tables' mapped arrays plus what the server reports of
// the Go heap; where arrays are not mapped (manual.Enabled false) the
// tables are on that heap, which these tests do not report, so they skip.
func limitedEngine(t *testing.T, p Policy) *Engine {
	t.Helper()
	if !manual.Enabled {
		t.Skip("the tables are on the Go heap on this build: the limit sees them through the server's heap report")
	}
	e, _ := newTestEngine(t, 16)
	e.SetMemoryLimit(memLimit, p)
	return e
}

// memLimit is the limit the eviction tests fill to; over is how far past
// it the engine may go: one shard's growth step (its slots grow by half,
// its arena by an eighth, of a sixteenth of the limit) when the limit is
// crossed by a growing table. Growing every shard a step, as the tables
// did before makeRoomLocked compacted at the limit, took them 6-9% past.
const (
	memLimit = 1 << 20
	over     = memLimit / 32
)

func fwReq(window int64) limiter.FixedWindowRequest {
	return limiter.FixedWindowRequest{Limit: 1000, Window: window, Cost: 1}
}

func TestMemoryLimitNoEviction(t *testing.T) {
	e := limitedEngine(t, NoEviction)
	n := 0
	for ; n < 200000; n++ {
		_, err := e.fixedWindow([]byte("key:"+strconv.Itoa(n)), fwReq(60))
		if errors.Is(err, ErrOOM) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n == 200000 {
		t.Fatal("200,000 keys under a 1 MiB limit")
	}
	if used := e.UsedMemory(); used > memLimit+over {
		t.Fatalf("used %d bytes, limit %d", used, memLimit)
	}
	if r, err := e.fixedWindow([]byte("key:0"), fwReq(60)); err != nil || r.Remaining != 998 {
		t.Fatalf("an existing key at the limit: %+v, %v", r, err)
	}
	if _, err := e.fixedWindow([]byte("new"), fwReq(60)); !errors.Is(err, ErrOOM) {
		t.Fatalf("a new key at the limit: %v, want ErrOOM", err)
	}
	if st := e.Stats(); st.EvictedKeys != 0 || st.Keys != int64(n) {
		t.Fatalf("noeviction evicted %d keys, kept %d of %d", st.EvictedKeys, st.Keys, n)
	}
	e.SetMemoryLimit(0, NoEviction)
	if _, err := e.fixedWindow([]byte("new"), fwReq(60)); err != nil {
		t.Fatalf("no limit: %v", err)
	}
}

// Under volatile-ttl, filling past the limit evicts, used memory stays at
// the limit, and what goes is mostly the keys nearest their expiry.
func TestMemoryLimitEvictsNearestExpiry(t *testing.T) {
	e := limitedEngine(t, EvictNearestExpiry)
	for i := range 200000 {
		window := int64(10) // every other key expires in 10 s, the others in 1000 s
		if i%2 == 1 {
			window = 1000
		}
		if _, err := e.fixedWindow([]byte("key:"+strconv.Itoa(i)), fwReq(window)); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	st := e.Stats()
	if used := e.UsedMemory(); used > memLimit+over {
		t.Fatalf("used %d bytes, limit %d", used, memLimit)
	}
	if st.EvictedKeys < 100000 {
		t.Fatalf("evicted %d of 200,000 keys under a 1 MiB limit", st.EvictedKeys)
	}
	var short, long int
	e.Keys(nil, limiter.KindNone, func(k []byte) {
		if n, _ := strconv.Atoi(string(k[4:])); n%2 == 1 {
			long++
		} else {
			short++
		}
	})
	if long < 4*short {
		t.Fatalf("kept %d keys expiring in 1000 s and %d expiring in 10 s: the nearest expiry must go first", long, short)
	}
}

// Under allkeys-lru, keys in use survive a flood of new keys that evicts
// most of what was there.
func TestMemoryLimitEvictsLeastRecentlyUsed(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		name string
	}{{EvictLRU, "lru"}, {EvictRandom, "random"}} {
		t.Run(tc.name, func(t *testing.T) {
			e := limitedEngine(t, tc.p)
			const hot = 1000
			for i := range hot {
				e.fixedWindow([]byte("hot:"+strconv.Itoa(i)), fwReq(60))
			}
			for i := range 100000 {
				if _, err := e.fixedWindow([]byte("cold:"+strconv.Itoa(i)), fwReq(60)); err != nil {
					t.Fatal(err)
				}
				e.fixedWindow([]byte("hot:"+strconv.Itoa(i%hot)), fwReq(60))
			}
			if used := e.UsedMemory(); used > memLimit+over {
				t.Fatalf("used %d bytes, limit %d", used, memLimit)
			}
			// A hot key never evicted has counted all its hits: 1 + 100 + this one.
			kept := 0
			for i := range hot {
				r, err := e.fixedWindow([]byte("hot:"+strconv.Itoa(i)), fwReq(60))
				if err != nil {
					t.Fatal(err)
				}
				if r.Remaining == 1000-102 {
					kept++
				}
			}
			evicted := e.Stats().EvictedKeys
			if tc.p == EvictLRU && kept < hot*95/100 || tc.p == EvictRandom && kept > hot/4 {
				t.Fatalf("%s kept %d of %d keys in use (%d evicted)", tc.name, kept, hot, evicted)
			}
			t.Logf("%s kept %d of %d keys in use (%d evicted)", tc.name, kept, hot, evicted)
		})
	}
}

// BenchmarkMemoryLimit times a new key at the limit under allkeys-lru:
// 256 shards filled to 32 MiB, then each op a key never seen, which
// evicts (and, now and then, compacts a shard's arena within its
// capacity: makeRoomLocked). used-over-limit-% is how far past the limit
// the tables went.
//
//	go test ./engine -run XXX -bench MemoryLimit -benchtime 2000000x
func BenchmarkMemoryLimit(b *testing.B) {
	if !manual.Enabled {
		b.Skip("the tables are on the Go heap on this build")
	}
	const limit = 32 << 20
	e, err := New(Config{Shards: DefaultShards, Clock: NewManualClock(now0)})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	e.SetMemoryLimit(limit, EvictLRU)
	key := make([]byte, 0, 32)
	n := 0
	for e.Stats().EvictedKeys == 0 {
		for range 10000 {
			key = strconv.AppendInt(append(key[:0], "key:"...), int64(n), 10)
			e.fixedWindow(key, fwReq(60))
			n++
		}
	}
	b.ResetTimer()
	for range b.N {
		key = strconv.AppendInt(append(key[:0], "key:"...), int64(n), 10)
		if _, err := e.fixedWindow(key, fwReq(60)); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.StopTimer()
	b.ReportMetric(100*float64(e.UsedMemory()-limit)/limit, "used-over-limit-%")
}

// At the limit a new key larger than all the keys of its shard together is
// refused with ErrOOM, and evicts none of them.
func TestMemoryLimitRefusedKeyEvictsNothing(t *testing.T) {
	e := limitedEngine(t, EvictLRU)
	for i := 0; e.Stats().EvictedKeys == 0; i++ {
		if _, err := e.fixedWindow([]byte("key:"+strconv.Itoa(i)), fwReq(60)); err != nil {
			t.Fatal(err)
		}
	}
	big := []byte(strings.Repeat("k", memLimit/4)) // over a shard's share (a sixteenth)
	keys, evicted := e.Stats().Keys, e.Stats().EvictedKeys
	if _, err := e.fixedWindow(big, fwReq(60)); !errors.Is(err, ErrOOM) {
		t.Fatalf("a key of %d bytes at the limit: %v, want ErrOOM", len(big), err)
	}
	if st := e.Stats(); st.Keys != keys || st.EvictedKeys != evicted {
		t.Fatalf("the refused key evicted %d keys (%d of %d left)", st.EvictedKeys-evicted, st.Keys, keys)
	}
}

// ML.THROTTLE's path (ApplyAll) keeps to the limit as one key's command
// does: under noeviction at the limit a call with a new key is refused,
// whole, and under an evicting policy its new keys make room first.
func TestMemoryLimitApplyAll(t *testing.T) {
	e := limitedEngine(t, NoEviction)
	for n := 0; ; n++ {
		if _, err := e.fixedWindow([]byte("key:"+strconv.Itoa(n)), fwReq(60)); errors.Is(err, ErrOOM) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	used := e.UsedMemory()
	keys := e.Stats().Keys
	req := func(k string) call {
		return call{k, limiter.Request{Kind: limiter.KindFixedWindow, FixedWindow: fwReq(60)}}
	}
	if _, _, err := applyAll(&e.View, []call{req("key:0"), req("ml:new")}); !errors.Is(err, ErrOOM) {
		t.Fatalf("a new key through ApplyAll under noeviction at the limit: %v, want ErrOOM", err)
	}
	if r, err := e.fixedWindow([]byte("key:0"), fwReq(60)); err != nil || r.Remaining != 998 {
		t.Fatalf("the refused call changed key:0: %+v, %v", r, err)
	}
	if st := e.Stats(); st.Keys != keys || e.UsedMemory() != used {
		t.Fatalf("%d keys and %d bytes, then %d and %d", keys, used, st.Keys, e.UsedMemory())
	}
	e.SetMemoryLimit(memLimit, EvictLRU)
	for n := range 50000 {
		if _, _, err := applyAll(&e.View, []call{req("ml:" + strconv.Itoa(n))}); err != nil {
			t.Fatal(err)
		}
	}
	if used := e.UsedMemory(); used > memLimit+over {
		t.Fatalf("used %d bytes after 50,000 new keys through ApplyAll, limit %d", used, memLimit)
	}
	if e.Stats().EvictedKeys == 0 {
		t.Fatal("50,000 new keys through ApplyAll at the limit evicted nothing")
	}
}
