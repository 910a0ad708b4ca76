package engine

import "errors"

// Errors returned by the engine. Package commands maps each to its RESP text.
var (
	// ErrWrongType: the key holds another kind of limiter.
	ErrWrongType = errors.New("engine: wrong kind of value")
	// ErrShardFull: a shard's table would pass 4 GiB of records; configure
	// more shards.
	ErrShardFull = errors.New("engine: shard full (more than 4 GiB of keys in one shard)")
	// ErrClockOverflow: a clock adjustment would leave the int64 range.
	ErrClockOverflow = errors.New("engine: clock out of range")

	// CL.THROTTLE argument problems (see gcra.go).
	ErrZeroRate         = errors.New("engine: zero rates are not supported")
	ErrNegativeMaxBurst = errors.New("engine: negative max_burst")
	ErrNegativeCount    = errors.New("engine: negative count")
	ErrNegativePeriod   = errors.New("engine: negative period")
	ErrMaxBurstRange    = errors.New("engine: max_burst out of range")
	ErrPeriodRange      = errors.New("engine: period out of range")
	ErrQuantityRange    = errors.New("engine: quantity out of range")

	// TB/SW/FW argument problems. Each names the argument at fault.
	ErrCapacityNotPositive = errors.New("engine: capacity must be positive")
	ErrRefillNotPositive   = errors.New("engine: refill must be positive")
	ErrPeriodNotPositive   = errors.New("engine: period must be positive")
	ErrLimitNotPositive    = errors.New("engine: limit must be positive")
	ErrWindowNotPositive   = errors.New("engine: window must be positive")
	ErrCapacityRange       = errors.New("engine: capacity out of range")
	ErrWindowRange         = errors.New("engine: window out of range")
	ErrExactLimit          = errors.New("engine: limit above 100000 with EXACT")
)
