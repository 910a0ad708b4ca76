package engine

import (
	"github.com/cellserver/cellserver/internal/ahead"
	"github.com/cellserver/cellserver/limiter"
)

// View is the engine's command surface. The Engine's own View and those
// of NewView take each key's shard lock per call; the View handed to an
// Atomic function runs with every lock already held (held is true) and
// takes none, and the one handed to an AtomicKeys function holds the
// shards in only and takes the others' per call.
type View struct {
	e    *Engine
	held bool
	only []uint64   // when held: the shards held, a bit each; nil: all
	hint ahead.Hint // for the next call on a key (see Ahead)
}

// NewView returns a View of its own, for one client: one whose Ahead may
// be used.
func (e *Engine) NewView() *View { return &View{e: e} }

// locate returns key's shard and hash, from the expected Hint when it was
// made for key.
func (v *View) locate(key []byte) (*shard, uint64) {
	if h := v.hint; h.Owner != 0 { // never set on a shared View: see Ahead
		v.hint = ahead.Hint{}
		if s := v.e.shardOfHint(h); s != nil && h.Of(key) {
			return s, h.Hash
		}
	}
	return v.e.shardFor(key), v.e.hash(key)
}

func (v *View) lock(s *shard) {
	if !v.held || !v.holds(s) {
		s.mu.Lock()
	}
}

func (v *View) unlock(s *shard) {
	if !v.held || !v.holds(s) {
		s.mu.Unlock()
	}
}

// holds reports whether a held View holds s's lock.
func (v *View) holds(s *shard) bool {
	return v.only == nil || v.only[s.idx/64]&(1<<(s.idx%64)) != 0
}

// Throttle applies CL.THROTTLE with validated parameters p to key.
func (v *View) Throttle(key []byte, p limiter.GCRAParams) (limiter.Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.e.clock.Now()
	i, e, ok, err := v.findLocked(sh, key, h, KindGCRA, now)
	if err != nil {
		return limiter.Result{}, err
	}
	e, out, err := gcraStep(e, ok, now, p)
	return v.finishLocked(sh, key, h, i, e, ok, now, out, err)
}

// TokenBucket applies TB.TAKE with a validated request r to key.
func (v *View) TokenBucket(key []byte, r limiter.TokenBucketRequest) (limiter.Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.e.clock.Now()
	i, e, ok, err := v.findLocked(sh, key, h, KindTokenBucket, now)
	if err != nil {
		return limiter.Result{}, err
	}
	e, out, err := tokenBucketStep(e, ok, now, r)
	return v.finishLocked(sh, key, h, i, e, ok, now, out, err)
}

// SlidingWindow applies SW.HIT with a validated request r to key: the
// sliding log when r.Exact, the two-counter window otherwise.
func (v *View) SlidingWindow(key []byte, r limiter.SlidingWindowRequest) (limiter.Result, error) {
	if r.Exact {
		return v.slidingLog(key, r)
	}
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.e.clock.Now()
	i, e, ok, err := v.findLocked(sh, key, h, KindSlidingWindow, now)
	if err != nil {
		return limiter.Result{}, err
	}
	e, out, err := slidingWindowStep(e, ok, now, r)
	return v.finishLocked(sh, key, h, i, e, ok, now, out, err)
}

// FixedWindow applies FW.INCR with a validated request r to key.
func (v *View) FixedWindow(key []byte, r limiter.FixedWindowRequest) (limiter.Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.e.clock.Now()
	i, e, ok, err := v.findLocked(sh, key, h, KindFixedWindow, now)
	if err != nil {
		return limiter.Result{}, err
	}
	e, out, err := fixedWindowStep(e, ok, now, r)
	return v.finishLocked(sh, key, h, i, e, ok, now, out, err)
}

// The steps of the four commands: each moves a key's state between its
// entry and its algorithm's state type. The single-key methods above and
// ApplyAll (multi.go) run the same ones.

func gcraStep(e entry, exists bool, now int64, p limiter.GCRAParams) (entry, limiter.Outcome, error) {
	st, out, err := limiter.GCRA(limiter.GCRAState{TAT: e.a}, exists, now, p)
	e.a = st.TAT
	return e, out, err
}

func tokenBucketStep(e entry, exists bool, now int64, r limiter.TokenBucketRequest) (entry, limiter.Outcome, error) {
	st, out, err := limiter.TokenBucket(limiter.TokenBucketState{FullAt: e.a, Rem: e.b}, exists, now, r)
	e.a, e.b = st.FullAt, st.Rem
	return e, out, err
}

func slidingLogStep(e entry, _ bool, now int64, r limiter.SlidingWindowRequest) (entry, limiter.Outcome, error) {
	hits, out, err := limiter.SlidingLog(e.log, now, r)
	e.log = hits
	return e, out, err
}

func slidingWindowStep(e entry, exists bool, now int64, r limiter.SlidingWindowRequest) (entry, limiter.Outcome, error) {
	st, out, err := limiter.SlidingWindow(limiter.SlidingWindowState{Start: e.a, Prev: e.b, Curr: e.c}, exists, now, r)
	e.a, e.b, e.c = st.Start, st.Prev, st.Curr
	return e, out, err
}

func fixedWindowStep(e entry, exists bool, now int64, r limiter.FixedWindowRequest) (entry, limiter.Outcome, error) {
	st, out, err := limiter.FixedWindow(limiter.FixedWindowState{Start: e.a, Count: e.b}, exists, now, r)
	e.a, e.b = st.Start, st.Count
	return e, out, err
}

// Every limiter command takes one path, in two halves around its
// algorithm's step (a function above): findLocked, then finishLocked, both
// under the key's shard lock. (The halves are called directly rather than
// around a step passed as a function value: the indirect call and the
// entry copied in and out of it cost about a tenth of a request.)

// findLocked finds key (hash h) in sh for a command of kind kind at now:
// its slot i (-1: none), its entry e (zero but for its kind and, for a
// sliding log, an empty log with room to grow, when there is no key), and
// whether it exists. It refuses a key of another kind (ErrWrongType).
func (v *View) findLocked(sh *shard, key []byte, h uint64, kind Kind, now int64) (int, entry, bool, error) {
	i, e, ok := sh.getLocked(key, h, unixMs(now))
	sh.countLookup(ok)
	if ok && e.kind != kind {
		return -1, entry{}, false, ErrWrongType
	}
	if ok && Policy(v.e.limit.policy.Load()) == EvictLRU {
		sh.t.touch(i) // for eviction: see victimLocked
	}
	e.kind = kind
	if kinds[kind].log {
		e.log = sh.t.logAt(i) // none if i < 0; room for the hit the step may add
	}
	return i, e, ok, nil
}

// slidingLog applies SW.HIT EXACT r to key: in the key's record when it
// can (shard.inPlaceLocked), else by the path every command takes.
func (v *View) slidingLog(key []byte, r limiter.SlidingWindowRequest) (limiter.Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.e.clock.Now()
	i, e, ok := sh.getLocked(key, h, unixMs(now))
	sh.countLookup(ok)
	if ok && e.kind != KindSlidingLog {
		return limiter.Result{}, ErrWrongType
	}
	if ok && Policy(v.e.limit.policy.Load()) == EvictLRU {
		sh.t.touch(i) // for eviction: see victimLocked
	}
	if ok {
		if res, done, err := sh.inPlaceLocked(key, h, i, now, r); done {
			return res, err
		}
	}
	e.kind, e.log = KindSlidingLog, sh.t.logAt(i)
	e, out, err := slidingLogStep(e, ok, now, r)
	return v.finishLocked(sh, key, h, i, e, ok, now, out, err)
}

// finishLocked is the second half of every limiter command: given what
// its step returned for the entry e of key (hash h) in slot i (ok: it
// existed), it stores or removes the key as out says and counts the
// request; err, the step's, is returned as it is.
func (v *View) finishLocked(sh *shard, key []byte, h uint64, i int, e entry, ok bool, now int64, out limiter.Outcome, err error) (limiter.Result, error) {
	kind := e.kind
	if err != nil {
		return limiter.Result{}, err
	}
	switch out.Write {
	case limiter.WriteStore:
		e.expireMs = out.ExpireMs
		if i < 0 && v.e.overLimit() {
			if err := sh.makeRoomLocked(Policy(v.e.limit.policy.Load()), recordLen(key, e, max(len(e.log), 2))); err != nil {
				return limiter.Result{}, err
			}
		}
		if err := sh.putLocked(key, h, i, e); err != nil {
			return limiter.Result{}, err
		}
	case limiter.WriteDelete:
		if ok {
			sh.removeLocked(i)
		}
	}
	if out.Result.Limited {
		sh.limited[kind]++
		if sh.top == nil {
			sh.top = new(topK) // once per shard
		}
		sh.top.addLocked(key, h, kind, now)
	} else {
		sh.allowed[kind]++
	}
	return out.Result, nil
}

// lookup returns key's live entry, taking its shard's lock as needed.
func (v *View) lookup(key []byte) (entry, bool, int64) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	nowMs := unixMs(v.e.clock.Now())
	_, e, ok := sh.getLocked(key, h, nowMs)
	sh.countLookup(ok)
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
	i, _, ok := sh.getLocked(key, h, unixMs(v.e.clock.Now()))
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
		sh.reapLocked(unixMs(v.e.clock.Now()))
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

// Scan returns about count live keys from cursor on, and the cursor to
// continue from (0 when done). The cursor is a shard index times 2³² plus
// a slot tag within the shard (scan.go), so a call steps within a shard:
// it passes about count records (fewer are returned when keep or want
// filter some out, as with Redis's MATCH and TYPE) and visits at most
// about 10·count slots, holding one shard's lock at a time. A key that
// exists for the whole of a scan is returned exactly once, even if tables
// grow or shrink in between (Redis promises at least once). keep is as
// for Keys.
func (v *View) Scan(cursor uint64, count int, keep func(key []byte) bool, want Kind) (uint64, [][]byte) {
	var out [][]byte
	shard, from := cursor>>32, cursor&(tagEnd-1)
	shards := uint64(len(v.e.shards))
	for work, budget := 0, 10*count; shard < shards && work < budget; {
		next, passed, visited := v.scanShard(int(shard), from, count, keep, want, &out)
		work += visited
		count -= passed
		if next == tagEnd {
			shard, from = shard+1, 0
		} else {
			from = next
		}
		if count <= 0 {
			break
		}
	}
	if shard >= shards {
		return 0, out
	}
	return shard<<32 | from, out
}

// scanShard runs one step of Scan in shard i: it appends copies of the
// live keys it passes that keep and want accept to out, and returns the
// tag to continue from, how many records it passed and how many slots it
// visited.
func (v *View) scanShard(i int, from uint64, count int, keep func([]byte) bool, want Kind, out *[][]byte) (next uint64, passed, visited int) {
	sh := &v.e.shards[i]
	v.lock(sh)
	defer v.unlock(sh)
	nowMs := unixMs(v.e.clock.Now())
	next, visited = sh.t.scanFrom(from, count, func(j int) {
		passed++
		e := sh.t.entryAt(j)
		if nowMs > e.expireMs || want != KindNone && e.kind != want {
			return
		}
		k := sh.t.keyOf(uint32(sh.t.slots[j]))
		if keep == nil || keep(k) {
			*out = append(*out, append([]byte(nil), k...))
		}
	})
	return next, passed, visited
}

func (v *View) shardKeys(i int, keep func([]byte) bool, want Kind) [][]byte {
	sh := &v.e.shards[i]
	v.lock(sh)
	defer v.unlock(sh)
	var out [][]byte
	sh.keysLocked(unixMs(v.e.clock.Now()), func(k []byte, e entry) {
		if (want == KindNone || e.kind == want) && (keep == nil || keep(k)) {
			out = append(out, append([]byte(nil), k...))
		}
	})
	return out
}
