package client

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// refused is the server's refusal of a cost-1 call on a fixed window of 5
// per second with 700 ms left of it.
func refused() Decision {
	return Decision{Limited: true, Refused: 1, Results: []Result{{Limited: true, Limit: 5, RetryAfter: 700 * time.Millisecond, ResetAfter: 700 * time.Millisecond}}}
}

// TestRefusalsBounded: a flood of distinct refused keys never holds more
// than the cache's size, and the latest refusals are the ones kept.
func TestRefusalsBounded(t *testing.T) {
	const size = 640
	rc := newRefusals(size)
	l := NewFixedWindow(5, time.Second)
	d := refused()
	for i := range 100 * size {
		ch := []Check{{Key: "k" + strconv.Itoa(i), Limit: l, Cost: 1}}
		snap := rc.snapshot(ch)
		rc.learn(ch, &d, &snap, 0)
	}
	if n := rc.len(); n > size {
		t.Fatalf("%d keys held, want at most %d", n, size)
	}
	last := []Check{{Key: "k" + strconv.Itoa(100*size-1), Limit: l, Cost: 1}}
	if got, ok := rc.answer(last, 100e6); !ok || got.Results[0].RetryAfter != 600*time.Millisecond || got.Results[0].Source != FromCache {
		t.Fatalf("the last refusal: %+v, %v", got, ok)
	}
	if _, ok := rc.answer(last, 699e6); !ok {
		t.Fatal("the last refusal is not known 1 ms before its end")
	}
	if _, ok := rc.answer(last, 699e6+1); ok {
		t.Fatal("the last refusal is known less than 1 ms before its end (its exact time is unknown within 1 ms)")
	}
}

// TestRefusalsForgetInFlight: a refusal whose call was sent before its key
// was forgotten (a refund, Forget, an allowed call) is not kept.
func TestRefusalsForgetInFlight(t *testing.T) {
	rc := newRefusals(100)
	ch := []Check{{Key: "k", Limit: NewFixedWindow(5, time.Second), Cost: 1}}
	d := refused()
	snap := rc.snapshot(ch)
	rc.forget("k")
	rc.learn(ch, &d, &snap, 0)
	if _, ok := rc.answer(ch, 0); ok {
		t.Fatal("a refusal sent before Forget was kept")
	}
	snap = rc.snapshot(ch)
	rc.learn(ch, &d, &snap, 0)
	if _, ok := rc.answer(ch, 0); !ok {
		t.Fatal("a refusal sent after Forget was not kept")
	}
}

// TestRefusalsConcurrent: lookups, refusals and forgets of a few keys from
// many goroutines (run with -race).
func TestRefusalsConcurrent(t *testing.T) {
	rc := newRefusals(64)
	l := NewFixedWindow(5, time.Second)
	d := refused()
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Go(func() {
			for i := range 2000 {
				ch := []Check{{Key: "k" + strconv.Itoa((g+i)%4), Limit: l, Cost: 1}}
				switch i % 10 {
				case 0:
					rc.forget(ch[0].Key)
				case 1, 2:
					snap := rc.snapshot(ch)
					rc.learn(ch, &d, &snap, int64(i))
				default:
					if got, ok := rc.answer(ch, int64(i)); ok && !got.Limited {
						t.Error("an answer from the cache allowed")
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
