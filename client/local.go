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

// localEntry is one key's state: its kind (SW.HIT EXACT's own), its
// expiry and its algorithm's state.
type localEntry struct {
	kind     Kind
	expireMs int64 // Unix ms; gone once now_ms > expireMs
	state    limiter.State
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
		r, err := c.limit.request(c.cost)
		if err != nil {
			return nil, 0, err
		}
		n, out, err := s.step(c.key, r, now)
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
			r, err := c.limit.request(0)
			if err != nil {
				return nil, 0, err
			}
			_, out, err := s.step(c.key, r, now)
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

// step runs r's algorithm on a copy of key's state at now (Unix ns): a
// key of another kind, or expired, counts as none.
func (s *local) step(key string, r limiter.Request, now int64) (localEntry, limiter.Outcome, error) {
	cur := localEntry{kind: r.Kind}
	e, ok := s.m[key]
	exists := ok && now/1e6 <= e.expireMs && e.kind == r.Kind
	if exists {
		cur.state = e.state
		cur.state.Log = slices.Clone(e.state.Log) // SlidingLog may write into its input
	}
	var out limiter.Outcome
	err := limiter.Apply(&cur.state, exists, now, &r, &out)
	return cur, out, err
}
