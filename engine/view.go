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
	only []uint64 // when held: the shards held, a bit each; nil: all
}

// NewView returns a View of the engine, as its own View is.
func (e *Engine) NewView() *View { return &View{e: e} }

// At is what a call on a key brings besides the key and its arguments:
// where the key was located ahead of the call, and when the call happens.
// The zero At locates the key and reads the engine's clock.
type At struct {
	// Hint is the key as the engine's read-ahead located it (Ahead's
	// Locate), for the very bytes of the call's key; the zero Hint, or
	// one made for other bytes or by another engine, is not used.
	Hint ahead.Hint
	// Mono, when not 0, is the instant of the call as a reading of the
	// monotonic clock (mono.Now) that the caller took anyway, so that the
	// call need not read the clock again. A server passes the reading
	// taken when a batch of requests arrived, renewed at least every few
	// dozen requests: the requests of a batch are then decided at one
	// instant, as if they had arrived together, which they did. It
	// applies only with the engine's SystemClock: any other clock (DEBUG
	// CLOCK's) is read per call, so a clock set in the middle of a
	// pipeline shows at once.
	Mono int64
}

// now is the time of a call at at (nil: now).
func (v *View) now(at *At) int64 {
	if at != nil && at.Mono != 0 && v.e.sys != nil {
		return v.e.sys.At(at.Mono)
	}
	return v.e.clock.Now()
}

// locate returns key's shard and hash, from at's Hint when it was made
// for key.
func (v *View) locate(key []byte, at *At) (*shard, uint64) {
	if at != nil && at.Hint.Owner != 0 {
		if s := v.e.shardOfHint(&at.Hint); s != nil && at.Hint.Of(key) {
			return s, at.Hint.Hash
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

// Apply runs the limiter call r, parsed and validated (limiter.Parse),
// on key at at (nil: locate key, read the clock): it finds the key,
// refusing one of another kind (ErrWrongType), runs r's algorithm
// (limiter.Apply) on its state, stores or removes the key as the
// algorithm says, and counts the request as allowed or limited. A new key
// at the memory limit makes room first, or is refused (ErrOOM).
func (v *View) Apply(key []byte, r *limiter.Request, at *At) (limiter.Result, error) {
	sh, h := v.locate(key, at)
	v.lock(sh)
	defer v.unlock(sh)
	now := v.now(at)
	var o op
	o.slot, o.exists = sh.getLocked(key, h, unixMs(now), &o.e)
	sh.countLookup(o.exists)
	if o.exists {
		if o.e.kind != r.Kind {
			return limiter.Result{}, ErrWrongType
		}
		if Policy(v.e.limit.policy.Load()) == EvictLRU {
			sh.t.touch(o.slot) // for eviction: see victimLocked
		}
		if r.Kind == limiter.KindSlidingLog {
			if res, done, err := sh.inPlaceLocked(key, h, o.slot, now, r.SlidingWindow); done {
				return res, err
			}
		}
	}
	o.e.kind = r.Kind
	if limiter.Kinds[r.Kind].Log {
		o.e.Log = sh.t.logAt(o.slot) // none if there is no key; room for the hit the call may add
	}
	if err := limiter.Apply(&o.e.State, o.exists, now, r, &o.out); err != nil {
		return limiter.Result{}, err
	}
	return v.finishLocked(sh, key, h, now, &o)
}

// op is one limiter call's state under its shard's lock: the key's slot
// (-1: none), whether the key exists, its entry, and what the algorithm
// did. It lives on Apply's stack and is passed by pointer.
type op struct {
	slot   int
	exists bool
	e      entry
	out    limiter.Outcome
}

// finishLocked is the second half of every limiter call: given o, which
// the algorithm filled for key (hash h), it stores or removes the key as
// o.out says and counts the request.
func (v *View) finishLocked(sh *shard, key []byte, h uint64, now int64, o *op) (limiter.Result, error) {
	kind := o.e.kind
	switch o.out.Write {
	case limiter.WriteStore:
		o.e.expireMs = o.out.ExpireMs
		if o.slot < 0 && v.e.overLimit() {
			if err := sh.makeRoomLocked(Policy(v.e.limit.policy.Load()), recordLen(key, &o.e, max(len(o.e.Log), 2))); err != nil {
				return limiter.Result{}, err
			}
		}
		if err := sh.putLocked(key, h, o.slot, &o.e); err != nil {
			return limiter.Result{}, err
		}
	case limiter.WriteDelete:
		if o.exists {
			sh.removeLocked(o.slot)
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

// lookup returns key's live entry at at, taking its shard's lock as
// needed.
func (v *View) lookup(key []byte, at *At) (entry, bool, int64) {
	sh, h := v.locate(key, at)
	v.lock(sh)
	defer v.unlock(sh)
	nowMs := unixMs(v.now(at))
	var e entry
	_, ok := sh.getLocked(key, h, nowMs, &e)
	sh.countLookup(ok)
	return e, ok, nowMs
}

// Get returns the TAT stored under a CL.THROTTLE key (what GET replies),
// false when there is no key, and ErrWrongType for another kind. Like
// every call on one key, it takes an At (nil: the zero At).
func (v *View) Get(key []byte, at *At) (int64, bool, error) {
	e, ok, _ := v.lookup(key, at)
	if !ok {
		return 0, false, nil
	}
	if e.kind != limiter.KindGCRA {
		return 0, false, ErrWrongType
	}
	return e.Words[0], true, nil
}

// Type returns the kind of key, limiter.KindNone when it does not exist.
func (v *View) Type(key []byte, at *At) limiter.Kind {
	e, _, _ := v.lookup(key, at)
	return e.kind
}

// Exists reports whether key exists.
func (v *View) Exists(key []byte, at *At) bool {
	_, ok, _ := v.lookup(key, at)
	return ok
}

// PTTL returns key's remaining time to live in ms, or -2 when it does not
// exist. (Every key cellserver holds has an expiry.)
func (v *View) PTTL(key []byte, at *At) int64 {
	e, ok, nowMs := v.lookup(key, at)
	if !ok {
		return -2
	}
	return e.expireMs - nowMs
}

// Del removes key and reports whether it existed.
func (v *View) Del(key []byte, at *At) bool {
	sh, h := v.locate(key, at)
	v.lock(sh)
	defer v.unlock(sh)
	var e entry
	i, ok := sh.getLocked(key, h, unixMs(v.e.clock.Now()), &e)
	if ok {
		sh.removeLocked(i)
	}
	return ok
}

// DBSize returns the number of keys held: the live keys, and those that
// have expired but are not reclaimed yet (invisible to every other call;
// the background sweep reclaims them, keeping up with a mass expiry
// within a few ticks), as Redis's DBSIZE counts them. It reads each
// shard's count under its lock, one at a time: O(shards), whatever the
// number of keys.
func (v *View) DBSize() int64 {
	var n int64
	for i := range v.e.shards {
		sh := &v.e.shards[i]
		v.lock(sh)
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

// keysChunk is how many records Keys and SlotKeys pass under one hold of
// a shard's lock (visiting at most ten times as many slots), so that a
// walk of a shard of any size keeps no request waiting for long.
const keysChunk = 1024

// Keys calls fn with every live key that keep accepts (nil: all) and whose
// kind is want (limiter.KindNone: any). It walks each shard a chunk at a
// time (keysChunk records), letting go of the lock between chunks, with
// SCAN's cursor: a key that exists for the whole walk is passed exactly
// once; one added or removed during it may or may not be. Keys are copied
// before fn is called, which may keep them. keep runs under the lock on
// the table's own bytes: it must neither retain its key nor use v.
func (v *View) Keys(keep func(key []byte) bool, want limiter.Kind, fn func(key []byte)) {
	var out [][]byte
	for i := range v.e.shards {
		for from := uint64(0); from < tagEnd; {
			out = out[:0]
			from, _, _ = v.scanShard(i, from, keysChunk, keep, want, &out)
			for _, k := range out {
				fn(k)
			}
		}
	}
}

// SlotKeys calls fn with the live keys of hash slot slot, at most max of
// them (max < 0: all), and returns how many it passed. It walks the slot's
// shard a chunk at a time, as Keys does. fn gets a copy, which it may
// keep.
func (v *View) SlotKeys(slot, max int, fn func(key []byte)) int {
	if slot < 0 || slot >= SlotCount || max == 0 {
		return 0
	}
	i := v.e.shardOf(slot).idx
	keep := func(k []byte) bool { return Slot(k) == slot }
	n := 0
	var out [][]byte
	for from := uint64(0); from < tagEnd; {
		out = out[:0]
		from, _, _ = v.scanShard(i, from, keysChunk, keep, limiter.KindNone, &out)
		for _, k := range out {
			fn(k)
			if n++; n == max {
				return n
			}
		}
	}
	return n
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
func (v *View) Scan(cursor uint64, count int, keep func(key []byte) bool, want limiter.Kind) (uint64, [][]byte) {
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
func (v *View) scanShard(i int, from uint64, count int, keep func([]byte) bool, want limiter.Kind, out *[][]byte) (next uint64, passed, visited int) {
	sh := &v.e.shards[i]
	v.lock(sh)
	defer v.unlock(sh)
	nowMs := unixMs(v.now(nil))
	next, visited = sh.t.scanFrom(from, count, false, func(j int) {
		passed++
		e := sh.t.entryAt(j)
		if nowMs > e.expireMs || want != limiter.KindNone && e.kind != want {
			return
		}
		k := sh.t.keyOf(uint32(sh.t.slots[j]))
		if keep == nil || keep(k) {
			*out = append(*out, append([]byte(nil), k...))
		}
	})
	return next, passed, visited
}
