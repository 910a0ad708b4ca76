package persist

import (
	"fmt"
	"runtime"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// Source is what Snapshot reads from: an engine that tracks changes
// (engine.Config.TrackChanges). *engine.Engine implements it.
type Source interface {
	Shards() int
	ShardOf(slot int) int
	TakeDirty(shard int, fn func(r engine.Record, c engine.Change))
}

var _ Source = (*engine.Engine)(nil)

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
		if err := s.open(false); err != nil {
			return SnapshotStats{}, err
		}
	}
	gen, _ := s.LastSave()
	st := SnapshotStats{Generation: gen + 1, Flushed: s.pending.len() - s.pending.n}
	marker := genMarker(st.Generation, now)
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
	if err := s.writeGenFile(st.Generation); err != nil {
		// The snapshot is committed: a file left at an earlier
		// generation only weakens the check at the next start.
		s.opts.Logf("warning", "persist: recording snapshot %d in %s: %v", st.Generation, genName, err)
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
			r.Key = nil // the store's key holds it (FormatVersion)
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
// for the processors.
func yield() {
	if runtime.GOMAXPROCS(0) == 1 {
		runtime.Gosched()
	}
}
