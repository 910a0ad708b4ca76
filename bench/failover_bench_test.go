package bench

// BenchmarkKillToFirstCorrectReply measures how long a failover by Redis
// Sentinel takes as a client sees it: for cellserver and, in the same
// run, for redis-server, each run starts a fresh group on 127.0.0.1 (a
// primary, a replica, three Sentinels with down-after-milliseconds 1000,
// quorum 2: internal/testkit/ha), drives one key into its limited state
// (FW.INCR with limit 1 on cellserver; INCR on Redis, the key limited
// once its count passes 1, as a fixed-window limiter in Redis would do
// it), and puts the group under a steady load through go-redis's
// FailoverClient: four goroutines each sending one limiter call on a
// random key per millisecond, and a probe sending the limited key's call
// once per millisecond. Then it kills the primary with SIGKILL and times
// the first reply to the probe that is correct: from a live node (the old
// one is dead; the replica answers READONLY until it is promoted), and
// refusing, since the key was limited before the kill. A reply admitting
// the key would be wrong (its state lost); the run counts them as
// wrong_replies and goes on waiting for a correct one.
//
// Each run is a sub-benchmark reporting kill_to_reply_ms (and
// wrong_replies); the parent prints p50 and max per server. Run it with
// -benchtime 1x, else a run is repeated for nothing:
//
//	go test -run xxx -bench KillToFirstCorrectReply -benchtime 1x ./bench/
//
// BENCH_FAILOVER_RUNS (5) sets the runs per server; the servers take
// turns. It skips Redis where redis-server is not installed.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit/ha"
	"github.com/redis/go-redis/v9"
)

func BenchmarkKillToFirstCorrectReply(b *testing.B) {
	runs := 5
	if s := os.Getenv("BENCH_FAILOVER_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	times := map[ha.Kind][]time.Duration{}
	for i := range runs {
		for _, kind := range []ha.Kind{ha.Cellserver, ha.Redis} {
			b.Run(fmt.Sprintf("%s/%d", kind, i+1), func(b *testing.B) {
				d, wrong := killToFirstCorrectReply(b, kind)
				times[kind] = append(times[kind], d)
				b.ReportMetric(float64(d.Microseconds())/1000, "kill_to_reply_ms")
				b.ReportMetric(float64(wrong), "wrong_replies")
			})
		}
	}
	for _, kind := range []ha.Kind{ha.Cellserver, ha.Redis} {
		ts := times[kind]
		if len(ts) == 0 {
			continue
		}
		slices.Sort(ts)
		fmt.Printf("%-10s %d runs, kill to first correct reply p50 %v, max %v, all %v\n", kind, len(ts),
			ts[len(ts)/2].Round(time.Millisecond), ts[len(ts)-1].Round(time.Millisecond), ts)
	}
}

// killToFirstCorrectReply runs one failover of a fresh group of kind and
// returns the time from the SIGKILL to the probe's first correct reply,
// and how many wrong replies came before it.
func killToFirstCorrectReply(b *testing.B, kind ha.Kind) (time.Duration, int) {
	g := ha.Start(b, ha.Options{Kind: kind, DownAfter: time.Second}, 1)
	ctx := context.Background()
	fc := g.FailoverClient(b, func(o *redis.FailoverOptions) {
		o.MaxRetries = -1
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	})
	// call charges key and reports whether it was refused.
	call := func(key string) (refused bool, err error) {
		if kind == ha.Redis {
			n, err := fc.Incr(ctx, key).Result()
			return n > 1, err
		}
		v, err := fc.Do(ctx, "FW.INCR", key, 1, 1000000).Int64Slice()
		return err == nil && v[0] == 1, err
	}
	for i := 0; ; i++ {
		if refused, err := call("limited"); err != nil || refused {
			if err != nil {
				b.Fatal(err)
			}
			break
		}
	}
	if n, err := g.Nodes[0].Client.Do(ctx, "WAIT", 1, 5000).Int64(); err != nil || n != 1 {
		b.Fatalf("WAIT 1 5000: %d, %v", n, err)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, _ = call("load:" + strconv.Itoa(rand.IntN(100000)))
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // the load runs before the kill

	if err := g.Nodes[0].Signal(os.Kill); err != nil {
		b.Fatal(err)
	}
	killed := time.Now()
	g.Nodes[0].Kill() // reaped
	wrong := 0
	for time.Since(killed) < 60*time.Second {
		refused, err := call("limited")
		if err == nil && refused {
			return time.Since(killed), wrong
		}
		if err == nil {
			wrong++
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatalf("no correct reply within 60 s of the kill (%d wrong ones); the Sentinels name %q", wrong, g.MasterAddr())
	return 0, 0
}
