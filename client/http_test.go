package client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/cellserver/cellserver/client"
)

// response is what a test checks of an HTTP response: the status, the
// rate-limit header fields, and the body.
type response struct {
	status int
	header map[string]string
	body   string
}

var rateHeaders = []string{"RateLimit-Policy", "RateLimit", "Retry-After",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}

// serve sends a GET as user through mw in front of a handler that
// answers "ok".
func serve(t *testing.T, mw func(http.Handler) http.Handler, user string) response {
	t.Helper()
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-User", user)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	got := response{status: rec.Code, header: map[string]string{}, body: rec.Body.String()}
	for _, k := range rateHeaders {
		if v := rec.Header().Get(k); v != "" {
			got.header[k] = v
		}
	}
	return got
}

func byUser(r *http.Request) string { return r.Header.Get("X-User") }

func middleware(t *testing.T, c *client.Client, opt client.MiddlewareOptions) func(http.Handler) http.Handler {
	t.Helper()
	if opt.Key == nil {
		opt.Key = byUser
	}
	mw, err := c.Middleware(opt)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

func h(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func expect(t *testing.T, mw func(http.Handler) http.Handler, user string, want ...response) {
	t.Helper()
	for i, w := range want {
		if got := serve(t, mw, user); !reflect.DeepEqual(got, w) {
			t.Fatalf("request %d of %s:\n got %+v\nwant %+v", i+1, user, got, w)
		}
	}
}

const (
	tooMany     = "Too Many Requests\n"
	unavailable = "Service Unavailable\n"
)

func TestMiddlewareHeaders(t *testing.T) {
	s := startReal(t)
	c := newClient(t, s, &fakeClock{now: t0}, nil)
	perMinute := client.NewFixedWindow(3, time.Minute)
	perMinute.Name = "per-minute"
	mw := middleware(t, c, client.MiddlewareOptions{Limits: []client.Limit{perMinute}, LegacyHeaders: true})
	policy := `"per-minute";q=3;w=60`
	expect(t, mw, "alice",
		response{200, h("RateLimit-Policy", policy, "RateLimit", `"per-minute";r=2;t=60`,
			"X-RateLimit-Limit", "3", "X-RateLimit-Remaining", "2", "X-RateLimit-Reset", "60"), "ok"},
		response{200, h("RateLimit-Policy", policy, "RateLimit", `"per-minute";r=1;t=60`,
			"X-RateLimit-Limit", "3", "X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "60"), "ok"},
		response{200, h("RateLimit-Policy", policy, "RateLimit", `"per-minute";r=0;t=60`,
			"X-RateLimit-Limit", "3", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"), "ok"},
		response{429, h("RateLimit-Policy", policy, "RateLimit", `"per-minute";r=0;t=60`, "Retry-After", "60",
			"X-RateLimit-Limit", "3", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"), tooMany},
	)
	// Another user has a budget of its own; no legacy fields by default.
	mw = middleware(t, c, client.MiddlewareOptions{Limits: []client.Limit{perMinute}})
	expect(t, mw, "bob", response{200, h("RateLimit-Policy", policy, "RateLimit", `"per-minute";r=2;t=60`), "ok"})
}

func TestMiddlewareMultiLimit(t *testing.T) {
	s := startReal(t)
	c := newClient(t, s, &fakeClock{now: t0}, nil)
	perSecond := client.NewGCRA(4, 5, time.Second) // 5 per second
	perSecond.Name = "per-second"
	perDay := client.NewFixedWindow(3, 24*time.Hour)
	perDay.Name = "per-day"
	mw := middleware(t, c, client.MiddlewareOptions{Limits: []client.Limit{perSecond, perDay}})
	policy := `"per-second";q=5;w=1, "per-day";q=3;w=86400`
	expect(t, mw, "alice",
		response{200, h("RateLimit-Policy", policy, "RateLimit", `"per-day";r=2;t=86400`), "ok"},
		response{200, h("RateLimit-Policy", policy, "RateLimit", `"per-day";r=1;t=86400`), "ok"},
		response{200, h("RateLimit-Policy", policy, "RateLimit", `"per-day";r=0;t=86400`), "ok"},
		response{429, h("RateLimit-Policy", policy, "RateLimit", `"per-day";r=0;t=86400`, "Retry-After", "86400"), tooMany},
		response{429, h("RateLimit-Policy", policy, "RateLimit", `"per-day";r=0;t=86400`, "Retry-After", "86400"), tooMany},
	)
	// The refused requests did not spend the per-second budget: 3 of 5
	// are spent.
	got, err := newRedis(t, s).Do(ctx, "CL.THROTTLE", "rl:{alice}:per-second", 4, 5, 1, 0).Int64Slice()
	if err != nil || !reflect.DeepEqual(got, []int64{0, 5, 2, -1, 1}) {
		t.Fatalf("per-second after the refusals: %v, %v", got, err)
	}
	// When the per-second limit has fewer left, the headers show it.
	perDay.Rate = 100
	mw = middleware(t, c, client.MiddlewareOptions{Limits: []client.Limit{perSecond, perDay},
		Cost: func(*http.Request) int64 { return 4 }})
	expect(t, mw, "bob",
		response{200, h("RateLimit-Policy", `"per-second";q=5;w=1, "per-day";q=100;w=86400`,
			"RateLimit", `"per-second";r=1;t=1`), "ok"},
		response{429, h("RateLimit-Policy", `"per-second";q=5;w=1, "per-day";q=100;w=86400`,
			"RateLimit", `"per-second";r=1;t=1`, "Retry-After", "1"), tooMany},
	)
}

func TestMiddlewareFailurePolicy(t *testing.T) {
	s := startReal(t)
	clock := &fakeClock{now: t0}
	var events []client.Event
	c := newClient(t, s, clock, &events)
	limit := func(name string, f client.Failure) client.MiddlewareOptions {
		l := client.NewFixedWindow(2, time.Minute)
		l.Name, l.Failure = name, f
		return client.MiddlewareOptions{Limits: []client.Limit{l}}
	}
	local := middleware(t, c, limit("local", client.FailLocal))
	closed := middleware(t, c, limit("closed", client.FailClosed))
	open := middleware(t, c, limit("open", client.FailOpen))
	p := func(name string) string { return `"` + name + `";q=2;w=60` }

	expect(t, local, "u", response{200, h("RateLimit-Policy", p("local"), "RateLimit", `"local";r=1;t=60`), "ok"})

	s.Kill()
	// The local fallback enforces the limit in this process, from zero.
	expect(t, local, "u",
		response{200, h("RateLimit-Policy", p("local"), "RateLimit", `"local";r=1;t=60`), "ok"},
		response{200, h("RateLimit-Policy", p("local"), "RateLimit", `"local";r=0;t=60`), "ok"},
		response{429, h("RateLimit-Policy", p("local"), "RateLimit", `"local";r=0;t=60`, "Retry-After", "60"), tooMany},
	)
	if c.BreakerState() != client.Open {
		t.Fatalf("breaker %v, want open", c.BreakerState())
	}
	expect(t, closed, "u", response{503, h("RateLimit-Policy", p("closed")), unavailable})
	expect(t, open, "u", response{200, h("RateLimit-Policy", p("open"), "RateLimit", `"open";r=2;t=0`), "ok"})

	s.Start(t)
	// The breaker is still open: the server is not asked yet.
	expect(t, local, "u", response{429, h("RateLimit-Policy", p("local"), "RateLimit", `"local";r=0;t=60`, "Retry-After", "60"), tooMany})
	clock.Advance(5 * time.Second)
	// The probe finds the server (restarted empty) and closes the breaker.
	expect(t, local, "u",
		response{200, h("RateLimit-Policy", p("local"), "RateLimit", `"local";r=1;t=60`), "ok"},
		response{200, h("RateLimit-Policy", p("local"), "RateLimit", `"local";r=0;t=60`), "ok"},
	)
	if c.BreakerState() != client.Closed {
		t.Fatalf("breaker %v, want closed", c.BreakerState())
	}
	expect(t, closed, "u", response{200, h("RateLimit-Policy", p("closed"), "RateLimit", `"closed";r=1;t=60`), "ok"})
	got, err := newRedis(t, s).Do(ctx, "FW.INCR", "rl:{u}:local", 2, 60, 0).Int64Slice()
	if err != nil || !reflect.DeepEqual(got, []int64{0, 2, 0, -1, 60}) {
		t.Fatalf("the server's count: %v, %v", got, err)
	}

	var kinds []string
	for _, e := range events {
		switch e.Type {
		case client.EventServerError:
			kinds = append(kinds, "server-error")
		case client.EventBreaker:
			kinds = append(kinds, "breaker "+e.State.String())
		case client.EventFallback:
			kinds = append(kinds, "fallback "+[]string{"local", "open", "closed"}[e.Failure])
		}
	}
	want := []string{"server-error", "breaker open", "fallback local", "fallback local", "fallback local",
		"fallback closed", "fallback open", "fallback local", "breaker half-open", "breaker closed"}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("events:\n got %q\nwant %q", kinds, want)
	}
}
