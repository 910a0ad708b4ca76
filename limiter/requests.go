package limiter

// Requests, states and outcomes of the algorithms. The functions over them
// live one file each: gcra.go, tokenbucket.go, slidingwindow.go,
// slidinglog.go, fixedwindow.go.

// Write says what an algorithm wants done with a key's state.
type Write uint8

const (
	// WriteNone leaves the key as it was (a limited request, a pure read).
	WriteNone Write = iota
	// WriteStore stores the returned state with the returned expiry.
	WriteStore
	// WriteDelete removes the key: it is back to its idle state.
	WriteDelete
)

// Outcome says what a request did and what to do with the key.
type Outcome struct {
	Result Result
	Write  Write
	// ExpireMs is the key's expiry (Unix ms) when Write is WriteStore:
	// ⌈idle_at/10⁶⌉, idle_at being the instant the key is idle again
	// (CL.THROTTLE: floor(now_ms) + trunc(ttl_ms), as redis-cell sets it).
	ExpireMs int64
}

// TokenBucketRequest is TB.TAKE's arguments.
type TokenBucketRequest struct {
	Capacity int64 // tokens, ≥ 1
	Refill   int64 // tokens per Period, ≥ 1
	Period   int64 // seconds, or milliseconds with Millis; ≥ 1
	Cost     int64 // tokens to take; negative: a refund; 0: a pure read
	Millis   bool  // MS: Period and the reply's times are milliseconds
}

// TokenBucketState is a bucket that is not full: it will be full again at
// FullAt + Rem/Refill ns (0 ≤ Rem < Refill), which keeps refill exact.
type TokenBucketState struct {
	FullAt int64
	Rem    int64
}

// SlidingWindowRequest is SW.HIT's arguments.
type SlidingWindowRequest struct {
	Limit  int64 // ≥ 1 (≤ 100000 with Exact)
	Window int64 // seconds, or milliseconds with Millis; ≥ 1
	Cost   int64 // negative: a refund
	Exact  bool  // EXACT: a sliding log instead of two counters
	Millis bool
}

// SlidingWindowState is the approximate sliding window: the counts of
// allowed hits in the window starting at Start (Unix ns, a multiple of the
// window) and in the one before it.
type SlidingWindowState struct {
	Start int64
	Prev  int64
	Curr  int64
}

// Hit is one entry of a sliding log: N allowed hits at instant At (Unix ns).
type Hit struct {
	At int64
	N  int64
}

// FixedWindowRequest is FW.INCR's arguments.
type FixedWindowRequest struct {
	Limit  int64 // ≥ 1
	Window int64 // seconds, or milliseconds with Millis; ≥ 1
	Cost   int64 // negative: a refund
	Millis bool
}

// FixedWindowState is the count of allowed hits in the window starting at
// Start (Unix ns, a multiple of the window).
type FixedWindowState struct {
	Start int64
	Count int64
}
