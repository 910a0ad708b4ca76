package client_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cellserver/cellserver/client"
	"github.com/redis/go-redis/v9"
)

// sleeper is an Options.Sleep that sleeps on no clock: it records each
// wait, and ends it as end says (nil: at once, as if the time had passed).
type sleeper struct {
	mu    sync.Mutex
	slept []time.Duration
	end   func(ctx context.Context) error
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.slept = append(s.slept, d)
	s.mu.Unlock()
	if s.end != nil {
		return s.end(ctx)
	}
	return nil
}

func waitClient(t *testing.T, s *realServer, sl *sleeper, now func() time.Time) *client.Client {
	t.Helper()
	c, err := client.New(newRedis(t, s), client.Options{Timeout: 2 * time.Second, Now: now, Sleep: sl.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWaitTurns: 50 goroutines Wait on one queue (100 places, 10 per
// second) at one frozen instant: each is given its own turn, 100 ms
// after the one before it, and sleeps until it.
func TestWaitTurns(t *testing.T) {
	s := startReal(t)
	sl := &sleeper{}
	c := waitClient(t, s, sl, (&fakeClock{now: t0}).Now)
	q := client.NewLeakyQueue(100, 10, time.Second)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := c.Wait(ctx, "q", q, 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	slices.Sort(sl.slept)
	if len(sl.slept) != 49 { // the first goes at once
		t.Fatalf("%d sleeps, want 49", len(sl.slept))
	}
	for i, d := range sl.slept {
		if want := time.Duration(i+1) * 100 * time.Millisecond; d != want {
			t.Fatalf("sleep %d: %v, want %v", i, d, want)
		}
	}
	// A wait in whole milliseconds though the period is whole seconds.
	r, err := c.Wait(ctx, "q", q, 1)
	if err != nil || r.ResetAfter != 5*time.Second || r.Remaining != 49 {
		t.Fatalf("the 51st: %+v, %v", r, err)
	}
}

// TestWaitRefusals: a full queue, a turn beyond MaxWait or the context's
// deadline, and a cost above the capacity are refused with a
// QueueFullError that says when to retry; a limit of another kind is no
// queue.
func TestWaitRefusals(t *testing.T) {
	s := startReal(t)
	sl := &sleeper{}
	c := waitClient(t, s, sl, time.Now) // the deadline's time left is read on the real clock
	q := client.NewLeakyQueue(5, 10, time.Second)
	if _, err := c.Allow(ctx, "q", q, 3); err != nil { // 300 ms of work queued
		t.Fatal(err)
	}
	var full *client.QueueFullError
	bounded := q
	bounded.MaxWait = 250 * time.Millisecond
	if _, err := c.Wait(ctx, "q", bounded, 1); !errors.As(err, &full) || !errors.Is(err, client.ErrQueueFull) || full.RetryAfter != 50*time.Millisecond {
		t.Errorf("MaxWait 250 ms behind 300 ms: %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(dctx, "q", q, 1); !errors.As(err, &full) || full.RetryAfter < 50*time.Millisecond || full.RetryAfter > 250*time.Millisecond {
		t.Errorf("a deadline 250 ms away behind 300 ms: %v", err)
	}
	if _, err := c.Wait(ctx, "q", q, 3); !errors.As(err, &full) || full.RetryAfter != 100*time.Millisecond {
		t.Errorf("3 places of the 2 free: %v", err)
	}
	if _, err := c.Wait(ctx, "q", q, 6); !errors.As(err, &full) || full.RetryAfter != -1 {
		t.Errorf("cost above the capacity: %v", err)
	}
	if _, err := c.Wait(ctx, "tb", client.NewTokenBucket(5, 1, time.Second), 1); !errors.Is(err, client.ErrNotQueue) {
		t.Errorf("a token bucket: %v", err)
	}
	if len(sl.slept) != 0 {
		t.Errorf("slept %v on refusals", sl.slept)
	}
	if r, err := c.Allow(ctx, "q", q, 0); err != nil || r.Remaining != 2 {
		t.Errorf("the refusals charged something: %+v, %v", r, err)
	}
}

// TestWaitGivesBack: a context that ends before the turn makes Wait
// return its error and give the places back.
func TestWaitGivesBack(t *testing.T) {
	s := startReal(t)
	sl := &sleeper{end: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	c := waitClient(t, s, sl, (&fakeClock{now: t0}).Now)
	q := client.NewLeakyQueue(100, 10, time.Second)
	if _, err := c.Allow(ctx, "q", q, 5); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	sl.end = func(context.Context) error { cancel(); return cctx.Err() }
	if r, err := c.Wait(cctx, "q", q, 2); !errors.Is(err, context.Canceled) || r.ResetAfter != 500*time.Millisecond {
		t.Fatalf("cancelled while waiting: %+v, %v", r, err)
	}
	if r, err := c.Allow(ctx, "q", q, 0); err != nil || r.Remaining != 95 || r.ResetAfter != 500*time.Millisecond {
		t.Fatalf("after the give-back: %+v, %v; want 95 free places, empty in 500 ms", r, err)
	}
	if _, err := c.Wait(cctx, "q", q, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("an ended context: %v", err)
	}
}

// TestMiddlewareMaxDelay: with MaxDelay, a Queue limit delays a request
// until its turn instead of refusing it, up to MaxDelay; without, it
// admits only into an empty queue.
func TestMiddlewareMaxDelay(t *testing.T) {
	s := startReal(t)
	sl := &sleeper{}
	c := waitClient(t, s, sl, (&fakeClock{now: t0}).Now)
	q := client.NewLeakyQueue(10, 10, time.Second)
	q.Name = "api"
	mw := middleware(t, c, client.MiddlewareOptions{Limits: []client.Limit{q}, MaxDelay: 150 * time.Millisecond})
	policy := `"api";q=10;w=1`
	expect(t, mw, "alice",
		response{200, h("RateLimit-Policy", policy, "RateLimit", `"api";r=9;t=0`), "ok"},
		response{200, h("RateLimit-Policy", policy, "RateLimit", `"api";r=8;t=1`), "ok"},
		response{429, h("RateLimit-Policy", policy, "RateLimit", `"api";r=8;t=1`, "Retry-After", "1"), tooMany},
	)
	if !slices.Equal(sl.slept, []time.Duration{100 * time.Millisecond}) {
		t.Errorf("slept %v, want 100 ms once", sl.slept)
	}
	meter := middleware(t, c, client.MiddlewareOptions{Limits: []client.Limit{q}})
	expect(t, meter, "bob",
		response{200, h("RateLimit-Policy", policy, "RateLimit", `"api";r=9;t=0`), "ok"},
		response{429, h("RateLimit-Policy", policy, "RateLimit", `"api";r=9;t=1`, "Retry-After", "1"), tooMany},
	)
	// A request whose client goes away while it waits gives its place back.
	gone := &sleeper{end: func(context.Context) error { return context.Canceled }}
	c2 := waitClient(t, s, gone, (&fakeClock{now: t0}).Now)
	mw2 := middleware(t, c2, client.MiddlewareOptions{Limits: []client.Limit{q}, MaxDelay: time.Second})
	serve(t, mw2, "carol")
	if got := serve(t, mw2, "carol"); got.status != 200 || got.body != "" {
		t.Errorf("a request that gave up: %+v, want nothing written", got)
	}
	if r, err := c.Allow(ctx, "rl:{carol}:api", q, 0); err != nil || r.Remaining != 9 {
		t.Errorf("after a request gave up: %+v, %v; want its place back", r, err)
	}
}

// waitWorkerEnv, set, makes the test binary a worker of TestWaitPaces
// (see TestMain): "addr key n", it Waits n times on the queue and prints
// the instant of each turn.
const waitWorkerEnv = "CELLSERVER_CLIENT_WAIT_WORKER"

// The queue TestWaitPaces shares across processes: 25 per second (T = 40
// ms), room for every worker's request.
var pacedQueue = client.NewLeakyQueue(10, 25, time.Second)

// waitWorker is one process of TestWaitPaces.
func waitWorker(spec string) error {
	var addr, key string
	var n int
	if _, err := fmt.Sscan(spec, &addr, &key, &n); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c, err := client.New(rdb, client.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for range n {
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Wait(wctx, key, pacedQueue, 1)
		cancel()
		if err != nil {
			return err
		}
		fmt.Fprintln(out, time.Now().UnixNano())
	}
	return nil
}

// TestWaitPaces: four processes (this test binary, run again as workers)
// Wait on one queue of a server on the real clock, 20 turns each, and
// proceed at the queue's rate: 80 turns at 25 per second, measured from
// the first turn to the last (about 3.2 s), within ±10%. It is the one
// test of the package on the real clock.
func TestWaitPaces(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 3 s of real time")
	}
	s := startReal(t)
	if err := newRedis(t, s).Do(ctx, "DEBUG", "CLOCK", "REAL").Err(); err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 20
	var (
		mu    sync.Mutex
		turns []int64
		wg    sync.WaitGroup
	)
	for range workers {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), waitWorkerEnv+"="+s.Addr+" paced "+strconv.Itoa(each))
		cmd.Stderr = os.Stderr
		wg.Go(func() {
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("worker: %v", err)
				return
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			mu.Lock()
			defer mu.Unlock()
			for sc.Scan() {
				n, err := strconv.ParseInt(sc.Text(), 10, 64)
				if err != nil {
					t.Errorf("worker printed %q", sc.Text())
					return
				}
				turns = append(turns, n)
			}
		})
	}
	wg.Wait()
	if len(turns) != workers*each {
		t.Fatalf("%d turns, want %d", len(turns), workers*each)
	}
	slices.Sort(turns)
	span := time.Duration(turns[len(turns)-1] - turns[0])
	rate := float64(len(turns)-1) / span.Seconds()
	minGap := time.Duration(1 << 62)
	for i := 1; i < len(turns); i++ {
		minGap = min(minGap, time.Duration(turns[i]-turns[i-1]))
	}
	t.Logf("%d turns over %v: %.2f per second (want 25 ± 10%%), closest two %v apart", len(turns), span, rate, minGap)
	if rate < 22.5 || rate > 27.5 {
		t.Errorf("%.2f turns per second, want 25 ± 10%%", rate)
	}
}

// TestRefusalCacheQueue: the refusal cache answers a Queue's refusal for
// want of places as the server would, and keeps nothing of a Queue with
// MaxWait, whose refusal may be for its wait alone while places free
// (remaining rises before retry_after).
func TestRefusalCacheQueue(t *testing.T) {
	p := newPair(t)
	q := client.NewLeakyQueue(3, 4, time.Second) // T = 250 ms
	bounded := q
	bounded.MaxWait = 300 * time.Millisecond
	for _, c := range []*client.Client{p.on, p.off} {
		if _, err := c.Allow(ctx, "full", q, 3); err != nil { // 750 ms of work
			t.Fatal(err)
		}
	}
	both := func(what string, l client.Limit) (on, off client.Result) {
		t.Helper()
		var err error
		if on, err = p.on.Allow(ctx, "full", l, 1); err != nil {
			t.Fatal(err)
		}
		if off, err = p.off.Allow(ctx, "full", l, 1); err != nil {
			t.Fatal(err)
		}
		if on.Limited != off.Limited || on.Remaining != off.Remaining || on.RetryAfter != off.RetryAfter || on.ResetAfter != off.ResetAfter {
			t.Fatalf("%s: the cache answered %+v, the server %+v", what, on, off)
		}
		return on, off
	}
	// Full: refused for a place, which frees in 250 ms; the wait beyond
	// 300 ms keeps it refused until 450 ms.
	if on, _ := both("bounded, full", bounded); on.Source != client.FromServer || on.RetryAfter != 450*time.Millisecond || on.Remaining != 0 {
		t.Fatalf("bounded, full: %+v", on)
	}
	p.advance(300 * time.Millisecond) // a place is free; the wait, 450 ms, is still too long
	if on, _ := both("bounded, a place free", bounded); on.Source != client.FromServer || !on.Limited || on.Remaining != 1 {
		t.Fatalf("bounded, a place free: %+v", on)
	}
	// Without MaxWait a refusal for want of places is kept until a place
	// frees.
	if _, err := p.on.Allow(ctx, "q2", q, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := p.off.Allow(ctx, "q2", q, 3); err != nil {
		t.Fatal(err)
	}
	first, err := p.on.Allow(ctx, "q2", q, 1)
	if err != nil || !first.Limited || first.Source != client.FromServer {
		t.Fatalf("the first refusal: %+v, %v", first, err)
	}
	p.advance(100 * time.Millisecond)
	on, err := p.on.Allow(ctx, "q2", q, 1)
	off, err2 := p.off.Allow(ctx, "q2", q, 1)
	if err != nil || err2 != nil || on.Source != client.FromCache || on.Limited != off.Limited || on.Remaining != off.Remaining ||
		on.RetryAfter != off.RetryAfter || on.ResetAfter != off.ResetAfter {
		t.Fatalf("cached %+v, server %+v (%v, %v)", on, off, err, err2)
	}
}
