package integration

import (
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
