package persist

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ingestFrom is the size of a snapshot's changes (ops.size) from which
// Snapshot writes them as a table and ingests it, rather than committing a
// batch (Store.ingestFrom, which tests lower).
const ingestFrom = 1 << 20

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
// again into a table. s.mu is held.
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
			s.opts.Logf("warning", "persist: a snapshot's write waited %v after Pebble gave up a write; snapshots are off until the server restarts", closeWait)
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
