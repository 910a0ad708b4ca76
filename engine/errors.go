package engine

import "errors"

// Errors returned by the engine. Package commands maps each to its RESP
// text. Errors in a request's arguments come from package limiter.
var (
	// ErrWrongType: the key holds another kind of limiter.
	ErrWrongType = errors.New("engine: wrong kind of value")
	// ErrShardFull: a shard's table would pass 4 GiB of records; configure
	// more shards.
	ErrShardFull = errors.New("engine: shard full (more than 4 GiB of keys in one shard)")
	// ErrOOM: a new key would take memory past the limit (SetMemoryLimit)
	// and the policy evicts nothing, or could not free enough.
	ErrOOM = errors.New("engine: out of memory")
	// ErrClockOverflow: a clock adjustment would leave the int64 range.
	ErrClockOverflow = errors.New("engine: clock out of range")
)

// Errors of ApplyAll.
var (
	// ErrDuplicateKey: one ApplyAll call names the same key twice.
	ErrDuplicateKey = errors.New("engine: the same key twice in one call")
	// ErrNoRequests: ApplyAll was given no request.
	ErrNoRequests = errors.New("engine: no requests")
	// ErrKind: a Request's Kind is not one of the limiter kinds.
	ErrKind = errors.New("engine: request of no limiter kind")
)
