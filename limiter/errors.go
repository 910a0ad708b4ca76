package limiter

import "errors"

// Errors in a request's arguments. Each names the argument at fault;
// package commands maps each to its reply text.
var (
	// GCRA's (gcra.go), in redis-cell's order.
	ErrZeroRate         = errors.New("limiter: zero rates are not supported")
	ErrNegativeMaxBurst = errors.New("limiter: negative max_burst")
	ErrNegativeCount    = errors.New("limiter: negative count")
	ErrNegativePeriod   = errors.New("limiter: negative period")
	ErrMaxBurstRange    = errors.New("limiter: max_burst out of range")
	ErrPeriodRange      = errors.New("limiter: period out of range")
	ErrQuantityRange    = errors.New("limiter: quantity out of range")

	// The other algorithms'.
	ErrCapacityNotPositive = errors.New("limiter: capacity must be positive")
	ErrRefillNotPositive   = errors.New("limiter: refill must be positive")
	ErrPeriodNotPositive   = errors.New("limiter: period must be positive")
	ErrLimitNotPositive    = errors.New("limiter: limit must be positive")
	ErrWindowNotPositive   = errors.New("limiter: window must be positive")
	ErrCapacityRange       = errors.New("limiter: capacity out of range")
	ErrWindowRange         = errors.New("limiter: window out of range")
	ErrExactLimit          = errors.New("limiter: limit above 100000 with EXACT")
	ErrRateNotPositive     = errors.New("limiter: rate must be positive")
	ErrMaxWaitNegative     = errors.New("limiter: maxwait must not be negative")
	ErrMaxWaitRange        = errors.New("limiter: maxwait out of range")
)

// Errors in a call's words (Parse).
var (
	ErrNotInteger = errors.New("limiter: not an integer")
	ErrSyntax     = errors.New("limiter: syntax error")
	ErrArity      = errors.New("limiter: too few arguments")
	ErrKind       = errors.New("limiter: no limiter kind")
)

// ArgError is a word of a call that is not what its place takes: Err is
// ErrNotInteger or ErrSyntax, Arg the word. For ErrSyntax, Kind is the
// kind whose call it is and Reason says what is wrong with the word, so
// that a reply can say how to fix the call (KindSpec.Usage).
type ArgError struct {
	Err    error
	Arg    string
	Kind   Kind
	Reason SyntaxReason
}

// SyntaxReason says why a word after a kind's integers is a syntax error.
type SyntaxReason uint8

const (
	// NotAnOption: the word is no option of the kind (an unknown word, or
	// EXACT where the kind has no EXACT).
	NotAnOption SyntaxReason = iota
	// OptionTwice: the option was given already.
	OptionTwice
	// CostAfterOption: an integer after an option; the cost comes before
	// the options.
	CostAfterOption
	// ExtraInteger: an integer after the cost, with no option before it.
	ExtraInteger
	// MissingValue: an option that takes a value (MAXWAIT) ends the call.
	MissingValue
)

func (e *ArgError) Error() string { return e.Err.Error() + ": " + e.Arg }

// Unwrap returns Err, for errors.Is.
func (e *ArgError) Unwrap() error { return e.Err }
