package engine

import (
	"bytes"
	"slices"

	"github.com/cellserver/cellserver/limiter"
)

// ApplyAll applies several limiter calls, reqs[i] on keys[i], at one
// instant, all or nothing: if every
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
func (v *View) ApplyAll(keys [][]byte, reqs []limiter.Request) ([]limiter.Result, int, error) {
	if len(reqs) == 0 || len(keys) != len(reqs) {
		return nil, 0, ErrNoRequests
	}
	for i := range reqs {
		if !reqs[i].Kind.Valid() {
			return nil, 0, ErrKind
		}
	}
	if hasDuplicate(keys, bytes.Compare) {
		return nil, 0, ErrDuplicateKey
	}
	shards := make([]int, len(reqs))
	for i := range reqs {
		shards[i] = Slot(keys[i]) & (len(v.e.shards) - 1)
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

	now := v.now(nil)
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
		kind := r.Kind
		var e entry
		j, ok := sh.getLocked(keys[i], v.e.hash(keys[i]), nowMs, &e)
		if ok && e.kind != kind {
			return nil, 0, ErrWrongType
		}
		e.kind = kind
		if limiter.Kinds[kind].Log {
			// The table decodes every log into one scratch slice: copy it,
			// with room for the hit the step may add.
			hits := sh.t.logAt(j)
			e.Log = append(make([]limiter.Hit, 0, len(hits)+1), hits...)
		}
		p := pending{prev: e, ok: ok}
		if limiter.Kinds[kind].Log {
			p.prev.Log = slices.Clone(e.Log)
		}
		p.e = e
		if err := limiter.Apply(&p.e.State, ok, now, r, &p.out); err != nil {
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
			read, st := reqs[i].Uncharged(), p.prev.State
			var out limiter.Outcome
			if err := limiter.Apply(&st, p.ok, now, &read, &out); err != nil {
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
			if err := sh.makeRoomLocked(policy, recordLen(keys[i], &p.e, max(len(p.e.Log), 2))); err != nil {
				return nil, 0, err
			}
		}
	}
	for i := range reqs {
		p := &eval[i]
		key := keys[i]
		sh := &v.e.shards[shards[i]]
		h := v.e.hash(key)
		// Slot indexes move as the shard changes: find the key again.
		var cur entry
		j, ok := sh.getLocked(key, h, nowMs, &cur)
		switch p.out.Write {
		case limiter.WriteStore:
			p.e.expireMs = p.out.ExpireMs
			if err := sh.putLocked(key, h, j, &p.e); err != nil {
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

// smallDuplicates is the most keys hasDuplicate compares pairwise: below
// it, the n(n-1)/2 comparisons cost less than sorting, and allocate
// nothing.
const smallDuplicates = 16

// hasDuplicate reports whether keys holds the same key twice, comparing
// keys with cmp (bytes.Compare; a test counts its calls). A few keys are
// compared pairwise; more are sorted by index, O(n log n) comparisons, so
// that a call of many keys costs what its keys' sizes do, not their
// number squared.
func hasDuplicate(keys [][]byte, cmp func(a, b []byte) int) bool {
	n := len(keys)
	if n <= smallDuplicates {
		for i := 1; i < n; i++ {
			for j := range i {
				if cmp(keys[i], keys[j]) == 0 {
					return true
				}
			}
		}
		return false
	}
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return cmp(keys[a], keys[b]) })
	for i := 1; i < n; i++ {
		if cmp(keys[idx[i-1]], keys[idx[i]]) == 0 {
			return true
		}
	}
	return false
}
