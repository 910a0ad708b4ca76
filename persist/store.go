package persist

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

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
	// Logf receives the store's log lines, Pebble's among them, at a
	// level ("verbose", "notice", "warning"). Default: none.
	Logf func(level, format string, args ...any)
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
		o.Logf = func(string, string, ...any) {}
	}
}

// Validate reports the first option of o that is out of range.
func (o *Options) Validate() error {
	if o.CacheBytes < 0 {
		return errors.New("persist: CacheBytes must not be negative")
	}
	return nil
}

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
	if err := s.check(); err != nil {
		lock.Close()
		return nil, err
	}
	if err := s.open(false); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

// open opens the Pebble database and checks its format; s.mu is held or s
// is not shared yet. Pebble runs on a goroutine of its own meanwhile
// (contain): a corrupt file becomes an error wrapping ErrCorrupt that
// names it.
func (s *Store) open(readOnly bool) error {
	cache := pebble.NewCache(s.opts.CacheBytes)
	defer cache.Unref()
	note := newFatalNote()
	po := s.pebbleOptions(note, cache)
	po.ReadOnly = readOnly
	var db *pebble.DB
	err := contain(note, func() error {
		var err error
		if db, err = pebble.Open(s.dir, po); err != nil {
			return s.readErr(note, err)
		}
		if err := s.checkFormat(db, note, readOnly); err != nil {
			db.Close()
			return err
		}
		v, closer, err := db.Get(genKey)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
		case err != nil:
			db.Close()
			return s.readErr(note, err)
		default:
			gen, saved, ok := parseGenMarker(v)
			closer.Close()
			if !ok {
				db.Close()
				return fmt.Errorf("%w: %s: bad generation marker", ErrCorrupt, s.dir)
			}
			s.infoMu.Lock()
			s.gen, s.saved = gen, saved
			s.infoMu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.dbMu.Lock()
	s.db, s.fatal = db, note
	s.dbMu.Unlock()
	s.disk.Store(db.Metrics().DiskSpaceUsage())
	return nil
}

// pebbleOptions returns the options the store opens Pebble with, its log
// lines and corrupt files going to note and Logf (logger).
func (s *Store) pebbleOptions(note *fatalNote, cache *pebble.Cache) *pebble.Options {
	lg := logger{s.opts.Logf, note}
	po := &pebble.Options{FS: s.opts.FS, Cache: cache, Lock: s.lock, Logger: lg, EventListener: lg.events(),
		FormatMajorVersion: pebbleFormat}
	// Every snapshot under churn is one large batch, flushed to a table
	// of L0 that overlaps all the others. L0 is compacted from 16 such
	// tables (Pebble's default is 4), so that a compaction merges 16
	// snapshots' tables at once (a key changed in several is written
	// once); writes stop only at 64.
	po.L0CompactionThreshold, po.L0StopWritesThreshold = l0CompactionThreshold, 64
	// Records are a few dozen bytes of varints, and Pebble already shares
	// key prefixes within a block: tables are written uncompressed, which
	// spares every flush and compaction the compression's CPU.
	for i := range po.Levels {
		po.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		po.Levels[i].BlockSize = blockSize
	}
	po.EnsureDefaults()
	return po
}

// readErr returns err, an error of Pebble reading the store, as one
// wrapping ErrCorrupt when it is a corruption (naming the file Pebble
// reported corrupt, if it did), or as it is otherwise (an I/O error).
func (s *Store) readErr(note *fatalNote, err error) error {
	if c := note.corruption(); c != "" {
		return fmt.Errorf("%w: %s: corrupt file %s", ErrCorrupt, s.dir, c)
	}
	if strings.Contains(err.Error(), "format major version") {
		// Pebble's format is newer than this build's Pebble reads (or
		// older than it still reads): a store of another cellserver.
		return fmt.Errorf("%w: %s: %v (a store written by a newer cellserver?)", ErrUnknownFormat, s.dir, err)
	}
	if errors.Is(err, pebble.ErrDBNotPristine) {
		// Pebble's marker of its format is gone: it takes the store for
		// a new one, which it finds not empty.
		return fmt.Errorf("%w: %s: Pebble's marker.format-version file is missing: %v", ErrCorrupt, s.dir, err)
	}
	// A file of the store missing (a table, the MANIFEST) is damage too.
	if pebble.IsCorruptionError(err) || errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, s.dir, err)
	}
	return fmt.Errorf("persist: read %s: %w", s.dir, err)
}

// l0CompactionThreshold is the number of L0 sublevels (one per large
// snapshot) from which Pebble compacts L0 (see open).
const l0CompactionThreshold = 16

// blockSize is the size of the store's table blocks. The store is read
// only whole, in order, by a restore, never a key at a time: blocks of
// 32 KiB rather than Pebble's 4 KiB cost less to write (fewer blocks and
// index entries) and nothing to read.
const blockSize = 32 << 10

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
		s.opts.Logf("warning", "persist: the store did not close within %v after Pebble gave up a write; snapshots are off until the server restarts", closeWait)
		return errWedged
	}
}

// errWedged reports a store whose Pebble instance could not be closed
// after a failure (see shut).
var errWedged = errors.New("persist: the store failed and could not be reopened; snapshots resume after a restart (see the log)")

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
