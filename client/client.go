package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Failure is what a limit does when the server cannot answer (a network
// error, a timeout, or the circuit breaker open).
type Failure uint8

const (
	// FailLocal answers from the in-process fallback limiter: the same
	// limit, enforced per process. The default.
	FailLocal Failure = iota
	// FailOpen allows the request, reporting Remaining as the limit.
	FailOpen
	// FailClosed refuses to decide: the call returns ErrUnavailable, which
	// the middleware answers with 503.
	FailClosed
)

// ErrUnavailable is returned (wrapped with its cause) when the server
// cannot answer and a limit of the call fails closed.
var ErrUnavailable = errors.New("client: rate limiter unavailable")

// errBreakerOpen is the cause of a fallback the breaker chose.
var errBreakerOpen = errors.New("client: circuit breaker open")

// EventType says what an Event reports.
type EventType uint8

const (
	// EventServerError: a call to the server failed (Err says how).
	EventServerError EventType = iota + 1
	// EventBreaker: the circuit breaker moved to State.
	EventBreaker
	// EventFallback: a call was answered by the failure policy (Failure
	// says which) because of Err.
	EventFallback
)

// Event is what Options.OnEvent receives, for logging and metrics.
type Event struct {
	Type    EventType
	Err     error
	State   BreakerState // EventBreaker
	Failure Failure      // EventFallback
	Key     string       // EventServerError, EventFallback: the first key of the call
}

// Options configures a Client. The zero value is valid: every field has
// the default its comment states.
type Options struct {
	// Timeout bounds each call to the server. Default 100 ms.
	Timeout time.Duration
	// FailureThreshold is how many calls in a row must fail to open the
	// circuit breaker. Default 3.
	FailureThreshold int
	// OpenFor is how long the breaker stays open before it lets a probe
	// through. Default 5 s.
	OpenFor time.Duration
	// LocalMaxKeys bounds the keys the local fallback holds. Default
	// 100000.
	LocalMaxKeys int
	// Now is the clock of the breaker and of the local fallback. Default
	// time.Now.
	Now func() time.Time
	// OnEvent, when set, is called on server errors, breaker transitions
	// and fallbacks, from the calling goroutine. Default: none.
	OnEvent func(Event)
	// Sleep waits d, or until ctx ends (then it returns ctx's error), for
	// Wait and the middleware's MaxDelay. Tests give it a clock of their
	// own. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// NoRefusalCache turns the refusal cache off: every call goes to the
	// server. Default: on (see the package doc).
	NoRefusalCache bool
	// RefusalCacheSize bounds the keys whose refusal the cache holds (the
	// least recently refused go first; at least 64 are held). Default
	// 10000.
	RefusalCacheSize int
}

// EnsureDefaults fills in the fields left at zero.
func (o *Options) EnsureDefaults() {
	if o.Timeout == 0 {
		o.Timeout = 100 * time.Millisecond
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = 3
	}
	if o.OpenFor == 0 {
		o.OpenFor = 5 * time.Second
	}
	if o.LocalMaxKeys == 0 {
		o.LocalMaxKeys = 100_000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OnEvent == nil {
		o.OnEvent = func(Event) {}
	}
	if o.Sleep == nil {
		o.Sleep = sleepContext
	}
	if o.RefusalCacheSize == 0 {
		o.RefusalCacheSize = 10_000
	}
}

// Validate reports an option out of range.
func (o *Options) Validate() error {
	switch {
	case o.Timeout < 0:
		return errors.New("client: negative Timeout")
	case o.FailureThreshold < 0:
		return errors.New("client: negative FailureThreshold")
	case o.OpenFor < 0:
		return errors.New("client: negative OpenFor")
	case o.LocalMaxKeys < 0:
		return errors.New("client: negative LocalMaxKeys")
	case o.RefusalCacheSize < 0:
		return errors.New("client: negative RefusalCacheSize")
	}
	return nil
}

// Client applies limits through a cellserver, with a failure policy per
// limit. It is safe for concurrent use.
type Client struct {
	rdb   redis.UniversalClient
	opt   Options
	br    *breaker
	local *local
	dials *dialNotes
	// refusals is the refusal cache (nil when off); counts, the Stats.
	refusals *refusals
	counts   counters
}

// New returns a Client over rdb, which it does not close. It adds a hook
// to rdb (to each node's client of a ClusterClient or Ring created from
// then on) that notes failed dials, so that a call that timed out while
// go-redis retried a refused connection reports the dial's error.
func New(rdb redis.UniversalClient, opt Options) (*Client, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt.EnsureDefaults()
	c := &Client{rdb: rdb, opt: opt, local: newLocal(opt.LocalMaxKeys), dials: &dialNotes{},
		br: &breaker{threshold: opt.FailureThreshold, openFor: opt.OpenFor, now: opt.Now, emit: opt.OnEvent}}
	if !opt.NoRefusalCache {
		c.refusals = newRefusals(opt.RefusalCacheSize)
	}
	c.dials.watch(rdb)
	return c, nil
}

// BreakerState returns the circuit breaker's state.
func (c *Client) BreakerState() BreakerState { return c.br.current() }

// Check is one limit of an AllowAll call: the limit, the key it is counted
// under, and the cost (CL.THROTTLE's quantity).
type Check struct {
	Key   string
	Limit Limit
	Cost  int64
}

// Decision is the answer to AllowAll.
type Decision struct {
	// Limited is true when the request was refused; then none of the
	// limits was charged.
	Limited bool
	// Refused is the 1-based index of the first check that refused, 0
	// when all allowed.
	Refused int
	// Results holds one Result per check, in order. When the request was
	// refused, a check that would have allowed it reports its state
	// uncharged (Remaining as it stands, RetryAfter 0).
	Results []Result
}

// RetryAfter returns the longest RetryAfter of the refusing checks, 0
// when allowed, -1 when one of them never allows the request.
func (d Decision) RetryAfter() time.Duration {
	var max time.Duration
	for _, r := range d.Results {
		if r.Limited && r.RetryAfter < 0 {
			return -1
		}
		if r.Limited && r.RetryAfter > max {
			max = r.RetryAfter
		}
	}
	return max
}

// Allow applies one limit to key with the limit's own command (so a Redis
// with redis-cell answers a GCRA limit too).
func (c *Client) Allow(ctx context.Context, key string, l Limit, cost int64) (Result, error) {
	d, err := c.AllowAll(ctx, Check{Key: key, Limit: l, Cost: cost})
	if err != nil {
		return Result{}, err
	}
	return d.Results[0], nil
}

// AllowAll applies every check all or nothing: one check with its own
// command, several with ML.THROTTLE, whose keys must share a hash slot in
// a cluster (give them a common {hash tag}). A call that a refusal this
// Client received still answers is answered from the refusal cache,
// without a round trip (see the package doc). When the server cannot
// answer, each check follows its limit's Failure: if any fails closed the
// call returns ErrUnavailable; the FailLocal ones are applied all or
// nothing by the local fallback and the FailOpen ones allow.
//
// Error replies of the server (WRONGTYPE, an argument out of range) are
// returned as they are, not treated as unavailability.
func (c *Client) AllowAll(ctx context.Context, checks ...Check) (Decision, error) {
	if len(checks) == 0 {
		return Decision{}, errors.New("client: no checks")
	}
	for i := range checks {
		if _, err := checks[i].Limit.period(); err != nil {
			return Decision{}, err
		}
	}
	var snap refusalSnap
	if c.refusals != nil {
		if d, ok := c.refusals.answer(checks, c.opt.Now().UnixNano()); ok {
			c.counts.cached.Add(1)
			return d, nil
		}
		snap = c.refusals.snapshot(checks)
	}
	cause := errBreakerOpen
	if c.br.allow() {
		c.counts.sent.Add(1)
		d, err := c.remote(ctx, checks)
		switch {
		case err == nil:
			c.br.success()
			if c.refusals != nil {
				c.refusals.learn(checks, &d, &snap, c.opt.Now().UnixNano())
			}
			return d, nil
		case ctx.Err() != nil:
			c.br.abandon() // the caller gave up: that says nothing of the server
			return Decision{}, err
		case isReplyError(err):
			c.br.success()
			return Decision{}, err
		}
		c.opt.OnEvent(Event{Type: EventServerError, Err: err, Key: checks[0].Key})
		c.br.failure()
		cause = err
	}
	return c.fallback(checks, cause)
}

// isReplyError reports whether err is an error reply of the server or a
// reply the client cannot read: the server is there.
func isReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) || errors.Is(err, errReply)
}

// remote sends the checks to the server within the call timeout. When
// the timeout ends the call after a failed dial, the error names the
// dial's error first (dialNotes).
func (c *Client) remote(ctx context.Context, checks []Check) (Decision, error) {
	mark := c.dials.mark()
	d, err := c.send(ctx, checks)
	if err != nil && ctx.Err() == nil {
		err = c.dials.explain(err, mark)
	}
	return d, err
}

// send sends the checks to the server within the call timeout.
func (c *Client) send(ctx context.Context, checks []Check) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opt.Timeout)
	defer cancel()
	if len(checks) == 1 {
		ch := &checks[0]
		args, err := ch.Limit.appendArgs([]any{ch.Limit.command()}, ch.Key, ch.Cost)
		if err != nil {
			return Decision{}, err
		}
		v, err := c.rdb.Do(ctx, args...).Result()
		if err != nil {
			return Decision{}, err
		}
		five, err := parseFive(v)
		if err != nil {
			return Decision{}, err
		}
		r := result(five, ch.Limit.unit())
		d := Decision{Limited: r.Limited, Results: []Result{r}}
		if r.Limited {
			d.Refused = 1
		}
		return d, nil
	}
	args := []any{"ML.THROTTLE", len(checks)}
	for i := range checks {
		ch := &checks[i]
		var err error
		if args, err = ch.Limit.appendArgs(append(args, ch.Limit.word()), ch.Key, ch.Cost); err != nil {
			return Decision{}, err
		}
	}
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // the first limit's key, for a ClusterClient's routing
	_ = c.rdb.Process(ctx, cmd)
	v, err := cmd.Result()
	if err != nil {
		return Decision{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != len(checks)+1 {
		return Decision{}, errReply
	}
	first, ok := a[0].(int64)
	if !ok || first < 0 || first > int64(len(checks)) {
		return Decision{}, errReply
	}
	d := Decision{Limited: first != 0, Refused: int(first), Results: make([]Result, len(checks))}
	for i := range checks {
		five, err := parseFive(a[i+1])
		if err != nil {
			return Decision{}, err
		}
		d.Results[i] = result(five, checks[i].Limit.unit())
	}
	return d, nil
}

// fallback answers checks by their failure policies, the server being
// unreachable because of cause.
func (c *Client) fallback(checks []Check, cause error) (Decision, error) {
	for i := range checks {
		if checks[i].Limit.Failure == FailClosed {
			c.opt.OnEvent(Event{Type: EventFallback, Err: cause, Failure: FailClosed, Key: checks[0].Key})
			return Decision{}, fmt.Errorf("%w: %w", ErrUnavailable, cause)
		}
	}
	d := Decision{Results: make([]Result, len(checks))}
	var local []check
	var at []int
	for i := range checks {
		ch := &checks[i]
		if ch.Limit.Failure == FailOpen {
			n := ch.Limit.capacity()
			d.Results[i] = Result{Limit: n, Remaining: n, Source: FromFailOpen}
			c.opt.OnEvent(Event{Type: EventFallback, Err: cause, Failure: FailOpen, Key: ch.Key})
			continue
		}
		local = append(local, check{key: ch.Key, limit: &ch.Limit, cost: ch.Cost})
		at = append(at, i)
	}
	if len(local) == 0 {
		return d, nil
	}
	c.opt.OnEvent(Event{Type: EventFallback, Err: cause, Failure: FailLocal, Key: local[0].key})
	res, first, err := c.local.apply(local, c.opt.Now().UnixNano())
	if err != nil {
		return Decision{}, err
	}
	for j, i := range at {
		d.Results[i] = res[j]
	}
	if first != 0 {
		d.Limited, d.Refused = true, at[first-1]+1
	}
	return d, nil
}
