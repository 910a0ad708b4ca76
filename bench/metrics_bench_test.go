package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/metrics"
)

// BenchmarkTCPMetrics runs BenchmarkTCP's P16 workload with the metrics
// endpoint off and on; "on" scrapes /metrics every 100 ms meanwhile, ten
// times more often than a usual Prometheus. Per-call timing and counters
// run either way (INFO commandstats needs them): what "on" adds is the
// scrapes. ns/op is per command.
func BenchmarkTCPMetrics(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			srv := serveTCP(b)
			if on {
				hs := httptest.NewServer(metrics.Handler(srv.Server))
				defer hs.Close()
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					t := time.NewTicker(100 * time.Millisecond)
					defer t.Stop()
					for {
						select {
						case <-stop:
							return
						case <-t.C:
							if resp, err := http.Get(hs.URL); err == nil {
								_, _ = io.Copy(io.Discard, resp.Body)
								resp.Body.Close()
							}
						}
					}
				}()
			}
			keys := benchKeys()
			ctx := context.Background()
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, DisableIdentity: true})
			defer rdb.Close()
			const depth = 16
			slots := make([][]any, depth)
			for j := range slots {
				slots[j] = []any{"CL.THROTTLE", "", "15", "30", "60"}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += depth {
				pipe := rdb.Pipeline()
				for j := range slots {
					slots[j][1] = string(keys[(i+j)%65536])
					pipe.Do(ctx, slots[j]...)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScrape is one scrape of the collector with 100 connected
// clients that have each run a few commands.
func BenchmarkScrape(b *testing.B) {
	srv := serveTCP(b)
	ctx := context.Background()
	for i := range 100 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, DisableIdentity: true})
		defer rdb.Close()
		rdb.Do(ctx, "CL.THROTTLE", string(benchKeys()[i]), "15", "30", "60")
		rdb.Do(ctx, "PING")
	}
	h := metrics.Handler(srv.Server)
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
	}
}
