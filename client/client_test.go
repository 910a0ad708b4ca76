package client_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/cellserver/cellserver/client"
)

var ctx = context.Background()

func newClient(t *testing.T, s *realServer, clock *fakeClock, events *[]client.Event) *client.Client {
	t.Helper()
	opt := client.Options{Timeout: 2 * time.Second, FailureThreshold: 1, OpenFor: 5 * time.Second, Now: clock.Now}
	if events != nil {
		opt.OnEvent = func(e client.Event) { *events = append(*events, e) }
	}
	c, err := client.New(newRedis(t, s), opt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTypedCalls(t *testing.T) {
	s := startReal(t)
	c := newClient(t, s, &fakeClock{now: t0}, nil)
	type call struct {
		name string
		do   func() (client.Result, error)
		want client.Result
	}
	sec, ms := time.Second, time.Millisecond
	calls := []call{
		{"CL.THROTTLE", func() (client.Result, error) { return c.CLThrottle(ctx, "cl", 4, 5, 10*sec, 1) },
			client.Result{Limit: 5, Remaining: 4, ResetAfter: 2 * sec}},
		{"CL.THROTTLE quantity 5", func() (client.Result, error) { return c.CLThrottle(ctx, "cl", 4, 5, 10*sec, 5) },
			client.Result{Limited: true, Limit: 5, Remaining: 4, RetryAfter: 2 * sec, ResetAfter: 2 * sec}},
		{"TB.TAKE MS", func() (client.Result, error) { return c.TBTake(ctx, "tb", 10, 1, 500*ms, 3) },
			client.Result{Limit: 10, Remaining: 7, ResetAfter: 1500 * ms}},
		{"TB.TAKE over capacity", func() (client.Result, error) { return c.TBTake(ctx, "tb", 10, 1, 500*ms, 11) },
			client.Result{Limited: true, Limit: 10, Remaining: 7, RetryAfter: -1, ResetAfter: 1500 * ms}},
		{"SW.HIT EXACT", func() (client.Result, error) { return c.SWHit(ctx, "sw", 2, 10*sec, 2, true) },
			client.Result{Limit: 2, Remaining: 0, ResetAfter: 10 * sec}},
		{"SW.HIT EXACT limited", func() (client.Result, error) { return c.SWHit(ctx, "sw", 2, 10*sec, 1, true) },
			client.Result{Limited: true, Limit: 2, Remaining: 0, RetryAfter: 10 * sec, ResetAfter: 10 * sec}},
		{"FW.INCR", func() (client.Result, error) { return c.FWIncr(ctx, "fw", 3, time.Minute, 1) },
			client.Result{Limit: 3, Remaining: 2, ResetAfter: time.Minute}},
		{"LB.QUEUE MS", func() (client.Result, error) { return c.LBQueue(ctx, "lb", 4, 2, 500*ms, 2) },
			client.Result{Limit: 4, Remaining: 2}},
		{"LB.QUEUE behind 2", func() (client.Result, error) { return c.LBQueue(ctx, "lb", 4, 2, 500*ms, 1) },
			client.Result{Limit: 4, Remaining: 1, ResetAfter: 500 * ms}},
	}
	for _, cl := range calls {
		got, err := cl.do()
		if err != nil || got != cl.want {
			t.Errorf("%s: got %+v, %v; want %+v", cl.name, got, err, cl.want)
		}
	}
	// A server error reply is returned as it is, not taken for an outage.
	if _, err := c.FWIncr(ctx, "cl", 3, time.Minute, 1); err == nil || err.Error() != "WRONGTYPE Operation against a key holding the wrong kind of value" {
		t.Errorf("FW.INCR on a GCRA key: %v", err)
	}
	if c.BreakerState() != client.Closed {
		t.Errorf("breaker %v after an error reply", c.BreakerState())
	}
	if _, err := c.CLThrottle(ctx, "x", 1, 1, 1500*ms, 1); !errors.Is(err, client.ErrPeriod) {
		t.Errorf("GCRA with 1.5 s: %v", err)
	}
}

func TestAllowAll(t *testing.T) {
	s := startReal(t)
	c := newClient(t, s, &fakeClock{now: t0}, nil)
	perSec := client.NewTokenBucket(5, 5, time.Second)
	perDay := client.NewFixedWindow(2, 24*time.Hour)
	checks := []client.Check{{Key: "{u}s", Limit: perSec, Cost: 1}, {Key: "{u}d", Limit: perDay, Cost: 1}}
	day := 24 * time.Hour
	steps := []client.Decision{
		{Results: []client.Result{{Limit: 5, Remaining: 4, ResetAfter: 200 * time.Millisecond}, {Limit: 2, Remaining: 1, ResetAfter: day}}},
		{Results: []client.Result{{Limit: 5, Remaining: 3, ResetAfter: 400 * time.Millisecond}, {Limit: 2, Remaining: 0, ResetAfter: day}}},
		// The day refuses; the second's bucket reports its state, uncharged.
		{Limited: true, Refused: 2, Results: []client.Result{{Limit: 5, Remaining: 3, ResetAfter: 400 * time.Millisecond},
			{Limited: true, Limit: 2, Remaining: 0, RetryAfter: day, ResetAfter: day}}},
	}
	for i, w := range steps {
		got, err := c.AllowAll(ctx, checks...)
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Fatalf("call %d: got %+v, %v; want %+v", i+1, got, err, w)
		}
	}
	if got, _ := c.TBTake(ctx, "{u}s", 5, 5, time.Second, 0); got.Remaining != 3 {
		t.Fatalf("the refused call spent the per-second budget: %+v", got)
	}
}
