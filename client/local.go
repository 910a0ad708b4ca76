package client

import (
	"slices"
	"sync"

	"github.com/cellserver/cellserver/limiter"
)

// local is the in-process fallback limiter: the algorithms of package
// limiter over a map of keys with expiry, bounded to max keys. It enforces
// each limit per process, so that an outage of the server degrades to
// approximate per-instance limiting. It is safe for concurrent use.
type local struct {
	mu  sync.Mutex
	max int
	m   map[string]*localEntry
}

// localEntry is one key's state; which field is used depends on kind.
type localEntry struct {
	kind     Kind
	exact    bool
	expireMs int64 // Unix ms; gone once now_ms > expireMs
	gcra     limiter.GCRAState
	tb       limiter.TokenBucketState
	sw       limiter.SlidingWindowState
	log      []limiter.Hit
	fw       limiter.FixedWindowState
}

// check is one limit of one request: the key it is counted under, the
// limit and the cost.
type check struct {
	key   string
	limit *Limit
	cost  int64
}

func newLocal(max int) *local { return &local{max: max, m: make(map[string]*localEntry)} }

// len returns the number of keys held, expired ones included.
func (s *local) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// apply applies checks at now (Unix ns) all or nothing, as ML.THROTTLE
// does: the Results, and the 1-based index of the first refusal (0: none).
// A refused call charges nothing, and the allowing limits report a read.
func (s *local) apply(checks []check, now int64) ([]Result, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nowMs := now / 1e6
	next := make([]localEntry, len(checks))
	outs := make([]limiter.Outcome, len(checks))
	first := 0
	for i, c := range checks {
		e, ok := s.m[c.key]
		var cur localEntry
		exists := ok && nowMs <= e.expireMs && e.kind == c.limit.Kind && e.exact == c.limit.Exact
		if exists {
			cur = *e
			cur.log = slices.Clone(e.log) // SlidingLog may write into its input
		}
		n, out, err := step(cur, exists, now, c.limit, c.cost)
		if err != nil {
			return nil, 0, err
		}
		next[i], outs[i] = n, out
		if out.Result.Limited && first == 0 {
			first = i + 1
		}
	}
	res := make([]Result, len(checks))
	for i, c := range checks {
		unit := c.limit.unit()
		if first != 0 && !outs[i].Result.Limited {
			var cur localEntry
			e, ok := s.m[c.key]
			exists := ok && nowMs <= e.expireMs && e.kind == c.limit.Kind && e.exact == c.limit.Exact
			if exists {
				cur = *e
				cur.log = slices.Clone(e.log)
			}
			_, out, err := step(cur, exists, now, c.limit, 0)
			if err != nil {
				return nil, 0, err
			}
			res[i] = fromLimiter(out.Result, unit)
		} else {
			res[i] = fromLimiter(outs[i].Result, unit)
		}
		res[i].Source = FromLocal
	}
	if first != 0 {
		return res, first, nil
	}
	for i, c := range checks {
		switch outs[i].Write {
		case limiter.WriteStore:
			e := next[i]
			e.expireMs = outs[i].ExpireMs
			s.storeLocked(c.key, &e, nowMs)
		case limiter.WriteDelete:
			delete(s.m, c.key)
		}
	}
	return res, 0, nil
}

// storeLocked stores e under key, making room first when the map is full:
// it drops the expired keys among up to 64 it visits, and one live key if
// none had expired.
func (s *local) storeLocked(key string, e *localEntry, nowMs int64) {
	if _, ok := s.m[key]; !ok && len(s.m) >= s.max {
		seen, dropped := 0, false
		var victim string
		for k, old := range s.m {
			if nowMs > old.expireMs {
				delete(s.m, k)
				dropped = true
			} else if victim == "" {
				victim = k
			}
			if seen++; seen == 64 {
				break
			}
		}
		if !dropped {
			delete(s.m, victim)
		}
	}
	s.m[key] = e
}

// step runs the limit's algorithm from package limiter on e.
func step(e localEntry, exists bool, now int64, l *Limit, cost int64) (localEntry, limiter.Outcome, error) {
	p, err := l.period()
	if err != nil {
		return e, limiter.Outcome{}, err
	}
	e.kind, e.exact = l.Kind, l.Exact
	var out limiter.Outcome
	switch l.Kind {
	case GCRA:
		var prm limiter.GCRAParams
		if prm, err = (limiter.GCRARequest{MaxBurst: l.Burst, Count: l.Rate, Period: p, Quantity: cost}).Params(); err == nil {
			e.gcra, out, err = limiter.GCRA(e.gcra, exists, now, prm)
		}
	case TokenBucket:
		r := limiter.TokenBucketRequest{Capacity: l.Burst, Refill: l.Rate, Period: p, Cost: cost, Millis: l.millis()}
		if err = r.Validate(); err == nil {
			e.tb, out, err = limiter.TokenBucket(e.tb, exists, now, r)
		}
	case SlidingWindow:
		r := limiter.SlidingWindowRequest{Limit: l.Rate, Window: p, Cost: cost, Exact: l.Exact, Millis: l.millis()}
		if err = r.Validate(); err == nil {
			if l.Exact {
				e.log, out, err = limiter.SlidingLog(e.log, now, r)
			} else {
				e.sw, out, err = limiter.SlidingWindow(e.sw, exists, now, r)
			}
		}
	case FixedWindow:
		r := limiter.FixedWindowRequest{Limit: l.Rate, Window: p, Cost: cost, Millis: l.millis()}
		if err = r.Validate(); err == nil {
			e.fw, out, err = limiter.FixedWindow(e.fw, exists, now, r)
		}
	}
	return e, out, err
}
