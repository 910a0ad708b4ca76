// Command rlsload drives a rate-limit service (Envoy's RLS v3,
// ShouldRateLimit) over gRPC and reports its decisions per second and the
// latency of its calls: it runs -streams callers, spread over -conns
// connections, each calling ShouldRateLimit in a loop for -for, and
// prints one line:
//
//	decisions/s 123456 p50 0.31ms p99 1.20ms calls 370368 ok 300000 over 70368 errors 0
//
// Each call carries one descriptor -key=<value>, the value drawn in turn
// from -values distinct values (value0, value1, ...), in -domain. Every
// caller stops by itself after -for; -timeout bounds each call.
// bench/rls.sh runs it against cellserver and envoyproxy/ratelimit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "the service's gRPC address (loopback)")
	streams := flag.Int("streams", 64, "concurrent callers")
	conns := flag.Int("conns", 4, "connections the callers share")
	dur := flag.Duration("for", 5*time.Second, "how long to call")
	domain := flag.String("domain", "bench", "the request's domain")
	key := flag.String("key", "user", "the descriptor's key")
	values := flag.Int("values", 10000, "distinct descriptor values")
	timeout := flag.Duration("timeout", 5*time.Second, "bound on each call")
	flag.Parse()
	if *streams < 1 || *conns < 1 || *values < 1 || *dur <= 0 || *dur > time.Hour {
		fmt.Fprintln(os.Stderr, "rlsload: -streams, -conns and -values must be at least 1, -for within an hour")
		os.Exit(2)
	}

	clients := make([]pb.RateLimitServiceClient, *conns)
	for i := range clients {
		cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "rlsload:", err)
			os.Exit(1)
		}
		defer cc.Close()
		clients[i] = pb.NewRateLimitServiceClient(cc)
	}
	// The values' descriptors, built once: the callers measure the
	// service, not the building of requests.
	reqs := make([]*pb.RateLimitRequest, *values)
	for i := range reqs {
		reqs[i] = &pb.RateLimitRequest{Domain: *domain, Descriptors: []*rlv3.RateLimitDescriptor{{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: *key, Value: "value" + strconv.Itoa(i)}}}}}
	}
	// One warm-up call per connection, so that connecting is not timed.
	for _, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		_, err := c.ShouldRateLimit(ctx, reqs[0])
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "rlsload: warm-up call:", err)
			os.Exit(1)
		}
	}

	var ok, over, errs atomic.Int64
	var firstErr atomic.Value
	lats := make([][]time.Duration, *streams)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(*dur)
	for s := 0; s < *streams; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			c := clients[s%len(clients)]
			l := make([]time.Duration, 0, 1<<16)
			for i := s; ; i += *streams {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				ctx, cancel := context.WithTimeout(context.Background(), *timeout)
				resp, err := c.ShouldRateLimit(ctx, reqs[i%len(reqs)])
				cancel()
				l = append(l, time.Since(t0))
				switch {
				case err != nil:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				case resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT:
					over.Add(1)
				default:
					ok.Add(1)
				}
			}
			lats[s] = l
		}(s)
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lats...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(p*float64(len(all)-1))]) / 1e6
	}
	calls := ok.Load() + over.Load() + errs.Load()
	fmt.Printf("decisions/s %.0f p50 %.3fms p99 %.3fms calls %d ok %d over %d errors %d\n",
		float64(ok.Load()+over.Load())/elapsed.Seconds(), pct(0.50), pct(0.99), calls, ok.Load(), over.Load(), errs.Load())
	if e := firstErr.Load(); e != nil {
		fmt.Fprintln(os.Stderr, "rlsload: first error:", e)
	}
}
