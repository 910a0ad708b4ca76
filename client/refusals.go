package client

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/limiter"
	"github.com/hashicorp/golang-lru/simplelru"
)

// The refusal cache. A refused call changes nothing on the server, and
// its reply says how long the same request stays refused; until then the
// answer is known, and the Client gives it without a round trip. What is
// kept, and why each local answer equals the server's, is in the package
// doc; refusalRules says it per kind.

const (
	// refusalShards is the number of independently locked parts of the
	// cache: a flood on one key takes one shard's read lock per call.
	refusalShards = 64
	// refusalMaxAge bounds how long a refusal is kept, whatever its
	// retry_after: an answer from the cache is at most this old.
	refusalMaxAge = time.Minute
	// refusalMaxChecks is the most checks an AllowAll call may have to be
	// answered from the cache (more are sent, so that the server's checks
	// of the call, duplicate keys among them, apply).
	refusalMaxChecks = 16
)

// refusalRule says how a kind's refused reply ages. A kind without a rule
// is never cached; a kind whose refusal is known until its retry_after
// (the state is left as it was, and only time changes the answer) opts in
// with a row in refusalRules.
type refusalRule struct {
	// round is the rounding the server applies to a time in the reply,
	// whose unit is unit (unit is at most 1 s).
	round func(d, unit time.Duration) time.Duration
	// fixed: neither remaining nor retry_after moves until the refusal
	// ends, whatever the cost (a fixed window: the count is the count,
	// and the window ends when it ends).
	fixed bool
	// maxCost is the largest cost answered from the cache above the
	// limit (0: none). A higher cost may be an argument error on the
	// server (CL.THROTTLE's quantity out of range).
	maxCost int64
}

// refusalRules holds the rule of every kind the cache answers for.
var refusalRules = [limiter.NumKinds]*refusalRule{
	limiter.KindGCRA:          {round: roundCell},
	limiter.KindTokenBucket:   {round: roundUp, maxCost: 1<<63 - 1},
	limiter.KindSlidingWindow: {round: roundUp, maxCost: 1<<63 - 1},
	limiter.KindFixedWindow:   {round: roundUp, fixed: true, maxCost: 1<<63 - 1},
	// A queue's refusal for want of places, like a bucket's; one for its
	// wait beyond MAXWAIT is not kept (waitBounded).
	limiter.KindLeakyQueue: {round: roundUp, maxCost: 1<<63 - 1},
}

// waitBounded reports whether l is a Queue whose calls carry MAXWAIT: a
// refusal of it may be for the wait alone, while places free before it
// passes (remaining rises before retry_after), and free places do not
// mean it passes; the cache keeps nothing of such a limit.
func waitBounded(l *Limit) bool { return l.Kind == Queue && (l.MaxWait > 0 || l.bounded) }

// roundUp rounds d up to a whole unit, as TB.TAKE, SW.HIT and FW.INCR
// round their times.
func roundUp(d, unit time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + unit - 1) / unit * unit
}

// roundCell rounds d to whole seconds as redis-cell does (docs/commands.md
// §4.2): truncated, plus one second when the rest is at least 1 ms. The
// f64 sum of that section differs from this only beyond 2^24 s, far past
// refusalMaxAge.
func roundCell(d, _ time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	s := d / time.Second * time.Second
	if d-s >= time.Millisecond {
		s += time.Second
	}
	return s
}

// refusal is what the cache knows of one key under one limit: a refusal
// (cost > 0): the cost refused, the Result the server replied, when the
// Client received it (Unix ns on Options.Now) and until when it is known;
// and whether the key passes (passAt > 0): since passAt it allows any
// cost up to passUpTo, as a refused ML.THROTTLE call's uncharged read of
// it showed (remaining only grows while no one spends). An entry is never
// changed once stored.
type refusal struct {
	limit     Limit // Name and Failure cleared: the limit as sent
	cost      int64
	res       Result
	at, until int64
	passUpTo  int64
	passAt    int64
}

// refusalShard is one part of the cache: an LRU of keys to *refusal.
type refusalShard struct {
	mu  sync.RWMutex
	lru *simplelru.LRU // string → *refusal
	_   [64]byte       // keeps shards' locks off one cache line
}

// refusalGens is how many generations the cache counts: each key has
// one, shared with the keys of the same hash, counted up each time one of
// them is forgotten, so that a refusal whose call was sent before the
// forgetting is not stored after it (an allowed call on another key of
// the generation only makes a refusal on its way go unstored).
const refusalGens = 4096

// refusals is the refusal cache, safe for concurrent use. A nil
// *refusals is a cache that is off.
type refusals struct {
	seed   maphash.Seed
	shards [refusalShards]refusalShard
	gens   [refusalGens]atomic.Uint64
}

// newRefusals returns a cache of about size keys (at least one a shard).
func newRefusals(size int) *refusals {
	rc := &refusals{seed: maphash.MakeSeed()}
	per := max(size/refusalShards, 1)
	for i := range rc.shards {
		rc.shards[i].lru, _ = simplelru.NewLRU(per, nil) // per > 0: no error
	}
	return rc
}

func (rc *refusals) shard(key string) *refusalShard {
	return &rc.shards[maphash.String(rc.seed, key)%refusalShards]
}

// slot returns key's shard and generation.
func (rc *refusals) slot(key string) (*refusalShard, *atomic.Uint64) {
	h := maphash.String(rc.seed, key)
	return &rc.shards[h%refusalShards], &rc.gens[h/refusalShards%refusalGens]
}

// asSent returns l as the server sees it: without Name and Failure.
func asSent(l Limit) Limit {
	l.Name, l.Failure = "", 0
	return l
}

// lookup returns the local answer for one check at now (Unix ns), if a
// refusal of the same limit is known for its key.
func (rc *refusals) lookup(ch *Check, now int64) (Result, bool) {
	if ch.Cost <= 0 || int(ch.Limit.Kind) >= len(refusalRules) || refusalRules[ch.Limit.Kind] == nil {
		return Result{}, false // a read or a refund goes to the server
	}
	sh := rc.shard(ch.Key)
	sh.mu.RLock()
	v, ok := sh.lru.Peek(ch.Key)
	sh.mu.RUnlock()
	if !ok {
		return Result{}, false
	}
	e := v.(*refusal) // never changed once stored
	if e.cost == 0 || now < e.at || now > e.until || ch.Cost < e.cost || asSent(ch.Limit) != e.limit {
		return Result{}, false
	}
	rule := refusalRules[e.limit.Kind]
	r := e.res
	r.Source = FromCache
	if ch.Cost > r.Limit {
		if ch.Cost > rule.maxCost && ch.Cost != e.cost {
			return Result{}, false
		}
		r.RetryAfter = -1 // can never pass, whatever the state
	} else if r.RetryAfter > 0 {
		// For a higher cost than the one refused the server's retry_after
		// is later, but for a fixed window: this is its lower bound.
		r.RetryAfter = rule.round(r.RetryAfter-time.Duration(now-e.at), e.limit.unit())
	}
	r.ResetAfter = rule.round(r.ResetAfter-time.Duration(now-e.at), e.limit.unit())
	return r, true
}

// passes reports whether ch is known to pass at now: a refund or read of
// a kind whose refunds always pass, or a cost up to what a read of its
// key showed, no one of this Client having spent on it since.
func (rc *refusals) passes(ch *Check, now int64) bool {
	if ch.Cost <= 0 && ch.Limit.Kind != GCRA {
		return true // TB.TAKE, SW.HIT, FW.INCR and LB.QUEUE always allow a refund or a read
	}
	sh := rc.shard(ch.Key)
	sh.mu.RLock()
	v, ok := sh.lru.Peek(ch.Key)
	sh.mu.RUnlock()
	if !ok {
		return false
	}
	e := v.(*refusal)
	return e.passAt != 0 && now >= e.passAt && now-e.passAt <= int64(refusalMaxAge) &&
		ch.Cost <= e.passUpTo && asSent(ch.Limit) == e.limit
}

// answer returns the Decision for checks at now when one of them is known
// refused and every check before it is known to pass (so that the server
// would name it first). That check is the one Refused names; the other
// checks report their Limit only (the server would report an uncharged
// read of each), see the package doc.
func (rc *refusals) answer(checks []Check, now int64) (Decision, bool) {
	if rc == nil || len(checks) > refusalMaxChecks {
		return Decision{}, false
	}
	if len(checks) == 1 {
		r, ok := rc.lookup(&checks[0], now)
		if !ok {
			return Decision{}, false
		}
		return Decision{Limited: true, Refused: 1, Results: []Result{r}}, true
	}
	first := -1
	var r Result
	for i := range checks {
		if r2, ok := rc.lookup(&checks[i], now); ok {
			first, r = i, r2
			break
		}
		if !rc.passes(&checks[i], now) {
			return Decision{}, false // it may refuse: the server names the first that does
		}
	}
	if first < 0 {
		return Decision{}, false
	}
	d := Decision{Limited: true, Refused: first + 1, Results: make([]Result, len(checks))}
	for i := range checks {
		for j := range i {
			if checks[j].Key == checks[i].Key {
				return Decision{}, false // the server's error to give
			}
		}
		if i == first {
			d.Results[i] = r
			continue
		}
		if _, err := checks[i].Limit.request(checks[i].Cost); err != nil {
			return Decision{}, false
		}
		d.Results[i] = Result{Limit: checks[i].Limit.capacity(), Source: FromCache}
	}
	return d, true
}

// refusalSnap holds the generations of the checks' keys before their
// call was sent.
type refusalSnap struct {
	small [4]uint64
	more  []uint64
}

// snapshot notes the generations of the checks' keys.
func (rc *refusals) snapshot(checks []Check) refusalSnap {
	var s refusalSnap
	if rc == nil {
		return s
	}
	gens := s.small[:0]
	if len(checks) > len(s.small) {
		s.more = make([]uint64, 0, len(checks))
		gens = s.more
	}
	for i := range checks {
		_, g := rc.slot(checks[i].Key)
		gens = append(gens, g.Load())
	}
	return s
}

func (s *refusalSnap) gen(i int) uint64 {
	if s.more != nil {
		return s.more[i]
	}
	return s.small[i]
}

// learn reads the server's Decision d on checks, received at now (Unix
// ns): a refused check of positive cost is kept, and so is what a refused
// ML.THROTTLE call's uncharged reads show of its other checks; a key that
// spent (the call allowed) or was refunded is forgotten, since its state
// changed.
func (rc *refusals) learn(checks []Check, d *Decision, snap *refusalSnap, now int64) {
	if rc == nil {
		return
	}
	for i := range checks {
		ch := &checks[i]
		switch {
		case ch.Cost < 0:
			rc.forget(ch.Key)
		case !d.Limited:
			if ch.Cost > 0 {
				rc.forget(ch.Key)
			}
		case ch.Cost > 0 && d.Results[i].Limited:
			rc.store(ch, d.Results[i], snap.gen(i), now)
		case len(checks) > 1 && !d.Results[i].Limited:
			// An uncharged read of a check that would have passed.
			rc.storePass(ch, d.Results[i].Remaining, snap.gen(i), now)
		}
	}
}

// store keeps the refusal res of ch received at now, unless the key was
// forgotten since gen, or the refusal is known for no time at all.
func (rc *refusals) store(ch *Check, res Result, gen uint64, now int64) {
	rule := refusalRules[ch.Limit.Kind]
	if rule == nil {
		return
	}
	known := knownFor(rule, ch, &res)
	if known <= 0 {
		return
	}
	e := &refusal{limit: asSent(ch.Limit), cost: ch.Cost, res: res, at: now, until: now + int64(known)}
	sh, g := rc.slot(ch.Key)
	sh.mu.Lock()
	if g.Load() == gen {
		if v, ok := sh.lru.Peek(ch.Key); ok {
			if old := v.(*refusal); old.limit == e.limit {
				e.passUpTo, e.passAt = old.passUpTo, old.passAt // still true: no one spent since
			}
		}
		sh.lru.Add(ch.Key, e)
	}
	sh.mu.Unlock()
}

// storePass notes that ch's key, read at now, showed remaining: any cost
// up to it passes (up to one less for GCRA, whose remaining is cut to
// microseconds), until someone spends on the key.
func (rc *refusals) storePass(ch *Check, remaining int64, gen uint64, now int64) {
	if ch.Limit.Kind == GCRA {
		remaining--
	}
	if remaining < 0 || int(ch.Limit.Kind) >= len(refusalRules) || refusalRules[ch.Limit.Kind] == nil || waitBounded(&ch.Limit) {
		return
	}
	e := &refusal{limit: asSent(ch.Limit), passUpTo: remaining, passAt: max(now, 1)}
	sh, g := rc.slot(ch.Key)
	sh.mu.Lock()
	if g.Load() == gen {
		if v, ok := sh.lru.Peek(ch.Key); ok {
			if old := v.(*refusal); old.limit == e.limit && old.cost != 0 {
				e.cost, e.res, e.at, e.until = old.cost, old.res, old.at, old.until
			}
		}
		sh.lru.Add(ch.Key, e)
	}
	sh.mu.Unlock()
}

// knownFor returns how long after it was received the refusal res of ch
// is known to hold with the same remaining (0: not at all). The server
// rounds retry_after up (CL.THROTTLE: to the nearest second, within
// 1 ms), so the exact time is more than retry_after less one unit of the
// reply; remaining is constant until then when it cannot rise before the
// request passes: for a fixed window, or when it is already one below the
// cost (it reaches the cost only when the request passes). A request
// above the limit (retry_after -1) never passes; its remaining is
// constant for a fixed window until the window ends (reset_after), and
// for a key at rest (remaining = limit).
func knownFor(rule *refusalRule, ch *Check, res *Result) time.Duration {
	unit := ch.Limit.unit()
	var known time.Duration
	switch {
	case res.RetryAfter > 0 && (rule.fixed || res.Remaining == ch.Cost-1):
		known = res.RetryAfter - unit
	case res.RetryAfter < 0 && res.Remaining == res.Limit:
		known = refusalMaxAge
	case res.RetryAfter < 0 && rule.fixed && res.ResetAfter > 0:
		known = res.ResetAfter - unit
	}
	if ch.Limit.Kind == GCRA && ch.Cost >= 1_000_000 || waitBounded(&ch.Limit) {
		// GCRA's remaining is cut to microseconds of T: for a huge
		// quantity it may reach the cost a little before the request
		// passes; a queue's may rise while its wait is still too long.
		return 0
	}
	return min(known, refusalMaxAge)
}

// forget drops key's refusal, and any refusal of key still on its way.
func (rc *refusals) forget(key string) {
	sh, g := rc.slot(key)
	g.Add(1)
	sh.mu.RLock()
	ok := sh.lru.Contains(key)
	sh.mu.RUnlock()
	if ok {
		sh.mu.Lock()
		sh.lru.Remove(key)
		sh.mu.Unlock()
	}
}

// len returns the number of keys held, past ones included.
func (rc *refusals) len() int {
	n := 0
	for i := range rc.shards {
		sh := &rc.shards[i]
		sh.mu.RLock()
		n += sh.lru.Len()
		sh.mu.RUnlock()
	}
	return n
}

// Stats counts a Client's calls (Allow, AllowAll and the calls built on
// them) since New.
type Stats struct {
	// Sent is the calls sent to the server, whatever their outcome.
	Sent uint64
	// Cached is the calls the refusal cache answered, without a round
	// trip.
	Cached uint64
}

// counters are the Client's Stats.
type counters struct {
	sent, cached atomic.Uint64
}

// Stats returns the Client's counts of calls.
func (c *Client) Stats() Stats {
	return Stats{Sent: c.counts.sent.Load(), Cached: c.counts.cached.Load()}
}

// Forget drops what the refusal cache knows of key, so that the next call
// on it goes to the server. Call it after resetting the key by other
// means than this Client (a DEL of your own, a refund by another
// process). A refund through this Client (a negative cost) forgets the key
// itself.
func (c *Client) Forget(key string) {
	if c.refusals != nil {
		c.refusals.forget(key)
	}
}

// Reset deletes key on the server (DEL), resetting its limit, and forgets
// its refusal.
func (c *Client) Reset(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, c.opt.Timeout)
	defer cancel()
	err := c.rdb.Del(ctx, key).Err()
	c.Forget(key)
	return err
}
