package integration

import (
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestMultiLimitConcurrent: on a frozen clock, 50 clients calling
// ML.THROTTLE with three limits get exactly the smallest limit's count
// allowed, and a refused call charges none of the three: the daily limit
// refuses, and the per-second budget and the sliding window keep what it
// did not spend.
func TestMultiLimitConcurrent(t *testing.T) {
	const (
		workers = 50
		perW    = 8 // 400 calls
		day     = 30
	)
	ts := startServer(t)
	rdb := ts.client(t, noRetry, func(o *redis.Options) { o.PoolSize = workers })
	setClock(t, rdb, t0)
	call := args("ML.THROTTLE", 3, "TB", "{u}sec", 40, 40, 1, "FW", "{u}day", day, 86400, "SW", "{u}min", 50, 60, "EXACT")

	var allowed, limited atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perW {
				r, err := rdb.Do(ctx, call...).Slice()
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case len(r) != 4:
					t.Errorf("reply %v", r)
					return
				case r[0] == int64(0):
					allowed.Add(1)
				case r[0] == int64(2):
					limited.Add(1)
				default:
					t.Errorf("reply %v", r)
					return
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != day || limited.Load() != workers*perW-day {
		t.Fatalf("allowed %d, limited %d; want %d, %d", allowed.Load(), limited.Load(), day, workers*perW-day)
	}
	// Each key was charged exactly the 30 allowed calls.
	wantInts(t, rdb, ints(0, 40, 10, -1, 1), "TB.TAKE", "{u}sec", 40, 40, 1, 0)
	wantInts(t, rdb, ints(0, day, 0, -1, 86400-t0/sec%86400), "FW.INCR", "{u}day", day, 86400, 0)
	wantInts(t, rdb, ints(0, 50, 20, -1, 60), "SW.HIT", "{u}min", 50, 60, 0, "EXACT")

	// The next call is refused by the daily limit; the others read as they stand.
	got := do(t, rdb, call...)
	want := []any{int64(2), []any{int64(0), int64(40), int64(10), int64(-1), int64(1)},
		[]any{int64(1), int64(day), int64(0), 86400 - t0/sec%86400, 86400 - t0/sec%86400},
		[]any{int64(0), int64(50), int64(20), int64(-1), int64(60)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	wantVal(t, rdb, []any{"{u}sec", "{u}day", "{u}min"}, append([]any{"COMMAND", "GETKEYS"}, call...)...)
}
