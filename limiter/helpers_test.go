package limiter

import (
	"errors"
	"testing"
)

// The table runners the algorithms' tests share: FixedWindow,
// SlidingWindow and TokenBucket are each a function of (state, exists,
// now, request), and their tables list such calls with what they return.

// algorithm is a limiter over a comparable state.
type algorithm[S comparable, R any] func(st S, exists bool, now int64, r R) (S, Outcome, error)

// step is one call of an algorithm and the state and outcome it returns.
type step[S comparable, R any] struct {
	name   string
	st     S
	exists bool
	now    int64
	req    R
	wantSt S
	want   Outcome
}

// runSteps runs each step as a subtest, on a state of its own.
func runSteps[S comparable, R any](t *testing.T, f algorithm[S, R], steps []step[S, R]) {
	t.Helper()
	for _, tt := range steps {
		t.Run(tt.name, func(t *testing.T) {
			st, out, err := f(tt.st, tt.exists, tt.now, tt.req)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if st != tt.wantSt || out != tt.want {
				t.Errorf("got  %+v %+v\nwant %+v %+v", st, out, tt.wantSt, tt.want)
			}
		})
	}
}

// failure is a call of an algorithm that fails with want, and leaves the
// state as it was with an empty outcome.
type failure[S comparable, R any] struct {
	name   string
	st     S
	exists bool
	now    int64
	req    R
	want   error
}

// runFailures runs each failure as a subtest.
func runFailures[S comparable, R any](t *testing.T, f algorithm[S, R], cases []failure[S, R]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			st, out, err := f(tt.st, tt.exists, tt.now, tt.req)
			if !errors.Is(err, tt.want) || st != tt.st || out != (Outcome{}) {
				t.Errorf("got %+v %+v %v, want %v", st, out, err, tt.want)
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
