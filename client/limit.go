package client

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/limiter"
)

// Kind is the algorithm of a Limit: which of cellserver's commands it
// calls. It is package limiter's kind: its row of limiter.Kinds names the
// command, its word in ML.THROTTLE and its arguments, and everything this
// package sends and reads for a limit follows from that row.
type Kind = limiter.Kind

// The kinds a Limit can have (SW.HIT EXACT is SlidingWindow with Exact).
const (
	// GCRA is CL.THROTTLE: the generic cell rate algorithm of redis-cell.
	GCRA = limiter.KindGCRA
	// TokenBucket is TB.TAKE.
	TokenBucket = limiter.KindTokenBucket
	// SlidingWindow is SW.HIT (EXACT when Limit.Exact).
	SlidingWindow = limiter.KindSlidingWindow
	// FixedWindow is FW.INCR.
	FixedWindow = limiter.KindFixedWindow
	// Queue is LB.QUEUE: the leaky bucket as a queue, which gives a
	// request its turn rather than refusing it (see Client.Wait).
	Queue = limiter.KindLeakyQueue
)

// Limit is one rate limit: an algorithm and its parameters, as its command
// takes them, plus what to do when the server cannot answer. Build one
// with NewGCRA, NewTokenBucket, NewSlidingWindow or NewFixedWindow and
// change its fields as needed (NewLeakyQueue for a Queue).
type Limit struct {
	// Name names the limit in the RateLimit-Policy header field, e.g.
	// "per-second". Default: the kind's word in lower case.
	Name string
	Kind Kind
	// Burst is GCRA's max_burst, TokenBucket's capacity and Queue's
	// places; unused for the windows.
	Burst int64
	// Rate is what one Period allows: GCRA's count, TokenBucket's refill,
	// the windows' limit, the requests leaving a Queue.
	Rate int64
	// Period is GCRA's and TokenBucket's period, the windows' window. It
	// is sent in milliseconds with MS to the kinds that take MS, so that
	// their replies' times are in milliseconds too (which the refusal
	// cache needs); GCRA takes and replies whole seconds only.
	Period time.Duration
	// Exact makes a SlidingWindow an exact sliding log (SW.HIT EXACT).
	Exact bool
	// MaxWait, when positive, is the longest wait for its turn a Queue
	// request accepts (MAXWAIT): a turn further away is refused. It is
	// sent in the reply's unit, rounded down (below one unit it admits
	// only into an empty queue). Default 0: no bound (Wait bounds it by
	// its context's deadline).
	MaxWait time.Duration

	// bounded, set by Wait and the middleware's MaxDelay, sends MAXWAIT
	// even when MaxWait is 0.
	bounded bool
	// Failure says what happens when the server cannot answer. Default
	// (the zero value): FailLocal.
	Failure Failure
}

// NewGCRA returns a CL.THROTTLE limit: count per period, with bursts of
// up to maxBurst+1.
func NewGCRA(maxBurst, count int64, period time.Duration) Limit {
	return Limit{Kind: GCRA, Burst: maxBurst, Rate: count, Period: period}
}

// NewTokenBucket returns a TB.TAKE limit: a bucket of capacity tokens,
// refilled with refill tokens per period.
func NewTokenBucket(capacity, refill int64, period time.Duration) Limit {
	return Limit{Kind: TokenBucket, Burst: capacity, Rate: refill, Period: period}
}

// NewSlidingWindow returns an SW.HIT limit: at most limit in any trailing
// window.
func NewSlidingWindow(limit int64, window time.Duration) Limit {
	return Limit{Kind: SlidingWindow, Rate: limit, Period: window}
}

// NewFixedWindow returns an FW.INCR limit: at most limit per aligned
// window.
func NewFixedWindow(limit int64, window time.Duration) Limit {
	return Limit{Kind: FixedWindow, Rate: limit, Period: window}
}

// NewLeakyQueue returns an LB.QUEUE limit: a queue of capacity places
// from which rate requests leave per period, one every period/rate.
func NewLeakyQueue(capacity, rate int64, period time.Duration) Limit {
	return Limit{Kind: Queue, Burst: capacity, Rate: rate, Period: period}
}

// CLThrottle calls CL.THROTTLE key maxBurst count period quantity; period
// must be whole seconds.
func (c *Client) CLThrottle(ctx context.Context, key string, maxBurst, count int64, period time.Duration, quantity int64) (Result, error) {
	return c.Allow(ctx, key, NewGCRA(maxBurst, count, period), quantity)
}

// TBTake calls TB.TAKE key capacity refill period cost MS (the period in
// milliseconds, so that the reply's times are too).
func (c *Client) TBTake(ctx context.Context, key string, capacity, refill int64, period time.Duration, cost int64) (Result, error) {
	return c.Allow(ctx, key, NewTokenBucket(capacity, refill, period), cost)
}

// SWHit calls SW.HIT key limit window cost [EXACT] MS (the window in
// milliseconds, so that the reply's times are too).
func (c *Client) SWHit(ctx context.Context, key string, limit int64, window time.Duration, cost int64, exact bool) (Result, error) {
	l := NewSlidingWindow(limit, window)
	l.Exact = exact
	return c.Allow(ctx, key, l, cost)
}

// FWIncr calls FW.INCR key limit window cost MS (the window in
// milliseconds, so that the reply's times are too).
func (c *Client) FWIncr(ctx context.Context, key string, limit int64, window time.Duration, cost int64) (Result, error) {
	return c.Allow(ctx, key, NewFixedWindow(limit, window), cost)
}

// LBQueue calls LB.QUEUE key capacity rate period cost MS: it takes a
// turn without waiting for it,
// ResetAfter being the wait (Wait sleeps it).
func (c *Client) LBQueue(ctx context.Context, key string, capacity, rate int64, period time.Duration, cost int64) (Result, error) {
	return c.Allow(ctx, key, NewLeakyQueue(capacity, rate, period), cost)
}

// Errors in a Limit, returned before anything is sent.
var (
	ErrKind   = errors.New("client: unknown limit kind")
	ErrPeriod = errors.New("client: period must be a positive number of milliseconds (whole seconds for GCRA)")
)

// name returns the limit's name in header fields.
func (l *Limit) name() string {
	if l.Name != "" {
		return l.Name
	}
	return l.Kind.Spec().Word
}

// millis reports whether the period goes in milliseconds (MS): the reply's
// times are then milliseconds too. Every kind that takes MS gets it, a
// whole number of seconds included: a reply rounded up to the second would
// leave the refusal cache nothing to cache of a retry_after under 1 s.
func (l *Limit) millis() bool {
	return l.Kind.Spec().Options&limiter.OptMS != 0
}

// unit is the unit of the reply's times.
func (l *Limit) unit() time.Duration {
	if l.millis() {
		return time.Millisecond
	}
	return time.Second
}

// period returns Period in the unit sent.
func (l *Limit) period() (int64, error) {
	if !l.Kind.Base() {
		return 0, ErrKind
	}
	whole := l.Kind.Spec().Options&limiter.OptMS == 0 // no MS: whole seconds only
	if l.Period <= 0 || l.Period%time.Millisecond != 0 || whole && l.Period%time.Second != 0 {
		return 0, ErrPeriod
	}
	return int64(l.Period / l.unit()), nil
}

// parts returns the limit's arguments after the key, as its command
// takes them (its row of limiter.Kinds): the integers (Burst when the kind
// takes three, then Rate, the period and the cost), then the words EXACT,
// MS and MAXWAIT with its value where they apply.
func (l *Limit) parts(cost int64) (ints []int64, flags []string, err error) {
	p, err := l.period()
	if err != nil {
		return nil, nil, err
	}
	spec := l.Kind.Spec()
	if len(spec.Params) == 3 {
		ints = append(ints, l.Burst)
	}
	ints = append(ints, l.Rate, p, cost)
	if l.Exact && spec.Options&limiter.OptExact != 0 {
		flags = append(flags, "EXACT")
	}
	if l.millis() {
		flags = append(flags, "MS")
	}
	if (l.MaxWait > 0 || l.bounded) && spec.Options&limiter.OptMaxWait != 0 {
		flags = append(flags, "MAXWAIT", strconv.FormatInt(int64(l.MaxWait/l.unit()), 10))
	}
	return ints, flags, nil
}

// appendArgs appends the limit's arguments after its command's name (or
// its kind word in ML.THROTTLE): key, numbers, cost, flags.
func (l *Limit) appendArgs(args []any, key string, cost int64) ([]any, error) {
	ints, flags, err := l.parts(cost)
	if err != nil {
		return nil, err
	}
	args = append(args, key)
	for _, n := range ints {
		args = append(args, n)
	}
	for _, f := range flags {
		args = append(args, f)
	}
	return args, nil
}

// request returns the limit's request of cost as its command would parse
// it, for the in-process fallback.
func (l *Limit) request(cost int64) (limiter.Request, error) {
	var r limiter.Request
	ints, flags, err := l.parts(cost)
	if err != nil {
		return r, err
	}
	var words [][]byte
	for _, n := range ints {
		words = append(words, strconv.AppendInt(nil, n, 10))
	}
	for _, f := range flags {
		words = append(words, []byte(f))
	}
	return r, limiter.Parse(l.Kind, words, &r)
}

// command returns the name of the limit's own command, e.g. CL.THROTTLE.
func (l *Limit) command() string { return wire[l.Kind].command }

// word returns the limit's word in ML.THROTTLE, e.g. CL.
func (l *Limit) word() string { return wire[l.Kind].word }

// wire holds each kind's command and ML.THROTTLE word as the client sends
// them, in upper case.
var wire = func() (w [limiter.NumKinds]struct{ command, word string }) {
	for k := range w {
		spec := limiter.Kind(k).Spec()
		w[k].command, w[k].word = strings.ToUpper(spec.Command), strings.ToUpper(spec.Word)
	}
	return w
}()

// Result is what one limit answered, with the time units made explicit.
type Result struct {
	// Limited is true when the request was refused (and charged nothing).
	Limited bool
	// Limit is the most the key can hold or spend at once (for GCRA,
	// max_burst+1).
	Limit int64
	// Remaining is what can still be spent right now.
	Remaining int64
	// RetryAfter is 0 when the request was allowed; when it was limited,
	// the time until the same request would be allowed, or -1 when it
	// never will (a cost above the limit).
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its idle state
	// (full, or empty of hits). For a Queue it is the wait before the
	// request's turn (0 when the queue was empty), as LB.QUEUE replies it.
	ResetAfter time.Duration
	// Source says who answered: the server, the local fallback, or the
	// failure policy.
	Source Source
}

// Source says who answered a Result.
type Source uint8

const (
	// FromServer: the cellserver (or Redis) answered.
	FromServer Source = iota
	// FromLocal: the server was unreachable and the in-process fallback
	// limiter answered.
	FromLocal
	// FromFailOpen: the server was unreachable and the limit fails open:
	// allowed, Remaining reported as Limit.
	FromFailOpen
	// FromCache: the refusal cache answered, from a refusal the server
	// gave this Client earlier (see the package doc).
	FromCache
)

// String names the source: "server", "local", "fail-open" or "cache".
func (s Source) String() string {
	switch s {
	case FromLocal:
		return "local"
	case FromFailOpen:
		return "fail-open"
	case FromCache:
		return "cache"
	}
	return "server"
}

// result converts the five integers of a reply, whose times are in unit.
func result(v [5]int64, unit time.Duration) Result {
	r := Result{Limited: v[0] != 0, Limit: v[1], Remaining: v[2], ResetAfter: time.Duration(v[4]) * unit}
	if v[3] >= 0 {
		r.RetryAfter = time.Duration(v[3]) * unit
	} else if r.Limited {
		r.RetryAfter = -1
	}
	return r
}

// fromLimiter converts a package limiter Result, whose times are in unit.
func fromLimiter(x limiter.Result, unit time.Duration) Result {
	return result([5]int64{b2i(x.Limited), x.Limit, x.Remaining, x.RetryAfter, x.ResetAfter}, unit)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// parseFive reads a five-integer reply.
func parseFive(v any) ([5]int64, error) {
	var out [5]int64
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		return out, errReply
	}
	for i, x := range a {
		n, ok := x.(int64)
		if !ok {
			return out, errReply
		}
		out[i] = n
	}
	return out, nil
}

var errReply = errors.New("client: unexpected reply shape")

// capacity returns the most the limit's key can hold or spend at once:
// the Limit its command replies, read from its algorithm by an uncharged
// call on no key (0 when the limit is not valid).
func (l *Limit) capacity() int64 {
	r, err := l.request(0)
	if err != nil {
		return 0
	}
	var st limiter.State
	var out limiter.Outcome
	if limiter.Apply(&st, false, 0, &r, &out) != nil {
		return 0
	}
	return out.Result.Limit
}
