// Command floodcache measures the client's refusal cache against one
// flooded key: -callers goroutines (50) call Client.Allow on one key as
// fast as they can for -for (3 s) with the real clock, once through a
// Client with the refusal cache and once through one without
// (NoRefusalCache), in alternating order for -rounds rounds, against the
// cellserver at -addr. For each run it prints the decisions per second the
// callers got, how many were allowed, and the commands per second the
// server processed (the growth of INFO stats total_commands_processed over
// the run, less the two INFO calls); then, per limit, the medians and the
// ratios cache/no cache. bench/floodcache.sh starts the server and runs it.
//
// The limits are per-second and per-minute ones of every kind the cache
// answers for, each on its own key: FW.INCR 100 per second, TB.TAKE 100
// refilled 100 per second, SW.HIT 100 per second, CL.THROTTLE 100 per
// second (a retry_after under 1 s in whole-second replies leaves the cache
// nothing to keep, see the client's package doc) and CL.THROTTLE 10 per
// minute (a request every 6 s: retry_after up to 6 s).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/client"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7431", "cellserver address")
	callers := flag.Int("callers", 50, "goroutines flooding the key")
	dur := flag.Duration("for", 3*time.Second, "length of one run")
	rounds := flag.Int("rounds", 2, "rounds of (no cache, cache) runs, the order alternating")
	only := flag.String("limits", "", "comma-separated names of the limits to run (default: all)")
	flag.Parse()

	limits := []struct {
		name  string
		limit client.Limit
	}{
		{"FW.INCR 100/s", client.NewFixedWindow(100, time.Second)},
		{"TB.TAKE 100, 100/s", client.NewTokenBucket(100, 100, time.Second)},
		{"SW.HIT 100/s", client.NewSlidingWindow(100, time.Second)},
		{"CL.THROTTLE 100/s", client.NewGCRA(99, 100, time.Second)},
		{"CL.THROTTLE 10/min", client.NewGCRA(9, 10, time.Minute)},
	}
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: *callers + 10, MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		fmt.Fprintln(os.Stderr, "floodcache:", err)
		os.Exit(1)
	}
	fmt.Printf("%d callers on one key, %v per run, %d rounds\n\n", *callers, *dur, *rounds)
	fmt.Println("| limit | cache | decisions/s | allowed | server commands/s |")
	fmt.Println("|---|---|---:|---:|---:|")
	type fig struct{ dps, cps []float64 }
	summary := map[string]*[2]fig{}
	for _, l := range limits {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), l.name) {
			continue
		}
		summary[l.name] = &[2]fig{}
		for r := range *rounds {
			for i := range 2 {
				cache := (i+r)%2 == 1
				key := fmt.Sprintf("flood:%s:%d:%v", strings.Fields(l.name)[0], r, cache)
				c, err := client.New(rdb, client.Options{Timeout: time.Second, NoRefusalCache: !cache})
				if err != nil {
					panic(err)
				}
				dps, allowed, cps := run(ctx, rdb, c, key, l.limit, *callers, *dur)
				on := "off"
				if cache {
					on = "on"
				}
				fmt.Printf("| %s | %s | %.0f | %d | %.0f |\n", l.name, on, dps, allowed, cps)
				idx := 0
				if cache {
					idx = 1
				}
				f := &summary[l.name][idx]
				f.dps, f.cps = append(f.dps, dps), append(f.cps, cps)
			}
		}
	}
	fmt.Println("\n| limit | decisions/s off → on | ratio | server commands/s off → on | ratio |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, l := range limits {
		s, ok := summary[l.name]
		if !ok {
			continue
		}
		d0, d1, c0, c1 := median(s[0].dps), median(s[1].dps), median(s[0].cps), median(s[1].cps)
		fmt.Printf("| %s | %.0f → %.0f | %.1f× | %.0f → %.0f | ÷%.1f |\n", l.name, d0, d1, d1/d0, c0, c1, c0/c1)
	}
}

// run floods key through c for dur: the decisions per second, the
// allowed count, and the server's commands per second.
func run(ctx context.Context, rdb *redis.Client, c *client.Client, key string, l client.Limit, callers int, dur time.Duration) (float64, int64, float64) {
	before := commands(ctx, rdb)
	var n, allowed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(dur)
	for range callers {
		wg.Go(func() {
			var mine, ok int64
			for time.Now().Before(end) {
				r, err := c.Allow(ctx, key, l, 1)
				if err != nil {
					fmt.Fprintln(os.Stderr, "floodcache:", err)
					os.Exit(1)
				}
				mine++
				if !r.Limited {
					ok++
				}
			}
			n.Add(mine)
			allowed.Add(ok)
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	after := commands(ctx, rdb)
	return float64(n.Load()) / el, allowed.Load(), float64(after-before-1) / el
}

// commands reads INFO stats total_commands_processed.
func commands(ctx context.Context, rdb *redis.Client) int64 {
	s, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		panic(err)
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				panic(err)
			}
			return n
		}
	}
	panic("no total_commands_processed in INFO stats")
}

func median(a []float64) float64 {
	s := slices.Clone(a)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
