package persist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FormatVersion is the version of the on-disk format this package writes
// and reads. Open refuses a store of any other version.
const FormatVersion = 1

// Errors Open, Snapshot and Restore return, wrapped with details; test
// them with errors.Is.
var (
	// ErrUnknownFormat reports a store of a format version this build does
	// not know (written by a newer cellserver, or not cellserver's).
	ErrUnknownFormat = errors.New("persist: unknown store format version")
	// ErrCorrupt reports a store whose content cannot be read back.
	ErrCorrupt = errors.New("persist: unreadable store")
	// ErrClosed reports a call on a closed Store.
	ErrClosed = errors.New("persist: closed")
)

// Options configure a Store. The zero value is a valid configuration.
type Options struct {
	// FS is the filesystem the store lives on. Default: the operating
	// system's (vfs.Default). Tests use vfs.NewMem().
	FS vfs.FS
	// CacheBytes is the size of Pebble's block cache. Default: 8 MiB
	// (restores read the store once, sequentially: a cache helps little).
	CacheBytes int64
	// Logf receives the store's log lines. Default: none.
	Logf func(format string, args ...any)
}

// EnsureDefaults fills the zero fields of o with their defaults.
func (o *Options) EnsureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = 8 << 20
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Validate reports the first option of o that is out of range.
func (o *Options) Validate() error {
	if o.CacheBytes < 0 {
		return errors.New("persist: CacheBytes must not be negative")
	}
	return nil
}

// Source is what Snapshot reads from: an engine that tracks changes
// (engine.Config.TrackChanges). *engine.Engine implements it.
type Source interface {
	Shards() int
	ShardOf(slot int) int
	TakeDirty(shard int, fn func(r engine.Record, c engine.Change))
}

// Sink is what Restore loads into. *engine.Engine implements it.
type Sink interface {
	// Load stores r unless it has expired, and reports whether it did.
	// Restore calls it from several goroutines at once, each with keys
	// of its own.
	Load(r engine.Record) (bool, error)
}

var (
	_ Source = (*engine.Engine)(nil)
	_ Sink   = (*engine.Engine)(nil)
)

// Keys of the store's own facts; data keys start with a slot < 0x4000.
var (
	formatKey = []byte("\xffformat")
	genKey    = []byte("\xffgeneration")
)

// Store is an open Pebble store of snapshots. Its methods are safe for
// concurrent use; snapshots and restores run one at a time.
type Store struct {
	dir  string
	opts Options

	lock  *pebble.Lock // the directory's lock, held from Open to Close across reopenings
	fatal *fatalNote   // the open instance's: what Pebble gave up on (logger.Fatalf); under mu and dbMu like db

	mu         sync.Mutex // serializes Snapshot, Restore, Close; guards the fields below
	db         *pebble.DB // nil once closed, or after a failed commit until reopened; changed under dbMu too
	pending    ops        // changes taken from the engine and not committed yet
	part       part       // take's scratch: one shard's changes
	ingestFrom int        // pending's size from which a snapshot is ingested as a table
	wedged     bool       // a failed instance could not be closed (shut): no more snapshots
	slots      [][]int    // the slots of each shard, for a flushed shard

	// dbMu keeps db open for a Checkpoint without holding mu, so that
	// snapshots go on while a checkpoint copies files: Checkpoint holds it
	// for reading; closing or replacing db takes it for writing, with mu.
	dbMu   sync.RWMutex
	closed atomic.Bool // Close was called

	// What Pending, LastSave and DiskUsage report, kept apart from mu: a
	// snapshot holds mu while it waits for shard locks, and a MULTI/EXEC
	// holding every shard lock may ask for these (INFO, LASTSAVE).
	infoMu   sync.Mutex
	gen      uint64    // generation of the last committed snapshot
	saved    time.Time // when it was committed; zero: never
	pendingN atomic.Int64
	disk     atomic.Uint64
}

// Open opens the store in dir, creating dir and the store (with the
// current format version) when dir holds none. The store locks dir: one
// process at a time may open it. It returns an error wrapping
// ErrUnknownFormat for a store of another version and ErrCorrupt for one
// it cannot read.
func Open(dir string, opts Options) (*Store, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("persist: create %s: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, opts.FS)
	if err != nil {
		return nil, fmt.Errorf("persist: lock %s: %w", dir, err)
	}
	s := &Store{dir: dir, opts: opts, lock: lock, ingestFrom: ingestFrom}
	// A crash may have left a snapshot's table unwritten or not ingested.
	if err := opts.FS.Remove(opts.FS.PathJoin(dir, ingestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		lock.Close()
		return nil, fmt.Errorf("persist: remove %s: %w", ingestName, err)
	}
	if err := s.open(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

// open opens the Pebble database and checks its format; s.mu is held or s
// is not shared yet.
func (s *Store) open() error {
	cache := pebble.NewCache(s.opts.CacheBytes)
	defer cache.Unref()
	note := &fatalNote{ch: make(chan struct{})}
	po := &pebble.Options{FS: s.opts.FS, Cache: cache, Lock: s.lock, Logger: logger{s.opts.Logf, note}}
	// Every snapshot under churn is one large batch, flushed to a table
	// of L0 that overlaps all the others: with Pebble's default of
	// compacting L0 from 4 such tables, compactions rewrote the store every
	// few seconds and took more CPU than the snapshots themselves. From 16,
	// a compaction merges 16 snapshots' tables at once (a key changed in
	// several is written once); writes stop only at 64.
	po.L0CompactionThreshold, po.L0StopWritesThreshold = l0CompactionThreshold, 64
	// Records are a few dozen bytes of varints, and Pebble already shares
	// key prefixes within a block: Snappy saved little disk for its CPU in
	// every flush and compaction.
	for i := range po.Levels {
		po.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		po.Levels[i].BlockSize = blockSize
	}
	db, err := pebble.Open(s.dir, po)
	if err != nil {
		return fmt.Errorf("persist: open %s: %w", s.dir, err)
	}
	if err := s.checkFormat(db); err != nil {
		db.Close()
		return err
	}
	v, closer, err := db.Get(genKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		db.Close()
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, s.dir, err)
	default:
		if len(v) != 16 {
			closer.Close()
			db.Close()
			return fmt.Errorf("%w: %s: bad generation marker", ErrCorrupt, s.dir)
		}
		s.infoMu.Lock()
		s.gen = binary.BigEndian.Uint64(v)
		s.saved = time.UnixMilli(int64(binary.BigEndian.Uint64(v[8:])))
		s.infoMu.Unlock()
		closer.Close()
	}
	s.dbMu.Lock()
	s.db, s.fatal = db, note
	s.dbMu.Unlock()
	s.disk.Store(db.Metrics().DiskSpaceUsage())
	return nil
}

// checkFormat checks db's format version, writing it into an empty store.
func (s *Store) checkFormat(db *pebble.DB) error {
	v, closer, err := db.Get(formatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		it, err := db.NewIter(nil)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, s.dir, err)
		}
		empty := !it.First()
		it.Close()
		if !empty {
			return fmt.Errorf("%w: %s holds data but no format version", ErrUnknownFormat, s.dir)
		}
		if err := db.Set(formatKey, binary.BigEndian.AppendUint32(nil, FormatVersion), pebble.Sync); err != nil {
			return fmt.Errorf("persist: create store in %s: %w", s.dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, s.dir, err)
	}
	defer closer.Close()
	if len(v) != 4 {
		return fmt.Errorf("%w: %s: bad format version marker", ErrUnknownFormat, s.dir)
	}
	if got := binary.BigEndian.Uint32(v); got != FormatVersion {
		return fmt.Errorf("%w: %s has version %d, this build reads version %d", ErrUnknownFormat, s.dir, got, FormatVersion)
	}
	return nil
}

// Close closes the store. Changes taken from the engine by a snapshot that
// failed are lost, and their memory given back.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		return nil
	}
	err := s.shut()
	s.dir = ""
	s.pending.reset()
	s.closed.Store(true)
	if err != nil {
		// The instance is left open: the lock with it.
		return err
	}
	return s.lock.Close()
}

// closeWait bounds how long shut waits for Pebble to close.
var closeWait = 10 * time.Second

// shut closes the open database, if any, and forgets it; s.mu is held.
// After Pebble gave up on a write (logger.Fatalf), one of its goroutines
// has ended halfway, and closing may wait for it forever: shut waits
// closeWait at most, and then leaves that instance as it is. Its lock
// then stays taken, and opening the store again fails until the process
// restarts (Snapshot says so).
func (s *Store) shut() error {
	s.dbMu.Lock()
	db := s.db
	s.db = nil
	s.dbMu.Unlock()
	if db == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- db.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(closeWait):
		s.wedged = true
		s.opts.Logf("persist: the store did not close within %v after Pebble gave up a write; snapshots are off until the server restarts", closeWait)
		return errWedged
	}
}

// errWedged reports a store whose Pebble instance could not be closed
// after a failure (see shut).
var errWedged = errors.New("persist: the store failed and could not be reopened; snapshots resume after a restart (see the log)")

// dataKey returns the store's key for key: its slot, then its bytes.
func dataKey(buf, key []byte) []byte {
	buf = binary.BigEndian.AppendUint16(buf, uint16(engine.Slot(key)))
	return append(buf, key...)
}

// SlotRange returns the bounds [start, end) of the store's keys in hash
// slot slot, for streaming or dropping one slot's keys.
func SlotRange(slot int) (start, end []byte) {
	return binary.BigEndian.AppendUint16(nil, uint16(slot)), binary.BigEndian.AppendUint16(nil, uint16(slot+1))
}

// SnapshotStats describe one snapshot.
type SnapshotStats struct {
	Generation uint64 // the snapshot's generation (the first is 1)
	Written    int    // records written
	Deleted    int    // keys deleted
	Flushed    int    // shards dropped whole (FLUSHALL)
	Duration   time.Duration
}

// Snapshot writes what changed in src since the previous snapshot and
// commits it atomically, synced to disk, with the next generation and now
// as its time. Each shard's lock is held only while its changes are
// copied. When the commit fails the changes are kept, and the next
// Snapshot writes them with its own: nothing taken from src is lost while
// the store is open.
func (s *Store) Snapshot(src Source, now time.Time) (SnapshotStats, error) {
	start := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		return SnapshotStats{}, ErrClosed
	}
	s.take(src)
	if s.db != nil && s.fatal.fired() {
		// Pebble gave up a write in the background (a flush's or a
		// compaction's): this instance may wait forever for it.
		s.shut()
	}
	if s.wedged {
		return SnapshotStats{}, errWedged
	}
	if s.db == nil { // a commit failed: Pebble may have given up on its log
		if err := s.open(); err != nil {
			return SnapshotStats{}, err
		}
	}
	gen, _ := s.LastSave()
	st := SnapshotStats{Generation: gen + 1, Flushed: s.pending.len() - s.pending.n}
	marker := binary.BigEndian.AppendUint64(nil, st.Generation)
	marker = binary.BigEndian.AppendUint64(marker, uint64(now.UnixMilli()))
	var write writeFunc
	var finish func(error) error
	if s.pending.size() >= s.ingestFrom {
		write, finish = s.tableWriter()
	} else {
		write, finish = s.batchWriter()
	}
	// The snapshot's own work (the take, shard by shard, and writing the
	// changes) yields to the connections every shard and every yieldEvery
	// changes, when the process runs one thread (yield).
	n := 0
	err := s.pending.each(func(shard int) []int { return s.slots[shard] },
		func(lo, hi int) error {
			a, _ := SlotRange(lo)
			_, b := SlotRange(hi - 1)
			return write(opDropRange, a, b)
		},
		func(op byte, k, v []byte) error {
			if n++; n%yieldEvery == 0 {
				yield()
			}
			if op == opPut {
				st.Written++
			} else {
				st.Deleted++
			}
			return write(op, k, v)
		})
	if err == nil {
		err = write(opPut, genKey, marker)
	}
	if err = finish(err); err != nil {
		return SnapshotStats{}, fmt.Errorf("persist: snapshot: %w", err)
	}
	s.pending.reset()
	s.pendingN.Store(0)
	s.infoMu.Lock()
	s.gen, s.saved = st.Generation, now
	s.infoMu.Unlock()
	s.disk.Store(s.db.Metrics().DiskSpaceUsage())
	st.Duration = time.Since(start)
	return st, nil
}

// take copies every shard's changes from src into s.pending, one shard's
// lock at a time; s.mu is held.
func (s *Store) take(src Source) {
	n := src.Shards()
	if len(s.slots) != n {
		s.slots = make([][]int, n)
		for slot := range engine.SlotCount {
			i := src.ShardOf(slot)
			s.slots[i] = append(s.slots[i], slot)
		}
	}
	var key []byte
	for i := range n {
		s.part.reset(i)
		src.TakeDirty(i, func(r engine.Record, c engine.Change) {
			if c == engine.Flushed { // voids what the take brought before it
				s.part.reset(i)
				s.part.flushed = true
				return
			}
			key = dataKey(key[:0], r.Key)
			if c == engine.Removed {
				s.part.add(opDelete, key, nil)
			} else {
				s.part.addRecord(key, r)
			}
		})
		s.pending.addPart(&s.part)
		yield()
	}
	if cap(s.part.buf) > 1<<20 {
		s.part.buf = nil
	}
	s.pendingN.Store(int64(s.pending.len()))
}

// Pending returns the number of changes taken from the engine by failed
// snapshots, which the next snapshot writes.
func (s *Store) Pending() int { return int(s.pendingN.Load()) }

// LastSave returns the generation and time of the last committed snapshot
// (0 and the zero time: none yet).
func (s *Store) LastSave() (uint64, time.Time) {
	s.infoMu.Lock()
	defer s.infoMu.Unlock()
	return s.gen, s.saved
}

// l0CompactionThreshold is the number of L0 sublevels (one per large
// snapshot) from which Pebble compacts L0 (see open).
const l0CompactionThreshold = 16

// Compacting reports whether Pebble is compacting the store, or has enough
// of the snapshots' tables to start: the background work a snapshot leaves.
func (s *Store) Compacting() bool {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return false
	}
	m := s.db.Metrics()
	return m.Compact.NumInProgress > 0 || m.Flush.NumInProgress > 0 || m.Levels[0].Sublevels >= l0CompactionThreshold
}

// DiskUsage returns the bytes the store takes on disk, as Pebble counts
// them: a snapshot's table counts once Pebble has it in a level, which may
// follow the snapshot by a moment (see tableWriter). While the store is
// shut after a failed snapshot, or being closed or reopened, it returns
// the last count, without waiting.
func (s *Store) DiskUsage() uint64 {
	if s.dbMu.TryRLock() {
		if s.db != nil {
			s.disk.Store(s.db.Metrics().DiskSpaceUsage())
		}
		s.dbMu.RUnlock()
	}
	return s.disk.Load()
}

// ErrNotOpen reports a Checkpoint while the store is shut after a failed
// commit; the next snapshot opens it again.
var ErrNotOpen = errors.New("persist: the store is not open after a failed snapshot")

// Checkpoint writes a consistent copy of the store into dir, which must
// not exist (it is created, with its parents, on the store's filesystem):
// a backup taken while the server runs, which Open opens like the store.
// The copy holds every snapshot committed before the call, and possibly
// one committed during it, each whole. Tables are hard-linked where the
// filesystem allows, copied otherwise. Snapshots go on while it copies;
// on failure it removes what it wrote of dir.
func (s *Store) Checkpoint(dir string) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		if s.closed.Load() {
			return ErrClosed
		}
		return ErrNotOpen
	}
	// Pebble refuses a dir that exists (fs.ErrExist).
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("persist: checkpoint: %w", err)
	}
	return nil
}

// RestoreStats describe one restore.
type RestoreStats struct {
	Loaded   int // records loaded into the engine
	Expired  int // records dropped, and deleted from the store, as expired
	Duration time.Duration
}

// Restore loads every record of the store into dst, and deletes from the
// store the records dst drops as expired. It returns an error wrapping
// ErrCorrupt for a record it cannot decode. The slots are split into one
// contiguous range per processor (GOMAXPROCS), each read and loaded by a
// goroutine of its own.
func (s *Store) Restore(dst Sink) (RestoreStats, error) {
	start := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return RestoreStats{}, ErrClosed
	}
	n := max(1, min(runtime.GOMAXPROCS(0), maxRestoreWorkers))
	parts := make([]restorePart, n)
	var stop atomic.Bool // a part failed: the others stop
	var wg sync.WaitGroup
	for i := range parts {
		lo, _ := SlotRange(engine.SlotCount * i / n)
		hi, _ := SlotRange(engine.SlotCount * (i + 1) / n) // past every data key for the last
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i] = s.restoreRange(dst, lo, hi, &stop)
		}()
	}
	wg.Wait()
	var st RestoreStats
	for i := range parts {
		p := &parts[i]
		if p.err != nil {
			for j := range parts {
				parts[j].batch.Close()
			}
			return st, p.err
		}
		st.Loaded += p.loaded
		st.Expired += p.expired
	}
	for i := range parts {
		p := &parts[i]
		if p.expired > 0 {
			// Losing these deletions in a crash costs only their redoing.
			if err := p.batch.Commit(pebble.NoSync); err != nil {
				s.opts.Logf("persist: deleting %d expired records: %v", p.expired, err)
			}
		}
		p.batch.Close()
	}
	st.Duration = time.Since(start)
	return st, nil
}

// maxRestoreWorkers bounds the goroutines of a restore.
const maxRestoreWorkers = 16

// restorePart is what one goroutine of Restore did.
type restorePart struct {
	loaded, expired int
	batch           *pebble.Batch // deletions of the expired records
	err             error
}

// restoreRange is Restore for the data keys in [lo, hi); it stops early
// once stop is set, and sets it when it fails. s.mu is held.
func (s *Store) restoreRange(dst Sink, lo, hi []byte, stop *atomic.Bool) (p restorePart) {
	p.batch = s.db.NewBatch()
	defer func() {
		if p.err != nil {
			stop.Store(true)
		}
	}()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		p.err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		return p
	}
	defer func() {
		if err := it.Close(); err != nil && p.err == nil {
			p.err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		if p.loaded&1023 == 0 && stop.Load() {
			return p
		}
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			p.err = fmt.Errorf("%w: %v", ErrCorrupt, err)
			return p
		}
		r, n, err := engine.DecodeRecord(v)
		if err != nil || n != len(v) || len(k) < 2 || string(k[2:]) != string(r.Key) || int(binary.BigEndian.Uint16(k)) != engine.Slot(r.Key) {
			p.err = fmt.Errorf("%w: record under key %q", ErrCorrupt, k)
			return p
		}
		loaded := false
		if r.Kind != limiter.KindSlidingLog || len(r.Hits) > 0 { // a log with no hits is no key
			if loaded, err = dst.Load(r); err != nil {
				p.err = fmt.Errorf("%w: record under key %q: %v", ErrCorrupt, k, err)
				return p
			}
		}
		if loaded {
			p.loaded++
			continue
		}
		p.expired++
		if err := p.batch.Delete(k, nil); err != nil {
			p.err = err
			return p
		}
	}
	return p
}

// yieldEvery is how many changes Snapshot writes between two yields to
// the connections (about 100 µs of work).
const yieldEvery = 1024

// yield lets the connections run, when they share the snapshot's only
// thread: the Go scheduler otherwise lets a running goroutine keep its
// thread for up to 10 ms, and the connections queued behind it wait that
// long. With two threads or more it does nothing: the other threads take
// the connections' goroutines, and a snapshot that yields its own thread
// (the one the server adds for it, cmd/cellserver) lets connections onto
// it, which then contend with the server's other thread and its clients
// for the processors. Measured at -P 16 with snapshots every second and
// the added thread, yielding or not: bench/RESULTS.md.
func yield() {
	if runtime.GOMAXPROCS(0) == 1 {
		runtime.Gosched()
	}
}

// ingestFrom is the size of a snapshot's changes (ops.size) from which
// Snapshot writes them as a table and ingests it, rather than committing a
// batch (Store.ingestFrom, which tests lower).
const ingestFrom = 1 << 20

// blockSize is the size of the store's table blocks. The store is read
// only whole, in order, by a restore, never a key at a time: blocks of
// 32 KiB rather than Pebble's 4 KiB cost less to write (fewer blocks and
// index entries; BenchmarkSnapshotChurn 5-10% faster) and nothing to read.
const blockSize = 32 << 10

// ingestName is the file, in the store's directory, a snapshot writes its
// table to before Pebble ingests it. Pebble links it under a name of its
// own; a file left by a crash is removed when the store is opened.
const ingestName = "snapshot-ingest.tmp"

// opDropRange, a third kind of write besides opPut and opDelete, deletes
// the keys in [k, v).
const opDropRange = 3

// writeFunc adds one change to a snapshot being written.
type writeFunc func(op byte, k, v []byte) error

// batchWriter returns how to write a snapshot as one Pebble batch: write
// adds a change, and finish(err) commits the batch, synced (or, given an
// error, only discards it). s.mu is held.
func (s *Store) batchWriter() (write writeFunc, finish func(error) error) {
	b := s.db.NewBatch()
	write = func(op byte, k, v []byte) error {
		switch op {
		case opPut:
			return b.Set(k, v, nil)
		case opDelete:
			return b.Delete(k, nil)
		default:
			return b.DeleteRange(k, v, nil)
		}
	}
	finish = func(err error) error {
		defer b.Close()
		if err == nil {
			err = s.apply(func() error { return b.Commit(pebble.Sync) })
		}
		return err
	}
	return write, finish
}

// tableWriter returns how to write a snapshot as a table that Pebble then
// ingests: write adds a change (in key order, ranges first), and finish
// syncs the table and ingests it (or, given an error, only removes it).
// An ingestion is atomic and durable, like a batch's synced commit, and
// it spares what a large batch costs: Pebble's log gets the changes'
// bytes, the batch a sorted index of its own, and a flush then writes them
// again into a table (bench/RESULTS.md). s.mu is held.
func (s *Store) tableWriter() (write writeFunc, finish func(error) error) {
	fsys := s.opts.FS
	path := fsys.PathJoin(s.dir, ingestName)
	f, err := fsys.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		err = fmt.Errorf("create %s: %w", path, err)
		return func(byte, []byte, []byte) error { return err }, func(error) error { return err }
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{
		TableFormat: s.db.TableFormat(),
		BlockSize:   blockSize,
		Compression: sstable.NoCompression,
	})
	write = func(op byte, k, v []byte) error {
		switch op {
		case opPut:
			return w.Set(k, v)
		case opDelete:
			return w.Delete(k)
		default:
			return w.DeleteRange(k, v)
		}
	}
	finish = func(err error) error {
		defer fsys.Remove(path)
		if cerr := w.Close(); err == nil {
			err = cerr // Close syncs the file
		}
		if err == nil {
			err = s.apply(func() error {
				// A table that overlaps the memtable (which holds the small
				// snapshots' batches) is recorded in Pebble's log and
				// queued behind the memtable, flushed in the background,
				// rather than waited for: a flush that fails (a failing
				// disk) is retried until it succeeds, and a snapshot must
				// not wait on that. DiskUsage counts it once flushed.
				return s.db.Ingest(context.Background(), []string{path})
			})
		}
		return err
	}
	return write, finish
}

// errFatal reports a commit that Pebble gave up as fatal (logger.Fatalf).
var errFatal = errors.New("pebble gave up the write")

// apply runs fn, a write to the store that commits a snapshot. Pebble
// treats a failed write of its log or manifest as fatal and calls its
// logger's Fatalf, which would end the process; logger.Fatalf ends the
// calling goroutine instead (runtime.Goexit, deferred unlocks run), and
// notes the failure. apply runs fn on a goroutine of its own, and returns
// errFatal with Pebble's message when that goroutine ends so, or when
// Pebble gave up a write on any goroutine of this instance (a background
// flush that fn would wait for forever), whether before fn or during it.
// On any failure it closes the database (shut), which a later snapshot
// opens again: Pebble accepts no more writes after a failed log write.
// s.mu is held.
func (s *Store) apply(fn func() error) error {
	note := s.fatal
	done := make(chan error, 1)
	go func() {
		finished := false
		defer func() {
			if !finished {
				done <- fmt.Errorf("%w: %s", errFatal, note.message())
			}
		}()
		err := fn()
		finished = true
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-note.ch:
		// fn may still finish: closing the database under it would make
		// Pebble panic on fn's goroutine. Wait for it, closeWait at most.
		select {
		case err = <-done:
		case <-time.After(closeWait):
			s.dbMu.Lock()
			s.db = nil // left open: fn's goroutine waits on it forever
			s.dbMu.Unlock()
			s.wedged = true
			s.opts.Logf("persist: a snapshot's write waited %v after Pebble gave up a write; snapshots are off until the server restarts", closeWait)
			return fmt.Errorf("%w: %s", errFatal, note.message())
		}
		if err == nil {
			err = fmt.Errorf("%w: %s", errFatal, note.message())
		}
	}
	if err != nil {
		s.shut()
	}
	return err
}

// fatalNote is what one Pebble instance gave up on: its first message, and
// ch, closed then.
type fatalNote struct {
	once sync.Once
	ch   chan struct{}
	msg  atomic.Pointer[string]
}

func (n *fatalNote) note(msg string) {
	n.msg.CompareAndSwap(nil, &msg)
	n.once.Do(func() { close(n.ch) })
}

func (n *fatalNote) fired() bool {
	select {
	case <-n.ch:
		return true
	default:
		return false
	}
}

func (n *fatalNote) message() string {
	if p := n.msg.Load(); p != nil {
		return *p
	}
	return "unknown"
}

// logger sends Pebble's log lines to Logf. Fatalf ends the goroutine that
// calls it rather than the process (see apply): a disk error must not
// stop a server whose snapshots are a convenience of restarts.
type logger struct {
	logf  func(string, ...any)
	fatal *fatalNote
}

func (l logger) Infof(format string, args ...any)  { l.logf("pebble: "+format, args...) }
func (l logger) Errorf(format string, args ...any) { l.logf("pebble: "+format, args...) }
func (l logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.fatal.note(msg)
	l.logf("pebble: fatal: %s", msg)
	runtime.Goexit()
}
