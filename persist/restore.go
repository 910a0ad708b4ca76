package persist

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// Sink is what Restore loads into. *engine.Engine implements it.
type Sink interface {
	// Load stores r unless it has expired, and reports whether it did.
	// Restore calls it from several goroutines at once, each with keys
	// of its own.
	Load(r engine.Record) (bool, error)
}

var _ Sink = (*engine.Engine)(nil)

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
			p := &parts[i]
			// Pebble's Fatalf ends this goroutine (logger): it is then
			// this part's error, not a part left half-filled.
			finished := false
			defer func() {
				if !finished {
					p.err = fmt.Errorf("%w: %s: pebble gave up: %s", ErrCorrupt, s.dir, s.fatal.message())
					stop.Store(true)
				}
			}()
			s.restoreRange(p, dst, lo, hi, &stop)
			finished = true
		}()
	}
	wg.Wait()
	var st RestoreStats
	for i := range parts {
		p := &parts[i]
		if p.err != nil {
			for j := range parts {
				if parts[j].batch != nil {
					parts[j].batch.Close()
				}
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
				s.opts.Logf("warning", "persist: deleting %d expired records: %v", p.expired, err)
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

// restoreRange is Restore for the data keys in [lo, hi), into p; it stops
// early once stop is set, and sets it when it fails. s.mu is held.
func (s *Store) restoreRange(p *restorePart, dst Sink, lo, hi []byte, stop *atomic.Bool) {
	p.batch = s.db.NewBatch()
	defer func() {
		if p.err != nil {
			stop.Store(true)
		}
	}()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		p.err = s.readErr(s.fatal, err)
		return
	}
	defer func() {
		if err := it.Close(); err != nil && p.err == nil {
			p.err = s.readErr(s.fatal, err)
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		if p.loaded&1023 == 0 && stop.Load() {
			return
		}
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			p.err = s.readErr(s.fatal, err)
			return
		}
		r, n, err := engine.DecodeRecord(v)
		if err == nil && len(r.Key) == 0 && len(k) >= 2 {
			r.Key = k[2:] // a value without its key (FormatVersion 2); Load copies it
		}
		if err != nil || n != len(v) || !isDataKeyOf(k, r.Key) {
			p.err = fmt.Errorf("%w: %s: record under key %q", ErrCorrupt, s.dir, k)
			return
		}
		loaded := false
		if r.Kind != limiter.KindSlidingLog || len(r.Hits) > 0 { // a log with no hits is no key
			if loaded, err = dst.Load(r); err != nil {
				p.err = fmt.Errorf("%w: %s: record under key %q: %v", ErrCorrupt, s.dir, k, err)
				return
			}
		}
		if loaded {
			p.loaded++
			continue
		}
		p.expired++
		if err := p.batch.Delete(k, nil); err != nil {
			p.err = err
			return
		}
	}
}

// verifyTables checks the checksum of every block of every table of the
// store, index and filter blocks too, which a restore's walk of the keys
// does not all read: a corrupt table stops Open, naming the file,
// rather than failing every later compaction, and so every snapshot.
// s.mu is held, or s is not shared yet.
func (s *Store) verifyTables() error {
	levels, err := s.db.SSTables()
	if err != nil {
		return s.readErr(s.fatal, err)
	}
	seen := map[string]bool{}
	for _, level := range levels {
		for _, t := range level {
			name := fmt.Sprintf("%s.sst", t.BackingSSTNum)
			if seen[name] {
				continue
			}
			seen[name] = true
			if err := contain(s.fatal, func() error { return s.verifyTable(name) }); err != nil {
				if transient(err) {
					return fmt.Errorf("persist: %s: cannot read %s: %w", s.dir, name, err)
				}
				return fmt.Errorf("%w: %s: corrupt file %s: %v", ErrCorrupt, s.dir, name, err)
			}
		}
	}
	return nil
}

// verifyTable checks the checksums of the blocks of the table name.
func (s *Store) verifyTable(name string) error {
	f, err := s.opts.FS.Open(s.opts.FS.PathJoin(s.dir, name))
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		f.Close()
		return err
	}
	r, err := sstable.NewReader(context.Background(), readable, s.pebbleOptions(s.fatal, nil).MakeReaderOptions())
	if err != nil {
		readable.Close()
		return err
	}
	defer r.Close() // closes readable
	return r.ValidateBlockChecksums()
}
