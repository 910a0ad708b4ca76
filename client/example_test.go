package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/cellserver/cellserver/client"
	"github.com/redis/go-redis/v9"
)

// A Client over a cellserver: several limits checked in one atomic call.
func ExampleClient_AllowAll() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	c, _ := client.New(rdb, client.Options{})
	perSecond := client.NewTokenBucket(10, 10, time.Second)
	perDay := client.NewFixedWindow(1000, 24*time.Hour)
	d, err := c.AllowAll(context.Background(),
		client.Check{Key: "{user:42}:s", Limit: perSecond, Cost: 1},
		client.Check{Key: "{user:42}:d", Limit: perDay, Cost: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	if d.Limited {
		fmt.Printf("refused by limit %d, retry in %v\n", d.Refused, d.RetryAfter())
	}
}

// While the server is unreachable, a FailLocal limit (the default) is
// enforced in this process by the same algorithm. Here no server listens
// at all, and the clock is fixed.
func ExampleClient_Allow_localFallback() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	now := time.Unix(1_700_006_400, 0)
	c, _ := client.New(rdb, client.Options{Now: func() time.Time { return now }})
	limit := client.NewFixedWindow(2, time.Minute)
	for range 3 {
		r, _ := c.Allow(context.Background(), "user:42", limit, 1)
		fmt.Printf("limited=%v remaining=%d retry=%v source=%v\n", r.Limited, r.Remaining, r.RetryAfter, r.Source)
	}
	// Output:
	// limited=false remaining=1 retry=0s source=local
	// limited=false remaining=0 retry=0s source=local
	// limited=true remaining=0 retry=1m0s source=local
}

// The middleware in front of a handler: the headers a client sees.
func ExampleClient_Middleware() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // no server: the local fallback answers
	now := time.Unix(1_700_006_400, 0)
	c, _ := client.New(rdb, client.Options{Now: func() time.Time { return now }})
	perMinute := client.NewFixedWindow(2, time.Minute)
	perMinute.Name = "per-minute"
	limit, _ := c.Middleware(client.MiddlewareOptions{Limits: []client.Limit{perMinute}})
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello") }))
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		fmt.Println(rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"), rec.Header().Values("Retry-After"))
	}
	// Output:
	// 200 "per-minute";q=2;w=60 "per-minute";r=1;t=60 []
	// 200 "per-minute";q=2;w=60 "per-minute";r=0;t=60 []
	// 429 "per-minute";q=2;w=60 "per-minute";r=0;t=60 [60]
}

// Wait paces work to a queue's rate: each caller gets its turn and sleeps
// until it. Here no server listens, so the local fallback keeps the queue
// (with a server, every process sharing the key shares one schedule), the
// clock is fixed and the sleeps are only printed.
func ExampleClient_Wait() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	now := time.Unix(1_700_006_400, 0)
	sleep := func(_ context.Context, d time.Duration) error { fmt.Println("sleep", d); return nil }
	c, _ := client.New(rdb, client.Options{Now: func() time.Time { return now }, Sleep: sleep})
	payments := client.NewLeakyQueue(3, 10, time.Second) // 3 places, one leaves every 100 ms
	for range 4 {
		if _, err := c.Wait(context.Background(), "payments", payments, 1); err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println("call the payment provider")
	}
	// Output:
	// call the payment provider
	// sleep 100ms
	// call the payment provider
	// sleep 200ms
	// call the payment provider
	// client: queue full: retry after 100ms
}
