// Command example is a small HTTP service behind cellserver's rate-limit
// middleware: each API key (or, without one, each client IP) may make 10
// requests per second and 1000 per day, checked in one atomic
// ML.THROTTLE, so a request the daily limit refuses does not spend the
// per-second budget. While cellserver is unreachable the limits fall back
// to this process.
//
//	go run ./client/example -redis 127.0.0.1:6379 -listen 127.0.0.1:8080
//	curl -i -H 'X-API-Key: k1' http://127.0.0.1:8080/
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/cellserver/cellserver/client"
	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "cellserver address")
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP address")
	flag.Parse()

	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()
	c, err := client.New(rdb, client.Options{
		OnEvent: func(e client.Event) {
			switch e.Type {
			case client.EventBreaker:
				log.Printf("rate limiter: circuit breaker %s", e.State)
			case client.EventServerError:
				log.Printf("rate limiter: %v", e.Err)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	perSecond := client.NewGCRA(9, 10, time.Second) // 10 per second, bursts of 10
	perSecond.Name = "per-second"
	perDay := client.NewFixedWindow(1000, 24*time.Hour)
	perDay.Name, perDay.Failure = "per-day", client.FailOpen // a day's count is not worth a local guess
	limit, err := c.Middleware(client.MiddlewareOptions{
		Limits: []client.Limit{perSecond, perDay},
		Key: func(r *http.Request) string {
			if k := r.Header.Get("X-API-Key"); k != "" {
				return "key:" + k
			}
			return "ip:" + client.RemoteIP(r)
		},
		LegacyHeaders: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") })
	log.Printf("listening on %s, limits at %s", *listen, *addr)
	log.Fatal(http.ListenAndServe(*listen, limit(hello)))
}
