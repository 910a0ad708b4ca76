package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cellserver/cellserver/limiter"
)

// scanAll runs a whole scan with count, calling between after each step,
// and returns how often each key was returned and the most keys one step
// returned.
func scanAll(t *testing.T, e *Engine, count int, between func(step int)) (map[string]int, int) {
	t.Helper()
	seen := map[string]int{}
	most := 0
	cursor := uint64(0)
	for step := 0; ; step++ {
		if step > 1_000_000 {
			t.Fatal("the scan does not end")
		}
		next, keys := e.Scan(cursor, count, nil, limiter.KindNone)
		most = max(most, len(keys))
		for _, k := range keys {
			seen[string(k)]++
		}
		if next == 0 {
			return seen, most
		}
		cursor = next
		if between != nil {
			between(step)
		}
	}
}

// TestScanStepsWithinAShard: with 10,000 keys in one shard, SCAN COUNT 10
// returns about 10 keys a call (at most count+10: the records probing
// pushed past the step's last slot come with it), not the shard, and the
// whole scan returns every key exactly once (issue 11 item 9).
func TestScanStepsWithinAShard(t *testing.T) {
	e, _ := newTestEngine(t, 1)
	const n = 10_000
	for i := range n {
		e.throttle(fmt.Appendf(nil, "key:%d", i), readmeParams)
	}
	for _, count := range []int{1, 10, 100} {
		seen, most := scanAll(t, e, count, nil)
		if most > count+10 {
			t.Errorf("COUNT %d: a call returned %d keys", count, most)
		}
		if len(seen) != n {
			t.Fatalf("COUNT %d: the scan returned %d keys, want %d", count, len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("COUNT %d: %s returned %d times", count, k, c)
			}
		}
	}
}

// TestScanThroughResizes: keys added and removed between the steps of a
// scan make the table grow and shrink; every key present for the whole
// scan is still returned, exactly once, and no key twice.
func TestScanThroughResizes(t *testing.T) {
	for _, shards := range []int{1, 4} {
		e, _ := newTestEngine(t, shards)
		rng := rand.New(rand.NewPCG(1, uint64(shards)))
		const stable = 3000
		for i := range stable {
			e.throttle(fmt.Appendf(nil, "stable:%d", i), readmeParams)
		}
		var churn []string
		seen, most := scanAll(t, e, 10, func(step int) {
			switch {
			case step%40 < 20: // grow: add a burst of keys
				for range 200 {
					k := fmt.Sprintf("churn:%d", rng.Uint64())
					churn = append(churn, k)
					e.throttle([]byte(k), readmeParams)
				}
			default: // shrink: remove most of them
				for len(churn) > 10 {
					e.Del([]byte(churn[len(churn)-1]), nil)
					churn = churn[:len(churn)-1]
				}
			}
		})
		if most > 20 {
			t.Errorf("%d shards: a call returned %d keys", shards, most)
		}
		for i := range stable {
			k := fmt.Sprintf("stable:%d", i)
			if seen[k] != 1 {
				t.Fatalf("%d shards: %s returned %d times, want 1", shards, k, seen[k])
			}
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("%d shards: %s returned %d times", shards, k, c)
			}
		}
	}
}

// TestScanFromWalksDisplacedRecords: in a small, crowded table whose
// records are pushed past their home slots and around the end, every
// scan step size passes each record exactly once.
func TestScanFromWalksDisplacedRecords(t *testing.T) {
	e, _ := newTestEngine(t, 1)
	for i := range 45 { // a few slots short of growing: long runs of full slots
		e.throttle(fmt.Appendf(nil, "k%d", i), readmeParams)
	}
	tb := &e.shards[0].t
	for count := 1; count <= 50; count++ {
		passed := map[int]int{}
		for from := uint64(0); from < tagEnd; {
			next, _ := tb.scanFrom(from, count, false, func(i int) { passed[i]++ })
			if next <= from {
				t.Fatalf("count %d: cursor went from %d to %d", count, from, next)
			}
			from = next
		}
		if len(passed) != tb.count {
			t.Fatalf("count %d: passed %d records, want %d", count, len(passed), tb.count)
		}
		for i, c := range passed {
			if c != 1 {
				t.Fatalf("count %d: slot %d passed %d times", count, i, c)
			}
		}
	}
}
