package engine

import (
	"bytes"
	"slices"

	"github.com/cellserver/cellserver/limiter"
)

// Request is one limit of an ApplyAll call: a key, the kind of limiter it
// holds and that kind's validated arguments (only the field of Kind is
// read).
type Request struct {
	Key  []byte
	Kind Kind // KindGCRA, KindTokenBucket, KindSlidingWindow (KindSlidingLog with Exact), KindFixedWindow

	GCRA          limiter.GCRAParams
	TokenBucket   limiter.TokenBucketRequest
	SlidingWindow limiter.SlidingWindowRequest
	FixedWindow   limiter.FixedWindowRequest
}

// kind returns the kind of key r applies to.
func (r *Request) kind() Kind {
	if r.Kind == KindSlidingWindow && r.SlidingWindow.Exact {
		return KindSlidingLog
	}
	return r.Kind
}

// run applies r to the entry e by the same step its own command takes;
// read makes it a pure read (a cost, or quantity, of 0), which tells what
// the key holds without changing it.
func (r *Request) run(e entry, exists bool, now int64, read bool) (entry, limiter.Outcome, error) {
	o := op{ok: exists, e: e}
	var err error
	switch r.kind() {
	case KindGCRA:
		p := r.GCRA
		if read {
			p.Increment = 0
		}
		err = gcraStep(&o, now, p)
	case KindTokenBucket:
		q := r.TokenBucket
		if read {
			q.Cost = 0
		}
		err = tokenBucketStep(&o, now, q)
	case KindSlidingWindow, KindSlidingLog:
		q := r.SlidingWindow
		if read {
			q.Cost = 0
		}
		if q.Exact {
			err = slidingLogStep(&o, now, q)
		} else {
			err = slidingWindowStep(&o, now, q)
		}
	case KindFixedWindow:
		q := r.FixedWindow
		if read {
			q.Cost = 0
		}
		err = fixedWindowStep(&o, now, q)
	default:
		return e, limiter.Outcome{}, ErrKind
	}
	return o.e, o.out, err
}

// ApplyAll applies several limits at one instant, all or nothing: if every
// one allows its request, every one is charged; if any one refuses, none
// is. It returns one Result per request, in order, and the 1-based index
// of the first request that refused (0 when all allowed).
//
// When all allow, each Result is what the request's own command would
// have replied. When one or more refuse, a refusing request's Result is
// its own command's refusal (Limited, with its RetryAfter), and an
// allowing request's Result is what a pure read (cost or quantity 0)
// replies: Limited false, Remaining and ResetAfter as the key stands,
// uncharged, and RetryAfter -1.
//
// It takes the locks of just the shards its keys live in, in shard order
// (so that it never deadlocks with another ApplyAll or with Atomic), or
// none on a View that holds them. Every request is evaluated on a copy of
// its key's state first; ErrWrongType, ErrDuplicateKey (the same key
// twice: refused rather than applied in sequence) and the algorithms'
// errors are returned before anything is changed. Only ErrShardFull,
// while storing, can leave the earlier keys of an allowed call charged.
//
// The shard statistics count each request of an allowed call as allowed
// and each refusing request of a refused call as limited; the uncharged
// reads are not counted. Unlike the single-key methods, ApplyAll
// allocates.
func (v *View) ApplyAll(reqs []Request) ([]limiter.Result, int, error) {
	if len(reqs) == 0 {
		return nil, 0, ErrNoRequests
	}
	for i := range reqs {
		if !reqs[i].Kind.Valid() {
			return nil, 0, ErrKind
		}
		for j := range i {
			if bytes.Equal(reqs[i].Key, reqs[j].Key) {
				return nil, 0, ErrDuplicateKey
			}
		}
	}
	shards := make([]int, len(reqs))
	for i := range reqs {
		shards[i] = Slot(reqs[i].Key) & (len(v.e.shards) - 1)
	}
	order := slices.Compact(slices.Sorted(slices.Values(shards)))
	for _, s := range order {
		v.lock(&v.e.shards[s])
	}
	defer func() {
		for _, s := range order {
			v.unlock(&v.e.shards[s])
		}
	}()

	now := v.now()
	nowMs := unixMs(now)
	type pending struct {
		e    entry
		out  limiter.Outcome
		prev entry // the key's entry before the request
		ok   bool  // the key existed
	}
	eval := make([]pending, len(reqs))
	first := 0
	for i := range reqs {
		r := &reqs[i]
		sh := &v.e.shards[shards[i]]
		kind := r.kind()
		var e entry
		j, ok := sh.getLocked(r.Key, v.e.hash(r.Key), nowMs, &e)
		if ok && e.kind != kind {
			return nil, 0, ErrWrongType
		}
		e.kind = kind
		if kinds[kind].log {
			// The table decodes every log into one scratch slice: copy it,
			// with room for the hit the step may add.
			hits := sh.t.logAt(j)
			e.log = append(make([]limiter.Hit, 0, len(hits)+1), hits...)
		}
		p := pending{prev: e, ok: ok}
		if kinds[kind].log {
			p.prev.log = slices.Clone(e.log)
		}
		var err error
		if p.e, p.out, err = r.run(e, ok, now, false); err != nil {
			return nil, 0, err
		}
		if p.out.Result.Limited && first == 0 {
			first = i + 1
		}
		eval[i] = p
	}

	res := make([]limiter.Result, len(reqs))
	if first != 0 {
		for i := range reqs {
			p := &eval[i]
			sh := &v.e.shards[shards[i]]
			if p.out.Result.Limited {
				res[i] = p.out.Result
				sh.limited[p.e.kind]++
				continue
			}
			_, out, err := reqs[i].run(p.prev, p.ok, now, true)
			if err != nil {
				return nil, 0, err
			}
			res[i] = out.Result
		}
		return res, first, nil
	}
	// At the memory limit the new keys make room first, as one key's
	// command does (finishLocked), and all before any is written: a key
	// refused (ErrOOM) refuses the whole call, which then writes nothing.
	if v.e.overLimit() {
		policy := Policy(v.e.limit.policy.Load())
		for i := range reqs {
			p := &eval[i]
			if p.ok || p.out.Write != limiter.WriteStore {
				continue
			}
			sh := &v.e.shards[shards[i]]
			p.e.expireMs = p.out.ExpireMs // the record's size depends on it
			if err := sh.makeRoomLocked(policy, recordLen(reqs[i].Key, &p.e, max(len(p.e.log), 2))); err != nil {
				return nil, 0, err
			}
		}
	}
	for i := range reqs {
		p := &eval[i]
		r := &reqs[i]
		sh := &v.e.shards[shards[i]]
		h := v.e.hash(r.Key)
		// Slot indexes move as the shard changes: find the key again.
		var cur entry
		j, ok := sh.getLocked(r.Key, h, nowMs, &cur)
		switch p.out.Write {
		case limiter.WriteStore:
			p.e.expireMs = p.out.ExpireMs
			if err := sh.putLocked(r.Key, h, j, &p.e); err != nil {
				return nil, 0, err
			}
		case limiter.WriteDelete:
			if ok {
				sh.removeLocked(j)
			}
		}
		sh.allowed[p.e.kind]++
		res[i] = p.out.Result
	}
	return res, 0, nil
}
