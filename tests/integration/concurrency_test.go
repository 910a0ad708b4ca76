package integration

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestConcurrentOneKey: on a frozen clock, 50 clients hammering one key
// get exactly the limit allowed, never one more (docs/commands.md#limiter-rules: each key's
// state changes atomically).
func TestConcurrentOneKey(t *testing.T) {
	const (
		workers = 50
		perW    = 8 // 400 calls for a limit of 100
		limit   = 100
	)
	cases := []struct {
		name string
		args []any
		read []any   // a cost-0 read afterwards
		want []int64 // its reply
	}{
		{"CL.THROTTLE", args("CL.THROTTLE", "one", limit-1, 1, 3600), args("CL.THROTTLE", "one", limit-1, 1, 3600, 0), ints(0, limit, 0, -1, limit*3600)},
		{"TB.TAKE", args("TB.TAKE", "one", limit, 1, 3600), args("TB.TAKE", "one", limit, 1, 3600, 0), ints(0, limit, 0, -1, limit*3600)},
		{"SW.HIT", args("SW.HIT", "one", limit, 60), args("SW.HIT", "one", limit, 60, 0), ints(0, limit, 0, -1, 120)},
		{"SW.HIT EXACT", args("SW.HIT", "one", limit, 60, "EXACT"), args("SW.HIT", "one", limit, 60, 0, "EXACT"), ints(0, limit, 0, -1, 60)},
		{"FW.INCR", args("FW.INCR", "one", limit, 60), args("FW.INCR", "one", limit, 60, 0), ints(0, limit, 0, -1, 60)},
		{"LB.QUEUE", args("LB.QUEUE", "one", limit, 1, 3600), args("LB.QUEUE", "one", limit, 1, 3600, 0), ints(0, limit, 0, -1, limit*3600)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ts := startServer(t)
			rdb := ts.client(t, noRetry, func(o *redis.Options) { o.PoolSize = workers })
			setClock(t, rdb, t0)

			var allowed, limited atomic.Int64
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range perW {
						r, err := rdb.Do(ctx, c.args...).Int64Slice()
						if err != nil {
							errs <- err
							return
						}
						if len(r) != 5 || r[1] != limit {
							t.Errorf("reply %v", r)
							return
						}
						if r[0] == 0 {
							allowed.Add(1)
						} else {
							limited.Add(1)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("call failed: %v", err)
			}
			if allowed.Load() != limit || limited.Load() != workers*perW-limit {
				t.Fatalf("allowed %d, limited %d; want %d and %d", allowed.Load(), limited.Load(), limit, workers*perW-limit)
			}
			// Nothing left, and the key holds exactly the limit's worth.
			wantInts(t, rdb, c.want, c.read...)
		})
	}
}

// TestQueueDeparturesSpaced: 50 clients send LB.QUEUE on one queue (20
// places, 10 leave per second: T = 100 ms) together, in 30 rounds at
// irregular instants of the frozen clock. Each admitted request leaves at
// its arrival plus its wait; sorted, those departures are never closer
// than T, none is lost (every round admits what the queue has room for),
// and the queue never holds more than its places.
func TestQueueDeparturesSpaced(t *testing.T) {
	t.Parallel()
	const (
		workers  = 50
		rounds   = 30
		places   = 20
		interval = 100 // ms
	)
	ts := startServer(t)
	rdb := ts.client(t, noRetry, func(o *redis.Options) { o.PoolSize = workers })
	setClock(t, rdb, t0)
	var departures []int64 // ms after t0
	now := int64(0)        // ms after t0
	for round := range rounds {
		if round > 0 {
			step := int64(round*7919%450 + 1) // irregular: 1 ms to 450 ms
			advance(t, rdb, step*ms)
			now += step
		}
		waits := make(chan int64, workers)
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				r, err := rdb.Do(ctx, "LB.QUEUE", "dep", places, 1000/interval, 1000, "MS").Int64Slice()
				switch {
				case err != nil:
					errs <- err
				case len(r) != 5 || r[1] != places:
					errs <- fmt.Errorf("reply %v", r)
				case r[0] == 0:
					waits <- r[4]
				}
			})
		}
		wg.Wait()
		close(waits)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		admitted := 0
		for w := range waits {
			departures = append(departures, now+w)
			admitted++
		}
		// Room in the queue before the round: the places whose departure
		// has not come (a request leaves its place one T after its turn).
		queued := 0
		for _, d := range departures[:len(departures)-admitted] {
			if d+interval > now {
				queued++
			}
		}
		if admitted != places-queued {
			t.Fatalf("round %d at +%d ms: %d admitted, want %d (%d queued)", round, now, admitted, places-queued, queued)
		}
	}
	slices.Sort(departures)
	for i := 1; i < len(departures); i++ {
		if gap := departures[i] - departures[i-1]; gap < interval {
			t.Fatalf("departures %d and %d are %d ms apart, want at least %d: %v", i-1, i, gap, interval, departures)
		}
	}
	if len(departures) < places+rounds {
		t.Fatalf("%d admitted in %d rounds", len(departures), rounds)
	}
}

// TestConcurrentManyKeys: many clients on many keys in a pipeline each;
// every key ends up with exactly its own count.
func TestConcurrentManyKeys(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t, noRetry, func(o *redis.Options) { o.PoolSize = 20 })
	setClock(t, rdb, t0)
	const workers, keys, hits = 20, 50, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			pipe := rdb.Pipeline()
			for k := range keys {
				for range hits {
					pipe.Do(ctx, "FW.INCR", k, 1000, 60)
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Errorf("worker %d: %v", w, err)
			}
		})
	}
	wg.Wait()
	for k := range keys {
		wantInts(t, rdb, ints(0, 1000, 1000-workers*hits, -1, 60), "FW.INCR", k, 1000, 60, 0)
	}
	wantVal(t, rdb, int64(keys), "DBSIZE")
}

// TestMultiAtomic: the commands of one EXEC happen at one instant for
// every other client (docs/commands.md#transactions): with others hitting the same key at the
// same time, a transaction's replies are still consecutive.
func TestMultiAtomic(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	rdb := ts.client(t, noRetry, func(o *redis.Options) { o.PoolSize = 20 })
	setClock(t, rdb, t0)
	const (
		limit     = 1_000_000
		txers     = 10
		txs       = 20
		perTx     = 5
		hitters   = 10
		perHitter = 50
	)
	var wg sync.WaitGroup
	for range txers {
		wg.Go(func() {
			for range txs {
				var cmds []*redis.Cmd
				_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
					for range perTx {
						cmds = append(cmds, p.Do(ctx, "FW.INCR", "atom", limit, 60))
					}
					return nil
				})
				if err != nil {
					t.Errorf("transaction: %v", err)
					return
				}
				var prev int64
				for i, c := range cmds {
					r, err := c.Int64Slice()
					if err != nil || len(r) != 5 || r[0] != 0 {
						t.Errorf("reply %v, %v", r, err)
						return
					}
					if i > 0 && r[2] != prev-1 {
						t.Errorf("transaction replies not consecutive: remaining %d after %d", r[2], prev)
						return
					}
					prev = r[2]
				}
			}
		})
	}
	for range hitters {
		wg.Go(func() {
			for range perHitter {
				if err := rdb.Do(ctx, "FW.INCR", "atom", limit, 60).Err(); err != nil {
					t.Errorf("FW.INCR: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := int64(txers*txs*perTx + hitters*perHitter)
	wantInts(t, rdb, ints(0, limit, limit-total, -1, 60), "FW.INCR", "atom", limit, 60, 0)
}
