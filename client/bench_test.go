package client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cellserver/cellserver/client"
	"github.com/redis/go-redis/v9"
)

// BenchmarkMiddleware measures a request through the middleware against
// the bare handler: with one limit (FW.INCR) and with two (ML.THROTTLE)
// on a cellserver over loopback, and with the server down and the breaker
// open (the local fallback, no network). The handler writes "ok"; the
// request never leaves the process but for the limiter's round trip.
func BenchmarkMiddleware(b *testing.B) {
	s := startReal(b)
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	perSecond := client.NewGCRA(1_000_000, 1_000_000, time.Second)
	perSecond.Name = "per-second"
	perDay := client.NewFixedWindow(1<<40, 24*time.Hour)
	perDay.Name = "per-day"
	run := func(b *testing.B, h http.Handler) {
		req := httptest.NewRequest("GET", "/", nil)
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 {
				b.Fatalf("status %d", rec.Code)
			}
		}
	}
	newMW := func(b *testing.B, addr string, limits ...client.Limit) http.Handler {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		b.Cleanup(func() { rdb.Close() })
		c, err := client.New(rdb, client.Options{Timeout: time.Second, FailureThreshold: 1, OpenFor: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		mw, err := c.Middleware(client.MiddlewareOptions{Limits: limits})
		if err != nil {
			b.Fatal(err)
		}
		return mw(hello)
	}
	b.Run("bare", func(b *testing.B) { run(b, hello) })
	b.Run("one-limit", func(b *testing.B) { run(b, newMW(b, s.Addr, perDay)) })
	b.Run("two-limits", func(b *testing.B) { run(b, newMW(b, s.Addr, perSecond, perDay)) })
	b.Run("local-fallback", func(b *testing.B) { run(b, newMW(b, "127.0.0.1:1", perSecond, perDay)) })
}
