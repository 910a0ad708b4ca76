package engine

import (
	"errors"
	"hash/maphash"
	"runtime"
	"sync"
	"time"

	"github.com/cellserver/cellserver/internal/manual"
	"github.com/cellserver/cellserver/limiter"
)

// Config configures an Engine. The zero value is a valid configuration.
type Config struct {
	// Shards is the number of shards, a power of two from 1 to SlotCount.
	// Each shard has its own lock and owns SlotCount/Shards hash slots.
	// Default: 256.
	Shards int
	// Clock tells the time. Default: a SystemClock, synced on every sweep tick.
	Clock Clock
	// SweepInterval is how often the background sweep runs. Default: 100ms.
	SweepInterval time.Duration
	// SweepBudget is the most entries one round of a sweep tick examines
	// across all shards; a tick repeats its round while it finds many
	// expired (sweep.go). Default: 65536.
	SweepBudget int
	// TrackChanges makes the engine remember which keys changed or were
	// removed since the last TakeDirty, for incremental snapshots
	// (dirty.go). Default: false, and TakeDirty reports no changes.
	TrackChanges bool
}

// DefaultShards is Config.Shards' default.
const DefaultShards = 256

// ErrBadShards reports a Config.Shards that is not a power of two in range.
var ErrBadShards = errors.New("engine: shards must be a power of two from 1 to 16384")

// ValidShards reports whether n shards is a valid Config.Shards: a power
// of two from 1 to SlotCount.
func ValidShards(n int) bool { return n >= 1 && n <= SlotCount && n&(n-1) == 0 }

// EnsureDefaults fills the zero fields of c with their defaults.
func (c *Config) EnsureDefaults() {
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.Clock == nil {
		c.Clock = NewSystemClock()
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = 100 * time.Millisecond
	}
	if c.SweepBudget == 0 {
		c.SweepBudget = 65536
	}
}

// Validate reports the first setting of c that is out of range.
func (c *Config) Validate() error {
	if !ValidShards(c.Shards) {
		return ErrBadShards
	}
	if c.SweepInterval < 0 || c.SweepBudget < 0 {
		return errors.New("engine: sweep settings must not be negative")
	}
	return nil
}

// Engine is the sharded limiter store. Its methods are safe for concurrent
// use; each takes the lock of the one shard its key lives in, except the
// keyspace-wide ones (Keys, Scan, DBSize, Flush), which take the shard locks
// one at a time, and hold each for a bounded amount of work (Keys and Scan
// walk a shard a chunk at a time). Atomic runs a function with every shard
// locked.
type Engine struct {
	View // unlocked view: every call takes its shard's lock

	cfg    Config
	shards []shard
	mem    *manual.Allocator // the shards' large arrays, outside the Go heap
	limit  memoryLimit
	clock  Clock
	sys    *SystemClock // clock, when it is the SystemClock: At.Mono applies
	seed   maphash.Seed // for keys' hashes inside a shard
	id     uint64       // tells this engine's read-ahead hints from others' (prefetch.go); never 0

	sweepMu   sync.Mutex // serializes sweeps; guards sweepNext
	sweepNext int        // the shard the next sweep tick starts at
	stop      chan struct{}
	done      chan struct{}
}

// New returns an engine for cfg (defaults filled in), or cfg's error.
// Call Start to run the background expiry sweep and Close to stop it.
func New(cfg Config) (*Engine, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, clock: cfg.Clock, shards: make([]shard, cfg.Shards), mem: new(manual.Allocator), seed: maphash.MakeSeed()}
	e.id = maphash.String(e.seed, "cellserver engine") | 1
	e.sys, _ = cfg.Clock.(*SystemClock)
	for i := range e.shards {
		sh := &e.shards[i]
		sh.t.mem = e.mem
		if cfg.TrackChanges {
			sh.track, sh.t.dirtyBit = true, headDirty
		}
		sh.idx = i
		sh.rng = uint64(i)*0x9e3779b97f4a7c15 | 1
	}
	e.View = View{e: e}
	runtime.AddCleanup(e, releaseShards, e.shards)
	return e, nil
}

// releaseShards frees the tables of an engine no longer reachable: the
// collector does not free their mapped arrays.
func releaseShards(shards []shard) {
	for i := range shards {
		sh := &shards[i]
		sh.mu.Lock()
		sh.t.reset()
		sh.mu.Unlock()
	}
}

// OffHeapBytes returns the bytes the engine's tables hold outside the Go
// heap, which runtime.MemStats does not count. It takes no lock.
func (e *Engine) OffHeapBytes() int64 { return e.mem.Mapped() }

// Clock returns the engine's clock.
func (e *Engine) Clock() Clock { return e.clock }

// Shards returns the number of shards.
func (e *Engine) Shards() int { return len(e.shards) }

// shardOf returns the shard that owns slot.
func (e *Engine) shardOf(slot int) *shard {
	return &e.shards[slot&(len(e.shards)-1)]
}

func (e *Engine) shardFor(key []byte) *shard { return e.shardOf(Slot(key)) }

// hash is a key's hash inside its shard's table, seeded per engine so that
// clients cannot choose colliding keys.
func (e *Engine) hash(key []byte) uint64 { return maphash.Bytes(e.seed, key) }

// Atomic runs fn with every shard locked, so that everything fn does
// through tx happens at one instant for every other client (MULTI/EXEC).
// tx must not be used after fn returns.
func (e *Engine) Atomic(fn func(tx *View)) {
	for i := range e.shards {
		e.shards[i].mu.Lock()
	}
	defer func() {
		for i := range e.shards {
			e.shards[i].mu.Unlock()
		}
	}()
	tx := &View{e: e, held: true}
	fn(tx)
	tx.e = nil
}

// AtomicKeys runs fn with the shards of keys locked, in shard order, so
// that everything fn does through tx to those keys happens at one instant
// for every other client (MULTI/EXEC); the other shards stay free. With
// all, every shard is locked, as Atomic does: for keyspace-wide commands
// (KEYS, SCAN, DBSIZE, FLUSHALL). A call through tx on a key whose shard
// is not held takes and releases that shard's lock for the call, like the
// engine's own View. tx must not be used after fn returns.
func (e *Engine) AtomicKeys(keys [][]byte, all bool, fn func(tx *View)) {
	if all {
		e.Atomic(fn)
		return
	}
	set := make([]uint64, (len(e.shards)+63)/64)
	for _, k := range keys {
		i := e.shardFor(k).idx
		set[i/64] |= 1 << (i % 64)
	}
	for i := range e.shards { // in shard order: two transactions never wait on each other in a cycle
		if set[i/64]&(1<<(i%64)) != 0 {
			e.shards[i].mu.Lock()
		}
	}
	defer func() {
		for i := range e.shards {
			if set[i/64]&(1<<(i%64)) != 0 {
				e.shards[i].mu.Unlock()
			}
		}
	}()
	tx := &View{e: e, held: true, only: set}
	fn(tx)
	tx.e = nil
}

// Start runs the background expiry sweep until Close.
func (e *Engine) Start() {
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	if e.stop != nil {
		return
	}
	e.stop, e.done = make(chan struct{}), make(chan struct{})
	go e.sweepLoop(e.stop, e.done)
}

// Close stops the background sweep and waits for it to end. The engine's
// data stays readable.
func (e *Engine) Close() error {
	e.sweepMu.Lock()
	stop, done := e.stop, e.done
	e.stop = nil
	e.sweepMu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	return nil
}

func (e *Engine) sweepLoop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(e.cfg.SweepInterval)
	defer t.Stop()
	sys, _ := e.clock.(*SystemClock)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if sys != nil {
				sys.Sync() // a step of the system clock shows from here on
			}
			e.sweepTick(e.cfg.SweepBudget, &pacer{slice: sweepSlice, pause: sweepPause, total: sweepTickWork})
		}
	}
}

// Stats are the engine's counters, summed over shards.
type Stats struct {
	Keys        int64
	TableBytes  int64 // memory held by the shards' tables, off-heap arrays included
	ExpiredKeys int64 // removed because they expired, lazily or by sweep
	// KeyspaceHits and KeyspaceMisses count commands' lookups of a key
	// (every limiter request, GET, TTL, PTTL, TYPE, EXISTS) that found it
	// and that did not (or found it expired).
	KeyspaceHits, KeyspaceMisses int64
	// AvgTTL is the estimated average remaining life of the keys, in ms,
	// sampled by the expiry sweep as Redis's active expiry samples it; 0
	// before the sweep has seen a live key.
	AvgTTL      int64
	EvictedKeys int64 // removed to make room under the memory limit
	Allowed     [limiter.NumKinds]int64
	Limited     [limiter.NumKinds]int64
	KeysByKind  [limiter.NumKinds]int64
}

// Stats sums the shards' counters, one shard's lock at a time: O(shards).
// Key counts include keys that have expired but are not reclaimed yet (the
// sweep reclaims them within a few ticks), as DBSize's do.
func (v *View) Stats() Stats {
	var s Stats
	var ttlWeighted, sampled int64 // the shards' averages weighed by their keys
	for i := range v.e.shards {
		sh := &v.e.shards[i]
		v.lock(sh)
		s.Keys += int64(sh.t.count)
		s.TableBytes += int64(sh.t.memory())
		s.ExpiredKeys += sh.expired
		s.KeyspaceHits += sh.hits
		s.KeyspaceMisses += sh.misses
		ttlWeighted += sh.avgTTL * int64(sh.t.count)
		if sh.avgTTL > 0 {
			sampled += int64(sh.t.count)
		}
		s.EvictedKeys += sh.evicted
		for k := range s.Allowed {
			s.Allowed[k] += sh.allowed[k]
			s.Limited[k] += sh.limited[k]
			s.KeysByKind[k] += sh.kinds[k]
		}
		v.unlock(sh)
	}
	if sampled > 0 {
		s.AvgTTL = ttlWeighted / sampled
	}
	return s
}

// ResetStats zeroes the keyspace hits and misses (CONFIG RESETSTAT).
func (v *View) ResetStats() {
	for i := range v.e.shards {
		sh := &v.e.shards[i]
		v.lock(sh)
		sh.hits, sh.misses = 0, 0
		v.unlock(sh)
	}
}
