package rules

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cellserver/cellserver/limiter"
)

// Store runs one limiter call on a counter key, wherever that key is
// served: the daemon's Store runs it on the local engine for a slot this
// node serves and forwards it to the slot's owner in cluster mode.
// Implementations are safe for concurrent use.
type Store interface {
	Apply(ctx context.Context, c *Charge) (limiter.Result, error)
}

// Config configures a Service.
type Config struct {
	// Store charges the counters. Required.
	Store Store
	// Now returns the time in Unix ns, the clock the Store's engine runs
	// on; it answers a rule's time to reset when its counter is empty.
	// Default: time.Now.
	Now func() int64
	// NearLimitRatio is the fraction of a limit above which hits count as
	// near_limit, as envoyproxy/ratelimit's NEAR_LIMIT_RATIO. Default: 0.8.
	NearLimitRatio float32
	// MaxKeySize bounds a counter's key (CounterKeyLen): a descriptor
	// whose key would be longer is refused with ErrKeyTooLarge. Default:
	// 64 KiB, max-key-size's default.
	MaxKeySize int
	// MaxMetricKeys bounds the statistics series that detailed_metric and
	// value_to_metric create from request values; hits beyond it are
	// counted under their rule's own key. Default: 10000.
	MaxMetricKeys int
	// MaxMetricKeyBytes bounds the bytes of those keys together, since a
	// request's values may take up to MaxKeySize each: past it, as past
	// MaxMetricKeys. Default: 4 MiB.
	MaxMetricKeyBytes int
}

// ErrKeyTooLarge is Check's error for a descriptor whose counter's key
// would be longer than Config.MaxKeySize; it wraps ErrBadRequest.
var ErrKeyTooLarge = fmt.Errorf("%w: a descriptor's entries are too long for its counter's key", ErrBadRequest)

// Stats are one metric key's counters, as envoyproxy/ratelimit counts
// them: hits charged, and of those the ones within the limit, near it,
// over it, and over it but let through by shadow mode.
type Stats struct {
	TotalHits, OverLimit, NearLimit, WithinLimit, ShadowMode atomic.Uint64
}

// Service is the Checker: it holds the rules in force (swapped
// atomically by Set) and charges the counters of the rules a request
// matches through its Store. It is safe for concurrent use.
type Service struct {
	cfg   Config
	rules atomic.Pointer[Set]

	statsMu    sync.RWMutex
	stats      map[string]*Stats
	statsBytes int // the bytes of the request-made keys of stats

	charges sync.Pool // *Charge, their keys' buffers reused
}

var _ Checker = (*Service)(nil)

// NewService returns a Service with no rules: every request is answered
// OK until rules are set.
func NewService(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.NearLimitRatio == 0 {
		cfg.NearLimitRatio = 0.8
	}
	if cfg.MaxKeySize == 0 {
		cfg.MaxKeySize = 64 << 10
	}
	if cfg.MaxMetricKeys == 0 {
		cfg.MaxMetricKeys = 10000
	}
	if cfg.MaxMetricKeyBytes == 0 {
		cfg.MaxMetricKeyBytes = 4 << 20
	}
	s := &Service{cfg: cfg, stats: map[string]*Stats{}}
	s.charges.New = func() any { return &Charge{Key: make([]byte, 0, 256)} }
	s.rules.Store(&Set{})
	return s
}

// Rules returns the rule set in force.
func (s *Service) Rules() *Set { return s.rules.Load() }

// SetRules puts set in force at once; requests already under way finish
// with the set they started with.
func (s *Service) SetRules(set *Set) { s.rules.Store(set) }

// Decision is the full answer for one descriptor, of which Status is what
// the gRPC protocol carries; RL.CHECK replies with the rest too.
type Decision struct {
	Status Status
	Rule   *Rule // nil: no rule (or one replaced)
	// Over: the descriptor was over its limit (shadow mode lets it
	// through: Status.Code is then OK).
	Over bool
	// RetryAfter is when the same request would be allowed (-1: allowed,
	// or never); ResetAfter when the counter is back to its idle state.
	RetryAfter time.Duration
}

// ShouldRateLimit answers req: it implements Checker.
func (s *Service) ShouldRateLimit(ctx context.Context, req Request) (Response, error) {
	var resp Response
	resp.Statuses = make([]Status, len(req.Descriptors))
	ds := make([]Decision, len(req.Descriptors))
	code, err := s.Check(ctx, &req, ds)
	if err != nil {
		return Response{}, err
	}
	for i := range ds {
		resp.Statuses[i] = ds[i].Status
	}
	resp.OverallCode = code
	return resp, nil
}

// Check answers req into out (one Decision per descriptor, len(out) ≥
// len(req.Descriptors)) and returns the overall code. It reads req's
// strings only while it runs and keeps none of them (a metric key made of
// request values is a copy), so a caller may pass views of buffers it
// reuses. For a request of
// one descriptor without replaces it allocates nothing in steady state,
// unless the rule asks for a detailed or value metric.
func (s *Service) Check(ctx context.Context, req *Request, out []Decision) (Code, error) {
	if req.Domain == "" {
		return CodeUnknown, fmt.Errorf("%w: rate limit domain must not be empty", ErrBadRequest)
	}
	if len(req.Descriptors) == 0 {
		return CodeUnknown, fmt.Errorf("%w: rate limit descriptor list must not be empty", ErrBadRequest)
	}
	d := s.rules.Load().Domain(req.Domain)
	var m match
	if len(req.Descriptors) == 1 {
		dsc := &req.Descriptors[0]
		d.lookup(dsc.Entries, &m)
		if m.rule != nil && m.rule.Unlimited {
			out[0] = unlimited(m.rule)
		} else if err := s.charge(ctx, req, dsc, d, &m, &out[0]); err != nil {
			return CodeUnknown, err
		}
		return overall(out[:1]), nil
	}
	// Several descriptors: match them all first, since a rule one of them
	// matched may replace a rule another matched (replaces).
	rules := make([]*Rule, len(req.Descriptors))
	var replaced map[string]bool
	for i := range req.Descriptors {
		d.lookup(req.Descriptors[i].Entries, &m)
		rules[i] = m.rule
		if m.rule != nil {
			for _, n := range m.rule.Replaces {
				if replaced == nil {
					replaced = map[string]bool{}
				}
				replaced[n] = true
			}
		}
	}
	for i := range req.Descriptors {
		dsc := &req.Descriptors[i]
		r := rules[i]
		switch {
		case r != nil && r.Unlimited:
			out[i] = unlimited(r)
			continue
		case r != nil && r.Name != "" && replaced[r.Name]:
			out[i] = Decision{Status: Status{Code: CodeOK}, RetryAfter: -1}
			continue
		}
		d.lookup(dsc.Entries, &m)
		if err := s.charge(ctx, req, dsc, d, &m, &out[i]); err != nil {
			return CodeUnknown, err
		}
	}
	return overall(out[:len(req.Descriptors)]), nil
}

// unlimited is the answer for a rule with unlimited: OK, no limit, the
// most remaining a uint32 holds; nothing is counted.
func unlimited(r *Rule) Decision {
	return Decision{Status: Status{Code: CodeOK, LimitRemaining: math.MaxUint32}, Rule: r, RetryAfter: -1}
}

// overall is OverLimit when a descriptor outside quota mode is over its
// limit (shadow mode's already say OK), or when every quota-mode
// descriptor is.
func overall(ds []Decision) Code {
	quota, quotaOver := 0, 0
	for i := range ds {
		d := &ds[i]
		if d.Rule != nil && d.Rule.Quota {
			quota++
			if d.Status.Code == CodeOverLimit {
				quotaOver++
			}
			continue
		}
		if d.Status.Code == CodeOverLimit {
			return CodeOverLimit
		}
	}
	if quota > 0 && quota == quotaOver {
		return CodeOverLimit
	}
	return CodeOK
}

// hitsOf is what a descriptor is charged: its own hits_addend when set (0
// then only reads), else the request's, 0 meaning 1.
func hitsOf(req *Request, dsc *Descriptor) uint64 {
	if dsc.HitsAddend != nil {
		return *dsc.HitsAddend
	}
	return max(req.HitsAddend, 1)
}

// charge charges the rule m matched (none: OK, no limit) and fills out.
func (s *Service) charge(ctx context.Context, req *Request, dsc *Descriptor, d *Domain, m *match, out *Decision) error {
	r := m.rule
	if r == nil {
		*out = Decision{Status: Status{Code: CodeOK}, RetryAfter: -1}
		return nil
	}
	if CounterKeyLen(d.Name, dsc.Entries) > s.cfg.MaxKeySize {
		return ErrKeyTooLarge
	}
	hits := hitsOf(req, dsc)
	cost := int64(min(hits, uint64(fwCeiling)))
	ch := s.charges.Get().(*Charge)
	ch.rule, ch.hits = r, cost
	r.request(&ch.Request, cost)
	ch.Key = appendCounterKey(ch.Key[:0], d.Name, dsc.Entries, m)
	res, err := s.cfg.Store.Apply(ctx, ch)
	ch.rule = nil
	s.charges.Put(ch)
	if err != nil {
		return err
	}
	limit := uint64(r.Limit.RequestsPerUnit)
	unit := time.Second
	if r.Millis {
		unit = time.Millisecond
	}
	*out = Decision{Rule: r, RetryAfter: -1}
	st := &out.Status
	st.CurrentLimit = &r.Limit
	var after uint64
	if r.Algorithm == AlgoFixedWindow {
		after = uint64(fwCeiling - res.Remaining)
		out.Over = res.Limited || after > limit
		if !out.Over {
			st.LimitRemaining = uint32(limit - after)
		}
		reset := res.ResetAfter
		if reset == 0 { // an empty counter read with hits 0: the window's end from the clock
			w := r.Window * int64(unit)
			now := s.cfg.Now()
			reset = (w - now%w + int64(unit) - 1) / int64(unit)
		}
		st.DurationUntilReset = time.Duration(reset) * unit
		if out.Over && limit >= hits {
			out.RetryAfter = st.DurationUntilReset
		}
	} else {
		out.Over = res.Limited
		st.LimitRemaining = uint32(min(max(res.Remaining, 0), math.MaxUint32))
		after = uint64(max(res.Limit-res.Remaining, 0))
		runit := unit
		if r.Algorithm == AlgoGCRA { // CL.THROTTLE's replies are in seconds
			runit = time.Second
		}
		st.DurationUntilReset = time.Duration(res.ResetAfter) * runit
		if res.RetryAfter >= 0 {
			out.RetryAfter = time.Duration(res.RetryAfter) * runit
		}
		if out.Over {
			st.LimitRemaining = 0
			after = limit + hits // every hit of a refused request is over the limit
		}
	}
	st.Code = CodeOK
	if out.Over && !r.Shadow {
		st.Code = CodeOverLimit
	}
	s.count(d.Name, dsc.Entries, m, hits, after, out.Over)
	return nil
}

// count adds one charge to its metric key's statistics, as
// envoyproxy/ratelimit counts them: the hits that took the count over the
// limit are over_limit (and shadow_mode, for a rule in shadow mode),
// those between the near-limit threshold and the limit near_limit, and
// every allowed hit within_limit.
func (s *Service) count(domain string, entries []Entry, m *match, hits, after uint64, over bool) {
	st := s.statsFor(domain, entries, m)
	limit := uint64(m.rule.Limit.RequestsPerUnit)
	near := uint64(math.Floor(float64(float32(limit) * s.cfg.NearLimitRatio)))
	before := after - min(hits, after)
	st.TotalHits.Add(hits)
	if over {
		overHits := hits
		if before < limit {
			overHits = after - limit
			st.NearLimit.Add(limit - max(near, before))
		}
		st.OverLimit.Add(overHits)
		if m.rule.Shadow {
			st.ShadowMode.Add(overHits)
		}
		return
	}
	if after > near {
		if before >= near {
			st.NearLimit.Add(hits)
		} else {
			st.NearLimit.Add(after - near)
		}
	}
	st.WithinLimit.Add(hits)
}

// statsFor returns the statistics of m's metric key, created on first
// use (up to MaxMetricKeys request-made keys; beyond, the rule's own).
func (s *Service) statsFor(domain string, entries []Entry, m *match) *Stats {
	k := metricKey(domain, entries, m)
	own := k == m.rule.Key
	if own {
		if st := m.rule.stats.Load(); st != nil {
			return st
		}
		defer func() { m.rule.stats.CompareAndSwap(nil, s.StatsOf(k)) }()
	}
	s.statsMu.RLock()
	st := s.stats[k]
	s.statsMu.RUnlock()
	if st != nil {
		return st
	}
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if st = s.stats[k]; st == nil {
		if k != m.rule.Key {
			// A key that is not UTF-8 cannot be a metric's label value.
			if len(s.stats) >= s.cfg.MaxMetricKeys || s.statsBytes+len(k) > s.cfg.MaxMetricKeyBytes || !utf8.ValidString(k) {
				if st = s.stats[m.rule.Key]; st != nil {
					return st
				}
				k = m.rule.Key
			} else {
				s.statsBytes += len(k)
			}
		}
		st = &Stats{}
		s.stats[k] = st
	}
	return st
}

// EachStats calls fn with every metric key and its counters, for the
// metrics' scrape.
func (s *Service) EachStats(fn func(key string, st *Stats)) {
	s.statsMu.RLock()
	defer s.statsMu.RUnlock()
	for k, st := range s.stats {
		fn(k, st)
	}
}

// StatsOf returns a metric key's counters, nil when nothing was counted
// under it.
func (s *Service) StatsOf(key string) *Stats {
	s.statsMu.RLock()
	defer s.statsMu.RUnlock()
	return s.stats[key]
}
