package engine

// View is the engine's command surface. The Engine's own View and those
// of NewView take each key's shard lock per call; the View handed to an
// Atomic function runs with every lock already held (held is true) and
// takes none.
type View struct {
	e    *Engine
	held bool
	hint Hint // for the next call on a key (Expect)
}

// NewView returns a View of its own, for one client: one that Expect may
// be called on.
func (e *Engine) NewView() *View { return &View{e: e} }

// Expect tells v that its next call on a key (a limiter, Get, Type,
// Exists, PTTL or Del) is for the key h was made for, which then need not
// be located again. That call consumes h; it is ignored when the call is
// for other bytes or h is another engine's. Expect changes v: call it only
// on a View no other goroutine uses (NewView's), never on the Engine's own.
func (v *View) Expect(h Hint) { v.hint = h }

// locate returns key's shard and hash, from the expected Hint when it was
// made for key.
func (v *View) locate(key []byte) (*shard, uint64) {
	if h := v.hint; h.s != nil { // never written on a shared View: see Expect
		v.hint = Hint{}
		if h.of(key) && h.e == v.e {
			return h.s, h.h
		}
	}
	return v.e.shardFor(key), v.e.hash(key)
}

func (v *View) lock(s *shard) {
	if !v.held {
		s.mu.Lock()
	}
}

func (v *View) unlock(s *shard) {
	if !v.held {
		s.mu.Unlock()
	}
}

// Throttle applies CL.THROTTLE with validated parameters p to key.
func (v *View) Throttle(key []byte, p GCRAParams) (Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.e.clock.Now()
	i, e, ok := sh.getLocked(key, h, floorDiv(now, nsPerMs))
	if ok && e.kind != KindGCRA {
		return Result{}, ErrWrongType
	}
	out, err := GCRA(e.a, ok, now, p)
	if err != nil {
		return Result{}, err
	}
	switch out.Write {
	case WriteStore:
		if err := sh.putLocked(key, h, i, entry{kind: KindGCRA, expireMs: out.ExpireMs, a: out.TAT}); err != nil {
			return Result{}, err
		}
	case WriteDelete:
		if ok {
			sh.removeLocked(i)
		}
	}
	sh.count(KindGCRA, out.Result.Limited)
	return out.Result, nil
}

// TokenBucket applies TB.TAKE with a validated request r to key.
func (v *View) TokenBucket(key []byte, r TokenBucketRequest) (Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.e.clock.Now()
	i, e, ok := sh.getLocked(key, h, floorDiv(now, nsPerMs))
	if ok && e.kind != KindTokenBucket {
		return Result{}, ErrWrongType
	}
	st, out, err := TokenBucket(TokenBucketState{FullAt: e.a, Rem: e.b}, ok, now, r)
	if err != nil {
		return Result{}, err
	}
	if err := sh.applyLocked(key, h, i, out, entry{kind: KindTokenBucket, a: st.FullAt, b: st.Rem}); err != nil {
		return Result{}, err
	}
	return out.Result, nil
}

// SlidingWindow applies SW.HIT with a validated request r to key: the
// sliding log when r.Exact, the two-counter window otherwise.
func (v *View) SlidingWindow(key []byte, r SlidingWindowRequest) (Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.e.clock.Now()
	i, e, ok := sh.getLocked(key, h, floorDiv(now, nsPerMs))
	if r.Exact {
		if ok && e.kind != KindSlidingLog {
			return Result{}, ErrWrongType
		}
		e.log = sh.t.logAt(i) // none if i < 0; room for the hit SlidingLog may add
		hits, out, err := SlidingLog(e.log, now, r)
		if err != nil {
			return Result{}, err
		}
		if err := sh.applyLocked(key, h, i, out, entry{kind: KindSlidingLog, log: hits}); err != nil {
			return Result{}, err
		}
		return out.Result, nil
	}
	if ok && e.kind != KindSlidingWindow {
		return Result{}, ErrWrongType
	}
	st, out, err := SlidingWindow(SlidingWindowState{Start: e.a, Prev: e.b, Curr: e.c}, ok, now, r)
	if err != nil {
		return Result{}, err
	}
	if err := sh.applyLocked(key, h, i, out, entry{kind: KindSlidingWindow, a: st.Start, b: st.Prev, c: st.Curr}); err != nil {
		return Result{}, err
	}
	return out.Result, nil
}

// FixedWindow applies FW.INCR with a validated request r to key.
func (v *View) FixedWindow(key []byte, r FixedWindowRequest) (Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.e.clock.Now()
	i, e, ok := sh.getLocked(key, h, floorDiv(now, nsPerMs))
	if ok && e.kind != KindFixedWindow {
		return Result{}, ErrWrongType
	}
	st, out, err := FixedWindow(FixedWindowState{Start: e.a, Count: e.b}, ok, now, r)
	if err != nil {
		return Result{}, err
	}
	if err := sh.applyLocked(key, h, i, out, entry{kind: KindFixedWindow, a: st.Start, b: st.Count}); err != nil {
		return Result{}, err
	}
	return out.Result, nil
}

// applyLocked carries out an algorithm's Outcome on key (hash h), whose
// live entry is in slot i (-1: none).
func (s *shard) applyLocked(key []byte, h uint64, i int, out Outcome, next entry) error {
	switch out.Write {
	case WriteStore:
		next.expireMs = out.ExpireMs
		if err := s.putLocked(key, h, i, next); err != nil {
			return err
		}
	case WriteDelete:
		if i >= 0 {
			s.removeLocked(i)
		}
	}
	s.count(next.kind, out.Result.Limited)
	return nil
}

func (s *shard) count(k Kind, limited bool) {
	if limited {
		s.limited[k]++
	} else {
		s.allowed[k]++
	}
}

// lookup returns key's live entry, taking its shard's lock as needed.
func (v *View) lookup(key []byte) (entry, bool, int64) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	nowMs := floorDiv(v.e.clock.Now(), nsPerMs)
	_, e, ok := sh.getLocked(key, h, nowMs)
	return e, ok, nowMs
}

// Get returns the TAT stored under a CL.THROTTLE key (what GET replies),
// false when there is no key, and ErrWrongType for another kind.
func (v *View) Get(key []byte) (int64, bool, error) {
	e, ok, _ := v.lookup(key)
	if !ok {
		return 0, false, nil
	}
	if e.kind != KindGCRA {
		return 0, false, ErrWrongType
	}
	return e.a, true, nil
}

// Type returns the kind of key, KindNone when it does not exist.
func (v *View) Type(key []byte) Kind {
	e, _, _ := v.lookup(key)
	return e.kind
}

// Exists reports whether key exists.
func (v *View) Exists(key []byte) bool {
	_, ok, _ := v.lookup(key)
	return ok
}

// PTTL returns key's remaining time to live in ms, or -2 when it does not
// exist. (Every key cellserver holds has an expiry.)
func (v *View) PTTL(key []byte) int64 {
	e, ok, nowMs := v.lookup(key)
	if !ok {
		return -2
	}
	return e.expireMs - nowMs
}

// Del removes key and reports whether it existed.
func (v *View) Del(key []byte) bool {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	i, _, ok := sh.getLocked(key, h, floorDiv(v.e.clock.Now(), nsPerMs))
	if ok {
		sh.removeLocked(i)
	}
	return ok
}

// DBSize returns the number of live keys. It reclaims every expired key on
// its way, so it walks each shard whole: O(N), one shard's lock at a time.
func (v *View) DBSize() int64 {
	var n int64
	for i := range v.e.shards {
		sh := &v.e.shards[i]
		v.lock(sh)
		sh.reapLocked(floorDiv(v.e.clock.Now(), nsPerMs))
		n += int64(sh.t.count)
		v.unlock(sh)
	}
	return n
}

// Flush removes every key.
func (v *View) Flush() {
	for i := range v.e.shards {
		sh := &v.e.shards[i]
		v.lock(sh)
		sh.clearLocked()
		v.unlock(sh)
	}
}

// Keys calls fn with every live key that keep accepts (nil: all) and whose
// kind is want (KindNone: any). It holds one shard's lock at a time and
// copies keys before calling fn, which may keep them. keep runs under the
// lock on the table's own bytes: it must neither retain its key nor use v.
func (v *View) Keys(keep func(key []byte) bool, want Kind, fn func(key []byte)) {
	for i := range v.e.shards {
		for _, k := range v.shardKeys(i, keep, want) {
			fn(k)
		}
	}
}

// Scan returns the live keys of the shards from cursor on, whole shards at
// a time until it has at least count keys, and the cursor to continue from
// (0 when done). A key that exists for the whole of a scan is returned at
// least once, as Redis promises. keep is as for Keys.
func (v *View) Scan(cursor uint64, count int, keep func(key []byte) bool, want Kind) (uint64, [][]byte) {
	var out [][]byte
	i := cursor
	for ; i < uint64(len(v.e.shards)) && len(out) < count; i++ {
		out = append(out, v.shardKeys(int(i), keep, want)...)
	}
	if i >= uint64(len(v.e.shards)) {
		i = 0
	}
	return i, out
}

func (v *View) shardKeys(i int, keep func([]byte) bool, want Kind) [][]byte {
	sh := &v.e.shards[i]
	v.lock(sh)
	defer v.unlock(sh)
	var out [][]byte
	sh.keysLocked(floorDiv(v.e.clock.Now(), nsPerMs), func(k []byte, e entry) {
		if (want == KindNone || e.kind == want) && (keep == nil || keep(k)) {
			out = append(out, append([]byte(nil), k...))
		}
	})
	return out
}
