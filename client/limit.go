package client

import (
	"errors"
	"strconv"
	"time"

	"github.com/cellserver/cellserver/limiter"
)

// Kind is the algorithm of a Limit: which of cellserver's commands it
// calls.
type Kind uint8

const (
	// GCRA is CL.THROTTLE: the generic cell rate algorithm of redis-cell.
	GCRA Kind = iota + 1
	// TokenBucket is TB.TAKE.
	TokenBucket
	// SlidingWindow is SW.HIT (EXACT when Limit.Exact).
	SlidingWindow
	// FixedWindow is FW.INCR.
	FixedWindow
)

// String returns the kind's word in ML.THROTTLE: CL, TB, SW or FW.
func (k Kind) String() string {
	switch k {
	case GCRA:
		return "CL"
	case TokenBucket:
		return "TB"
	case SlidingWindow:
		return "SW"
	case FixedWindow:
		return "FW"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Limit is one rate limit: an algorithm and its parameters, as its command
// takes them, plus what to do when the server cannot answer. Build one
// with NewGCRA, NewTokenBucket, NewSlidingWindow or NewFixedWindow and
// change its fields as needed.
type Limit struct {
	// Name names the limit in the RateLimit-Policy header field, e.g.
	// "per-second". Default: the kind's word in lower case.
	Name string
	Kind Kind
	// Burst is GCRA's max_burst and TokenBucket's capacity; unused for the
	// windows.
	Burst int64
	// Rate is what one Period allows: GCRA's count, TokenBucket's refill,
	// the windows' limit.
	Rate int64
	// Period is GCRA's and TokenBucket's period, the windows' window. It
	// is sent in seconds when it is a whole number of seconds, else in
	// milliseconds with MS (GCRA takes whole seconds only).
	Period time.Duration
	// Exact makes a SlidingWindow an exact sliding log (SW.HIT EXACT).
	Exact bool
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
	switch l.Kind {
	case GCRA:
		return "cl"
	case TokenBucket:
		return "tb"
	case SlidingWindow:
		return "sw"
	}
	return "fw"
}

// millis reports whether the period goes in milliseconds (MS): the reply's
// times are then milliseconds too.
func (l *Limit) millis() bool { return l.Kind != GCRA && l.Period%time.Second != 0 }

// unit is the unit of the reply's times.
func (l *Limit) unit() time.Duration {
	if l.millis() {
		return time.Millisecond
	}
	return time.Second
}

// period returns Period in the unit sent.
func (l *Limit) period() (int64, error) {
	if l.Kind < GCRA || l.Kind > FixedWindow {
		return 0, ErrKind
	}
	if l.Period <= 0 || l.Period%time.Millisecond != 0 || l.Kind == GCRA && l.Period%time.Second != 0 {
		return 0, ErrPeriod
	}
	return int64(l.Period / l.unit()), nil
}

// appendArgs appends the limit's arguments after its command's name (or
// its kind word in ML.THROTTLE): key, numbers, cost, flags.
func (l *Limit) appendArgs(args []any, key string, cost int64) ([]any, error) {
	p, err := l.period()
	if err != nil {
		return nil, err
	}
	args = append(args, key)
	switch l.Kind {
	case GCRA, TokenBucket:
		args = append(args, l.Burst, l.Rate, p, cost)
	default:
		args = append(args, l.Rate, p, cost)
	}
	if l.Kind == SlidingWindow && l.Exact {
		args = append(args, "EXACT")
	}
	if l.millis() {
		args = append(args, "MS")
	}
	return args, nil
}

// command returns the name of the limit's own command.
func (l *Limit) command() string {
	switch l.Kind {
	case GCRA:
		return "CL.THROTTLE"
	case TokenBucket:
		return "TB.TAKE"
	case SlidingWindow:
		return "SW.HIT"
	}
	return "FW.INCR"
}

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
	// (full, or empty of hits).
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
)

// String names the source: "server", "local" or "fail-open".
func (s Source) String() string {
	switch s {
	case FromLocal:
		return "local"
	case FromFailOpen:
		return "fail-open"
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
