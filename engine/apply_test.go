package engine

import "github.com/cellserver/cellserver/limiter"

// Shorthands for the engine's tests: one limiter call of each kind, as
// its command would make it (View.Apply with the arguments validated).

func (v *View) throttle(key []byte, p limiter.GCRAParams) (limiter.Result, error) {
	return v.Apply(key, &limiter.Request{Kind: limiter.KindGCRA, GCRA: p}, nil)
}

func (v *View) tokenBucket(key []byte, r limiter.TokenBucketRequest) (limiter.Result, error) {
	if err := r.Validate(); err != nil {
		return limiter.Result{}, err
	}
	return v.Apply(key, &limiter.Request{Kind: limiter.KindTokenBucket, TokenBucket: r}, nil)
}

func (v *View) slidingWindow(key []byte, r limiter.SlidingWindowRequest) (limiter.Result, error) {
	if err := r.Validate(); err != nil {
		return limiter.Result{}, err
	}
	kind := limiter.KindSlidingWindow
	if r.Exact {
		kind = limiter.KindSlidingLog
	}
	return v.Apply(key, &limiter.Request{Kind: kind, SlidingWindow: r}, nil)
}

func (v *View) fixedWindow(key []byte, r limiter.FixedWindowRequest) (limiter.Result, error) {
	if err := r.Validate(); err != nil {
		return limiter.Result{}, err
	}
	return v.Apply(key, &limiter.Request{Kind: limiter.KindFixedWindow, FixedWindow: r}, nil)
}
