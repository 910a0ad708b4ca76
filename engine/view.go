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
	sys  *SystemClock
	at   int64 // when nonzero: the monotonic reading the next call's time is (see At)
}

// NewView returns a View of its own, for one client: one whose Ahead and
// At may be used.
func (e *Engine) NewView() *View {
	v := &View{e: e}
	v.sys, _ = e.clock.(*SystemClock)
	return v
}

// At tells the View that its calls happen at the instant the monotonic
// clock (mono.Now) read m, a reading the caller took anyway, so that they
// need not read the clock again; 0 goes back to reading it per call. A
// server that times its requests passes the reading taken when a batch of
// them arrived (commands.Client.Mark), renewed at least every few dozen
// requests: the requests of a batch are then decided at one instant, as
// if they had arrived together, which they did. It applies only with the
// engine's SystemClock: any other clock (DEBUG CLOCK's) is read per call,
// as before, so a clock set in the middle of a pipeline shows at once.
func (v *View) At(m int64) {
	if v.sys != nil {
		v.at = m
	}
}

// now is the time of a call: At's instant, or the clock's.
func (v *View) now() int64 {
	if v.at != 0 {
		return v.sys.At(v.at)
	}
	return v.e.clock.Now()
}

// locate returns key's shard and hash, from the expected Hint when it was
// made for key.
func (v *View) locate(key []byte) (*shard, uint64) {
	if h := v.hint; h.Owner != 0 { // never set on a shared View: see Ahead
		v.hint = ahead.Hint{}
		if s := v.e.shardOfHint(&h); s != nil && h.Of(key) {
			return s, h.Hash
		}
	}
	return v.e.shardFor(key), v.e.hash(key)
}

func (v *View) lock(s *shard) {
	if !v.held || !v.holds(s) {
		s.lock()
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
	now := v.now()
	var o op
	if err := v.findLocked(sh, key, h, KindGCRA, now, &o); err != nil {
		return limiter.Result{}, err
	}
	return v.finishLocked(sh, key, h, now, &o, gcraStep(&o, now, p))
}

// TokenBucket applies TB.TAKE with a validated request r to key.
func (v *View) TokenBucket(key []byte, r limiter.TokenBucketRequest) (limiter.Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.now()
	var o op
	if err := v.findLocked(sh, key, h, KindTokenBucket, now, &o); err != nil {
		return limiter.Result{}, err
	}
	return v.finishLocked(sh, key, h, now, &o, tokenBucketStep(&o, now, r))
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
	now := v.now()
	var o op
	if err := v.findLocked(sh, key, h, KindSlidingWindow, now, &o); err != nil {
		return limiter.Result{}, err
	}
	return v.finishLocked(sh, key, h, now, &o, slidingWindowStep(&o, now, r))
}

// FixedWindow applies FW.INCR with a validated request r to key.
func (v *View) FixedWindow(key []byte, r limiter.FixedWindowRequest) (limiter.Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.now()
	var o op
	if err := v.findLocked(sh, key, h, KindFixedWindow, now, &o); err != nil {
		return limiter.Result{}, err
	}
	return v.finishLocked(sh, key, h, now, &o, fixedWindowStep(&o, now, r))
}

// The steps of the four commands: each moves a key's state between its
// entry and its algorithm's state type. The single-key methods above and
// ApplyAll (multi.go) run the same ones.

func gcraStep(o *op, now int64, p limiter.GCRAParams) error {
	st, out, err := limiter.GCRA(limiter.GCRAState{TAT: o.e.a}, o.ok, now, p)
	o.e.a, o.out = st.TAT, out
	return err
}

func tokenBucketStep(o *op, now int64, r limiter.TokenBucketRequest) error {
	st, out, err := limiter.TokenBucket(limiter.TokenBucketState{FullAt: o.e.a, Rem: o.e.b}, o.ok, now, r)
	o.e.a, o.e.b, o.out = st.FullAt, st.Rem, out
	return err
}

func slidingLogStep(o *op, now int64, r limiter.SlidingWindowRequest) error {
	hits, out, err := limiter.SlidingLog(o.e.log, now, r)
	o.e.log, o.out = hits, out
	return err
}

func slidingWindowStep(o *op, now int64, r limiter.SlidingWindowRequest) error {
	st, out, err := limiter.SlidingWindow(limiter.SlidingWindowState{Start: o.e.a, Prev: o.e.b, Curr: o.e.c}, o.ok, now, r)
	o.e.a, o.e.b, o.e.c, o.out = st.Start, st.Prev, st.Curr, out
	return err
}

func fixedWindowStep(o *op, now int64, r limiter.FixedWindowRequest) error {
	st, out, err := limiter.FixedWindow(limiter.FixedWindowState{Start: o.e.a, Count: o.e.b}, o.ok, now, r)
	o.e.a, o.e.b, o.out = st.Start, st.Count, out
	return err
}

// Every limiter command takes one path, in two halves around its
// algorithm's step (a function above): findLocked, then finishLocked, both
// under the key's shard lock. The halves are called directly rather than
// around a step passed as a function value, and they share one op on the
// caller's stack by pointer: the indirect call, and the entry and outcome
// copied in and out of each function by value, cost a fifth of a pipelined
// request (bench/RESULTS.md).

// op is one limiter command's state between its halves: the key's slot i
// (-1: none), whether it exists, its entry e, and the step's outcome.
type op struct {
	i   int
	ok  bool
	e   entry
	out limiter.Outcome
}

// findLocked finds key (hash h) in sh for a command of kind kind at now
// and fills o: the key's slot, whether it exists, and its entry (zero but
// for its kind and, for a sliding log, an empty log with room to grow,
// when there is no key). It refuses a key of another kind (ErrWrongType).
func (v *View) findLocked(sh *shard, key []byte, h uint64, kind Kind, now int64, o *op) error {
	o.i, o.ok = sh.getLocked(key, h, unixMs(now), &o.e)
	sh.countLookup(o.ok)
	if o.ok && o.e.kind != kind {
		return ErrWrongType
	}
	if o.ok && Policy(v.e.limit.policy.Load()) == EvictLRU {
		sh.t.touch(o.i) // for eviction: see victimLocked
	}
	o.e.kind = kind
	if kinds[kind].log {
		o.e.log = sh.t.logAt(o.i) // none if i < 0; room for the hit the step may add
	}
	return nil
}

// slidingLog applies SW.HIT EXACT r to key: in the key's record when it
// can (shard.inPlaceLocked), else by the path every command takes.
func (v *View) slidingLog(key []byte, r limiter.SlidingWindowRequest) (limiter.Result, error) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.now()
	var o op
	o.i, o.ok = sh.getLocked(key, h, unixMs(now), &o.e)
	sh.countLookup(o.ok)
	if o.ok && o.e.kind != KindSlidingLog {
		return limiter.Result{}, ErrWrongType
	}
	if o.ok && Policy(v.e.limit.policy.Load()) == EvictLRU {
		sh.t.touch(o.i) // for eviction: see victimLocked
	}
	if o.ok {
		if res, done, err := sh.inPlaceLocked(key, h, o.i, now, r); done {
			return res, err
		}
	}
	o.e.kind, o.e.log = KindSlidingLog, sh.t.logAt(o.i)
	return v.finishLocked(sh, key, h, now, &o, slidingLogStep(&o, now, r))
}

// finishLocked is the second half of every limiter command: given o,
// which its step filled for key (hash h), and err, the step's, it stores
// or removes the key as o.out says and counts the request; err is
// returned as it is.
func (v *View) finishLocked(sh *shard, key []byte, h uint64, now int64, o *op, err error) (limiter.Result, error) {
	if err != nil {
		return limiter.Result{}, err
	}
	kind := o.e.kind
	switch o.out.Write {
	case limiter.WriteStore:
		o.e.expireMs = o.out.ExpireMs
		if o.i < 0 && v.e.overLimit() {
			if err := sh.makeRoomLocked(Policy(v.e.limit.policy.Load()), recordLen(key, &o.e, max(len(o.e.log), 2))); err != nil {
				return limiter.Result{}, err
			}
		}
		if err := sh.putLocked(key, h, o.i, &o.e); err != nil {
			return limiter.Result{}, err
		}
	case limiter.WriteDelete:
		if o.ok {
			sh.removeLocked(o.i)
		}
	}
	if o.out.Result.Limited {
		sh.limited[kind]++
		if sh.top == nil {
			sh.top = new(topK) // once per shard
		}
		sh.top.addLocked(key, h, kind, now)
	} else {
		sh.allowed[kind]++
	}
	return o.out.Result, nil
}

// lookup returns key's live entry, taking its shard's lock as needed.
func (v *View) lookup(key []byte) (entry, bool, int64) {
	sh, h := v.locate(key)
	v.lock(sh)
	defer v.unlock(sh)
	nowMs := unixMs(v.now())
	var e entry
	_, ok := sh.getLocked(key, h, nowMs, &e)
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
	var e entry
	i, ok := sh.getLocked(key, h, unixMs(v.e.clock.Now()), &e)
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
	nowMs := unixMs(v.now())
	next, visited = sh.t.scanFrom(from, count, false, func(j int) {
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
