package client_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/client"
	"github.com/redis/go-redis/v9"
)

// cacheLimits are the limits of the randomized workload: every kind, with
// small limits and periods so that refusals, refills and new windows come
// often within a few seconds of the debug clock.
var cacheLimits = func() []client.Limit {
	exact := client.NewSlidingWindow(4, 1500*time.Millisecond)
	exact.Exact = true
	bounded := client.NewLeakyQueue(5, 4, time.Second) // refused for its wait beyond 600 ms too
	bounded.MaxWait = 600 * time.Millisecond
	return []client.Limit{
		client.NewGCRA(4, 5, 10*time.Second), // T 2 s, τ 10 s
		client.NewGCRA(2, 1, time.Second),    // T 1 s, τ 3 s
		client.NewGCRA(5, 3, 10*time.Second), // T 3.33 s, τ 20 s
		client.NewTokenBucket(5, 2, time.Second),
		client.NewTokenBucket(4, 3, time.Second), // a token every 333.3 ms
		client.NewTokenBucket(3, 1, 700*time.Millisecond),
		client.NewSlidingWindow(5, 2*time.Second),
		client.NewSlidingWindow(3, 3*time.Second),
		exact,
		client.NewFixedWindow(5, time.Second),
		client.NewFixedWindow(3, 2500*time.Millisecond),
		client.NewLeakyQueue(4, 3, time.Second), // one leaves every 333.3 ms
		client.NewLeakyQueue(3, 2, 1500*time.Millisecond),
		bounded,
	}
}()

// pair is the same workload sent through a Client with the refusal cache
// and one without, to two keyspaces of one server whose debug clock is
// the clients' clock.
type pair struct {
	t       *testing.T
	clock   *fakeClock
	admin   *redis.Client
	on, off *client.Client
}

func newPair(t *testing.T) *pair {
	s := startReal(t)
	p := &pair{t: t, clock: &fakeClock{now: t0}, admin: newRedis(t, s)}
	mk := func(noCache bool) *client.Client {
		c, err := client.New(newRedis(t, s), client.Options{Timeout: 5 * time.Second, FailureThreshold: 1 << 30,
			Now: p.clock.Now, NoRefusalCache: noCache})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	p.on, p.off = mk(false), mk(true)
	return p
}

// advance moves both clocks by d.
func (p *pair) advance(d time.Duration) {
	p.clock.Advance(d)
	if err := p.admin.Do(ctx, "DEBUG", "CLOCK", "SET", p.clock.Now().UnixNano()).Err(); err != nil {
		p.t.Fatal(err)
	}
}

// unitOf is the unit of a limit's reply times: seconds for GCRA, whose
// reply the cache ages by redis-cell's rounding, milliseconds for the
// others.
func unitOf(l client.Limit) time.Duration {
	if l.Kind == client.GCRA {
		return time.Second
	}
	return time.Millisecond
}

// checkCached holds a Result the cache answered (on) to what the server
// answered the same call (off), as the package doc states: the same
// decision, limit and remaining; retry_after and reset_after no less than
// the server's and at most one unit of the reply more (equal when the time
// since the refusal is a whole number of units; exact is true when the
// clock moved by whole ms only, so that the kinds replying in ms must
// answer exactly); above the limit, retry_after -1 on both; for a cost
// above the refused one, retry_after at most the server's but for a fixed
// window.
func checkCached(t *testing.T, what string, ch client.Check, on, off client.Result, exact bool) {
	t.Helper()
	slack := unitOf(ch.Limit)
	if exact && slack == time.Millisecond {
		slack = 0
	}
	near := func(a, b time.Duration) bool { return a >= b && a <= b+slack }
	ok := on.Limited == off.Limited && on.Limit == off.Limit && on.Remaining == off.Remaining && near(on.ResetAfter, off.ResetAfter)
	switch {
	case ch.Cost > on.Limit:
		ok = ok && on.RetryAfter == -1 && off.RetryAfter == -1
	case ch.Cost == 1 || ch.Limit.Kind == client.FixedWindow:
		ok = ok && near(on.RetryAfter, off.RetryAfter)
	default:
		ok = ok && on.RetryAfter > 0 && on.RetryAfter <= off.RetryAfter+slack
	}
	if !ok {
		t.Fatalf("%s: the cache answered %+v, the server %+v", what, on, off)
	}
}

// TestRefusalCacheMatchesServer: over a randomized workload of every kind
// (costs 1, above 1, 0, negative and above the limit; single calls,
// several limits at once, resets; the debug clock moving by whole
// milliseconds, or by any number of ns, often not at all), a Client with the refusal cache decides
// every call as one without it, and its local answers are the server's
// (checkCached). The cache answers a good share of the calls.
func TestRefusalCacheMatchesServer(t *testing.T) {
	t.Run("whole-ms", func(t *testing.T) { matchServer(t, true, 1) })
	t.Run("any-ns", func(t *testing.T) { matchServer(t, false, 2) })
}

func matchServer(t *testing.T, exact bool, seed uint64) {
	p := newPair(t)
	const steps = 3000
	rng := rand.New(rand.NewPCG(29, seed))
	cost := func(l client.Limit) int64 {
		switch n := rng.IntN(100); {
		case n < 60:
			return 1
		case n < 75:
			return 2 + rng.Int64N(2)
		case n < 82:
			return 0
		case n < 90:
			return -1 - rng.Int64N(3)
		default:
			return 7 // above every limit of cacheLimits
		}
	}
	var cached, ml, burst int
	var on, off []client.Check
	for step := range steps {
		var d time.Duration
		switch n := rng.IntN(100); {
		case n < 35 || burst > 0 && n < 60:
		case n < 75 || burst > 0 && n < 97:
			d = time.Duration(1+rng.IntN(80)) * time.Millisecond
		case n < 95:
			d = time.Duration(1+rng.IntN(1500)) * time.Millisecond
		default:
			d = time.Duration(1+rng.IntN(12000)) * time.Millisecond
		}
		if !exact && d > 0 {
			d += time.Duration(rng.IntN(1e6))
		}
		if d > 0 {
			p.advance(d)
		}
		nchecks := 1
		if rng.IntN(100) < 20 {
			nchecks = 2 + rng.IntN(2)
		}
		if rng.IntN(100) < 2 {
			li, k := rng.IntN(len(cacheLimits)), rng.IntN(2)
			name := fmt.Sprintf("%d.%d", li, k)
			if err := p.on.Reset(ctx, "on:"+name); err != nil {
				t.Fatal(err)
			}
			if err := p.off.Reset(ctx, "off:"+name); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if burst > 0 { // the same call again, as a flood sends it
			burst--
		} else {
			on, off = nil, nil
			for _, li := range rng.Perm(len(cacheLimits))[:nchecks] {
				l := cacheLimits[li]
				name := fmt.Sprintf("%d.%d", li, rng.IntN(2))
				c := cost(l)
				on = append(on, client.Check{Key: "on:" + name, Limit: l, Cost: c})
				off = append(off, client.Check{Key: "off:" + name, Limit: l, Cost: c})
			}
			if rng.IntN(2) == 0 {
				burst = rng.IntN(12)
			}
		}
		nchecks = len(on)
		what := fmt.Sprintf("step %d, %+v", step, on)
		don, errOn := p.on.AllowAll(ctx, on...)
		doff, errOff := p.off.AllowAll(ctx, off...)
		if errOn != nil || errOff != nil {
			t.Fatalf("%s: errors %v, %v", what, errOn, errOff)
		}
		if don.Limited != doff.Limited {
			t.Fatalf("%s: limited %v with the cache, %v without: %+v, %+v", what, don.Limited, doff.Limited, don, doff)
		}
		if don.Results[0].Source != client.FromCache && !(nchecks > 1 && don.Limited && don.Results[don.Refused-1].Source == client.FromCache) {
			for i := range don.Results {
				if don.Results[i] != doff.Results[i] || don.Refused != doff.Refused {
					t.Fatalf("%s: both from the server, %+v with the cache, %+v without", what, don, doff)
				}
			}
			continue
		}
		cached++
		if nchecks > 1 {
			ml++
		}
		if don.Refused != doff.Refused {
			t.Fatalf("%s: the cache named check %d, the server %d: %+v, %+v", what, don.Refused, doff.Refused, don, doff)
		}
		i := don.Refused - 1
		checkCached(t, what, on[i], don.Results[i], doff.Results[i], exact)
		for j := range don.Results {
			if don.Results[j].Limit != doff.Results[j].Limit {
				t.Fatalf("%s: limit of check %d: %+v, %+v", what, j+1, don, doff)
			}
		}
	}
	st := p.on.Stats()
	t.Logf("%d calls: %d answered by the cache (Stats %+v), %d of them of several limits", steps, cached, st, ml)
	if st.Cached != uint64(cached) || cached < steps/10 || ml < 10 {
		t.Fatalf("the cache answered %d calls (Stats %+v), %d of several limits: want at least %d and 10", cached, st, ml, steps/10)
	}
	if off := p.off.Stats(); off.Cached != 0 {
		t.Fatalf("NoRefusalCache: %+v", off)
	}
}

// TestRefusalCacheFlood: 50 goroutines flood one key with the clock
// frozen; once the key is refused the cache answers every call: the
// server sees the 100 allowed calls and a few refused ones per goroutine
// (those sent before a refusal was kept: a refusal whose reply comes back
// while allowed replies on the key still do is not kept), and every
// caller is refused from then on.
func TestRefusalCacheFlood(t *testing.T) {
	p := newPair(t)
	l := client.NewFixedWindow(100, time.Second)
	const callers, calls = 50, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range callers {
		wg.Go(func() {
			n := 0
			for range calls {
				r, err := p.on.Allow(context.Background(), "flood", l, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if !r.Limited {
					n++
				}
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	wg.Wait()
	st := p.on.Stats()
	if allowed != 100 || st.Sent+st.Cached != callers*calls || st.Sent > 100+6*callers {
		t.Fatalf("allowed %d, stats %+v: want 100 allowed and at most %d sent", allowed, st, 100+6*callers)
	}
	// At the window's end the server is asked again.
	p.advance(time.Second)
	if r, err := p.on.Allow(ctx, "flood", l, 1); err != nil || r.Limited || r.Source != client.FromServer {
		t.Fatalf("next window: %+v, %v", r, err)
	}
}

// TestRefusalCacheBypass: a cost-0 read and a refund go to the server,
// and a refund, Forget and Reset make the next call go there too.
func TestRefusalCacheBypass(t *testing.T) {
	p := newPair(t)
	l := client.NewTokenBucket(2, 1, time.Minute)
	allow := func(key string, cost int64) client.Result {
		t.Helper()
		r, err := p.on.Allow(ctx, key, l, cost)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	sent := func() uint64 { return p.on.Stats().Sent }
	allow("k", 2)
	if r := allow("k", 1); !r.Limited || r.Source != client.FromServer {
		t.Fatalf("first refusal: %+v", r)
	}
	if r := allow("k", 1); !r.Limited || r.Source != client.FromCache || r.RetryAfter != time.Minute || r.ResetAfter != 2*time.Minute {
		t.Fatalf("second refusal: %+v", r)
	}
	p.advance(10 * time.Second)
	if r := allow("k", 2); !r.Limited || r.Source != client.FromCache || r.RetryAfter != 50*time.Second || r.ResetAfter != 110*time.Second {
		t.Fatalf("a higher cost, 10 s later: %+v", r)
	}
	if r := allow("k", 5); r.Source != client.FromCache || r.RetryAfter != -1 {
		t.Fatalf("above the capacity: %+v", r)
	}
	n := sent()
	if r := allow("k", 0); r.Limited || r.Source != client.FromServer || sent() != n+1 {
		t.Fatalf("a cost-0 read: %+v", r)
	}
	if r := allow("k", 1); r.Source != client.FromCache {
		t.Fatalf("a read forgets nothing: %+v", r)
	}
	if r := allow("k", -1); r.Limited || r.Remaining != 1 {
		t.Fatalf("refund: %+v", r)
	}
	if r := allow("k", 1); r.Limited || r.Source != client.FromServer {
		t.Fatalf("after a refund: %+v", r)
	}
	allow("k", 1)
	p.on.Forget("k")
	if r := allow("k", 1); r.Source != client.FromServer {
		t.Fatalf("after Forget: %+v", r)
	}
	if err := p.on.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if r := allow("k", 1); r.Limited || r.Remaining != 1 {
		t.Fatalf("after Reset: %+v", r)
	}
	// A limit with other parameters on the key is not answered by the
	// refusal of the first.
	allow("k", 1)
	allow("k", 1)
	if r := allow("k", 1); r.Source != client.FromCache {
		t.Fatalf("refused again: %+v", r)
	}
	if r, err := p.on.Allow(ctx, "k", client.NewTokenBucket(2, 1, 2*time.Minute), 1); err != nil || r.Source != client.FromServer {
		t.Fatalf("another period: %+v, %v", r, err)
	}
}
