package limiter

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// The table runners the algorithms' tests share: FixedWindow,
// SlidingWindow and TokenBucket are each a function of (state, exists,
// now, request), and their tables list such calls with what they return.

// algorithm is a limiter over a comparable state.
type algorithm[S comparable, R any] func(st S, exists bool, now int64, r R) (S, Outcome, error)

// call is one call of an algorithm and what it returns: the state and
// outcome wanted, or, with err set, that error, the state as it was and
// an empty outcome.
type call[S comparable, R any] struct {
	name   string
	st     S
	exists bool
	now    int64
	req    R
	wantSt S
	want   Outcome
	err    error
}

// runCalls runs each call as a subtest, on a state of its own.
func runCalls[S comparable, R any](t *testing.T, f algorithm[S, R], calls []call[S, R]) {
	t.Helper()
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			st, out, err := f(tt.st, tt.exists, tt.now, tt.req)
			switch {
			case tt.err != nil:
				if !errors.Is(err, tt.err) || st != tt.st || out != (Outcome{}) {
					t.Errorf("got %+v %+v %v, want %v", st, out, err, tt.err)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			case st != tt.wantSt || out != tt.want:
				t.Errorf("got  %+v %+v\nwant %+v %+v", st, out, tt.wantSt, tt.want)
			}
		})
	}
}

// validation is a request and the error its Validate returns (nil: valid).
type validation[R interface{ Validate() error }] struct {
	req  R
	want error
}

// runValidations checks each request's Validate.
func runValidations[R interface{ Validate() error }](t *testing.T, cases []validation[R]) {
	t.Helper()
	for _, tt := range cases {
		if err := tt.req.Validate(); !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
			t.Errorf("%+v: %v, want %v", tt.req, err, tt.want)
		}
	}
}

// wantNoAllocs fails the test if one request, made by call, allocates.
func wantNoAllocs(t *testing.T, call func()) {
	t.Helper()
	if n := testing.AllocsPerRun(100, call); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

// robust describes random calls of an algorithm, valid but extreme: a
// request (skipped unless valid) and a state drawn from the generator, on
// a random clock, of which only rangeErr may fail, leaving the state and
// an empty outcome; a result passes checkLimiterResult for the request's
// limit and cost, leaves the state alone unless it is written, and stores
// what stored holds.
type robust[S comparable, R interface{ Validate() error }] struct {
	seed         [2]uint64
	f            algorithm[S, R]
	rangeErr     error
	req          func(rng *rand.Rand) R
	st           func(rng *rand.Rand) S
	limitAndCost func(R) (int64, int64)
	stored       func(r R, st S) bool
}

// run makes 200,000 calls: no panic, only the documented error, sane
// replies.
func (c robust[S, R]) run(t *testing.T) {
	t.Helper()
	rng := rand.New(rand.NewPCG(c.seed[0], c.seed[1]))
	for range 200_000 {
		r := c.req(rng)
		if r.Validate() != nil {
			continue
		}
		st := c.st(rng)
		exists, now := rng.IntN(4) != 0, pickInt64(rng)
		got, out, err := c.f(st, exists, now, r)
		if err != nil {
			if !errors.Is(err, c.rangeErr) || got != st || out != (Outcome{}) {
				t.Fatalf("%+v %+v at %d: %v", r, st, now, err)
			}
			continue
		}
		limit, cost := c.limitAndCost(r)
		checkLimiterResult(t, out, limit, cost)
		if out.Write == WriteNone && got != st || out.Write == WriteStore && !c.stored(r, got) {
			t.Fatalf("%+v %+v at %d: %+v %+v", r, st, now, got, out)
		}
	}
}
