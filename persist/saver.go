package persist

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SaveRule is one of Redis's "save <seconds> <changes>" rules: snapshot
// once at least Seconds have passed since the last snapshot and at least
// Changes keys have changed.
type SaveRule struct {
	Seconds int64
	Changes int64
}

// DefaultSaveRules are the rules used when persistence is on and none is
// given: a snapshot every second there is a change, so that a crash loses
// at most about a second of decisions.
var DefaultSaveRules = []SaveRule{{Seconds: 1, Changes: 1}}

// ErrBadSaveRules reports a save setting that is not pairs of positive
// integers.
var ErrBadSaveRules = errors.New("persist: save takes pairs of <seconds> <changes>, positive integers, or \"\"")

// ParseSaveRules parses a save setting: "" (no rule) or pairs of seconds
// and changes, "3600 1 300 100".
func ParseSaveRules(s string) ([]SaveRule, error) {
	f := strings.Fields(s)
	if len(f)%2 != 0 {
		return nil, ErrBadSaveRules
	}
	rules := []SaveRule{}
	for i := 0; i < len(f); i += 2 {
		sec, err1 := strconv.ParseInt(f[i], 10, 64)
		ch, err2 := strconv.ParseInt(f[i+1], 10, 64)
		if err1 != nil || err2 != nil || sec < 1 || ch < 0 {
			return nil, ErrBadSaveRules
		}
		rules = append(rules, SaveRule{Seconds: sec, Changes: ch})
	}
	return rules, nil
}

// FormatSaveRules writes rules as the save setting reads them.
func FormatSaveRules(rules []SaveRule) string {
	parts := make([]string, 0, 2*len(rules))
	for _, r := range rules {
		parts = append(parts, strconv.FormatInt(r.Seconds, 10), strconv.FormatInt(r.Changes, 10))
	}
	return strings.Join(parts, " ")
}

// Engine is what a Saver snapshots: a Source that also counts its changes
// since the last TakeDirty. *engine.Engine implements it.
type Engine interface {
	Source
	Changes() int64
}

// SaverConfig configures a Saver. The zero value is a valid configuration.
type SaverConfig struct {
	// Rules are the save rules; none: snapshots are taken only when asked
	// (SAVE, BGSAVE, shutdown). Default: none. (The server's default when
	// persistence is on is DefaultSaveRules.)
	Rules []SaveRule
	// Tick is how often the rules are checked. Default: 100ms. The rules'
	// timing follows the wall clock, not the engine's clock.
	Tick time.Duration
	// Logf logs at a level ("verbose", "notice", "warning"). Default: none.
	Logf func(level, format string, args ...any)
	// Busy, when set, is called with true as a background snapshot (the
	// rules' or BGSAVE's) starts, and with false once it has ended and the
	// store has no compaction under way or due (Store.Compacting),
	// checked every Tick: so that the server can give that work a thread
	// of its own only while it lasts (cmd/cellserver). Calls alternate,
	// true first, from one goroutine.
	Busy func(bool)
}

// EnsureDefaults fills the zero fields of c with their defaults.
func (c *SaverConfig) EnsureDefaults() {
	if c.Tick == 0 {
		c.Tick = 100 * time.Millisecond
	}
	if c.Logf == nil {
		c.Logf = func(string, string, ...any) {}
	}
}

// ErrSaveInProgress reports a BGSAVE while a background snapshot runs.
var ErrSaveInProgress = errors.New("persist: a background save is already in progress")

// Saver takes the snapshots of one engine into one store: in the
// foreground (Save), in the background (BGSave), and when a save rule
// says so. Every snapshot is incremental (Store.Snapshot). A failed
// snapshot is logged and reported (Info); its changes are written by the
// next one, which the rules retry once their time has passed again. Its
// methods are safe for concurrent use.
type Saver struct {
	store *Store
	eng   Engine
	cfg   SaverConfig

	rules atomic.Pointer[[]SaveRule]

	mu          sync.Mutex
	started     time.Time // for LASTSAVE before any snapshot
	lastTry     time.Time // the last snapshot's start, failed or not
	lastOK      bool
	lastTrySecs int64 // how long the last background snapshot took; -1: none yet
	inBG        bool
	scheduled   bool

	// Counters since NewSaver, for metrics (Stats); read without mu.
	running   atomic.Int32 // snapshots under way (or waiting for the store)
	okN, errN atomic.Int64 // snapshots committed, failed
	written   atomic.Int64 // keys written by committed snapshots
	deleted   atomic.Int64 // keys deleted by committed snapshots
	lastDurNs atomic.Int64 // the last snapshot's duration, failed or not; 0: none yet

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// NewSaver returns a Saver of eng into store. Call Start to run its rules
// and background snapshots, and Close to stop them.
func NewSaver(store *Store, eng Engine, cfg SaverConfig) *Saver {
	cfg.EnsureDefaults()
	now := time.Now()
	s := &Saver{store: store, eng: eng, cfg: cfg, started: now, lastTry: now, lastOK: true, lastTrySecs: -1,
		kick: make(chan struct{}, 1)}
	s.SetRules(cfg.Rules)
	return s
}

// SetRules replaces the save rules (CONFIG SET save).
func (s *Saver) SetRules(rules []SaveRule) {
	r := append([]SaveRule{}, rules...)
	s.rules.Store(&r)
}

// Rules returns the save rules.
func (s *Saver) Rules() []SaveRule { return append([]SaveRule{}, *s.rules.Load()...) }

// Start runs the rules and background snapshots until Close.
func (s *Saver) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.loop(s.stop, s.done)
}

// Close stops the rules and waits for a background snapshot under way.
// It takes no last snapshot (Save does) and does not close the store.
func (s *Saver) Close() {
	s.mu.Lock()
	stop, done := s.stop, s.done
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (s *Saver) loop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	busy := false // s.cfg.Busy was last called with true
	setBusy := func(b bool) {
		if s.cfg.Busy != nil && b != busy {
			busy = b
			s.cfg.Busy(b)
		}
	}
	defer setBusy(false)
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			switch {
			case s.due(now):
				setBusy(true)
				s.background()
			case busy && !s.store.Compacting():
				setBusy(false)
			}
		case <-s.kick:
			setBusy(true)
			s.background()
		}
	}
}

// due reports whether a background snapshot was scheduled or a rule is
// met at now.
func (s *Saver) due(now time.Time) bool {
	s.mu.Lock()
	due := s.scheduled
	if !due {
		var changes int64 = -1
		for _, r := range *s.rules.Load() {
			if now.Sub(s.lastTry) < time.Duration(r.Seconds)*time.Second {
				continue
			}
			if changes < 0 {
				s.mu.Unlock()
				changes = s.Changes()
				s.mu.Lock()
			}
			if changes >= r.Changes && changes > 0 {
				due = true
				break
			}
		}
	}
	s.mu.Unlock()
	return due
}

// background runs one snapshot as a background one (INFO's bgsave fields).
func (s *Saver) background() {
	s.mu.Lock()
	if s.inBG {
		s.mu.Unlock()
		return
	}
	s.inBG, s.scheduled = true, false
	s.mu.Unlock()
	start := time.Now()
	err := s.snapshot("Background saving")
	s.mu.Lock()
	s.inBG = false
	s.lastTrySecs = int64(time.Since(start).Round(time.Second) / time.Second)
	s.mu.Unlock()
	_ = err
}

// snapshot takes one snapshot, records its outcome and logs it.
func (s *Saver) snapshot(what string) error {
	now := time.Now()
	s.mu.Lock()
	s.lastTry = now
	s.mu.Unlock()
	s.running.Add(1)
	st, err := s.store.Snapshot(s.eng, now)
	s.running.Add(-1)
	s.lastDurNs.Store(int64(time.Since(now)))
	s.mu.Lock()
	s.lastOK = err == nil
	s.mu.Unlock()
	if err != nil {
		s.errN.Add(1)
		s.cfg.Logf("warning", "%s failed: %v", what, err)
		return err
	}
	s.okN.Add(1)
	s.written.Add(int64(st.Written))
	s.deleted.Add(int64(st.Deleted))
	s.cfg.Logf("verbose", "%s: snapshot generation %d, %d keys written, %d deleted, in %v", what, st.Generation, st.Written, st.Deleted, st.Duration)
	return nil
}

// Save takes a snapshot now and returns once it is on disk (SAVE).
func (s *Saver) Save() error {
	if err := s.snapshot("Saving"); err != nil {
		return fmt.Errorf("persist: save: %w", err)
	}
	return nil
}

// BGSave starts a snapshot in the background (BGSAVE). When one is under
// way it returns ErrSaveInProgress, or, with schedule, schedules another
// for when it ends and returns scheduled true (BGSAVE SCHEDULE).
func (s *Saver) BGSave(schedule bool) (scheduled bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inBG || s.scheduled {
		if !schedule {
			return false, ErrSaveInProgress
		}
		s.scheduled = true
		return true, nil
	}
	s.scheduled = true // the loop picks it up at once
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return false, nil
}

// Changes returns the changes not yet in a committed snapshot.
func (s *Saver) Changes() int64 { return s.eng.Changes() + int64(s.store.Pending()) }

// Info is what INFO persistence reports of a Saver.
type Info struct {
	// PendingChanges are the changes taken from the engine by snapshots
	// that failed; INFO's rdb_changes_since_last_save adds the engine's
	// own count (engine.View.Changes) to them.
	PendingChanges    int64
	BGSaveInProgress  bool
	LastSave          time.Time // the last snapshot committed, or the Saver's start
	LastStatusOK      bool      // the last snapshot's outcome (true before any)
	LastBGSaveSeconds int64     // -1: no background snapshot yet
	DiskBytes         uint64
}

// Info returns the figures INFO persistence reports. It takes no shard
// lock, so that it may run inside MULTI/EXEC.
func (s *Saver) Info() Info {
	in := Info{PendingChanges: int64(s.store.Pending()), LastSave: s.LastSave(), DiskBytes: s.store.DiskUsage()}
	s.mu.Lock()
	in.BGSaveInProgress = s.inBG
	in.LastStatusOK = s.lastOK
	in.LastBGSaveSeconds = s.lastTrySecs
	s.mu.Unlock()
	return in
}

// LastSave returns when the last snapshot was committed, or when the
// Saver started if none was (LASTSAVE).
func (s *Saver) LastSave() time.Time {
	if gen, at := s.store.LastSave(); gen > 0 && at.After(s.started) {
		return at
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Backup takes a snapshot, then writes a consistent copy of the store
// into dir, which must not exist (Store.Checkpoint): a backup that holds
// every change made before the call. The copy is opened like the store
// (Open). Serving and other snapshots go on while it copies; Backups may
// run at once into different directories.
func (s *Saver) Backup(dir string) (BackupStats, error) {
	start := time.Now()
	if err := s.snapshot("Saving before a backup"); err != nil {
		return BackupStats{}, fmt.Errorf("persist: backup: %w", err)
	}
	gen, _ := s.store.LastSave()
	if err := s.store.Checkpoint(dir); err != nil {
		return BackupStats{}, fmt.Errorf("persist: backup: %w", err)
	}
	return BackupStats{Generation: gen, Duration: time.Since(start)}, nil
}

// BackupStats describe one Backup.
type BackupStats struct {
	// Generation is the snapshot the backup holds at least (a snapshot
	// committed while it copied may be in it too).
	Generation uint64
	Duration   time.Duration // the snapshot's and the copy's
}

// Stats are a Saver's figures for metrics, read when they are scraped.
type Stats struct {
	// Succeeded and Failed count the snapshots since NewSaver (SAVE,
	// BGSAVE, the rules, shutdown, Backup) by outcome.
	Succeeded, Failed int64
	// KeysWritten and KeysDeleted count the keys the committed snapshots
	// wrote and deleted (a FLUSHALL's dropped slots are not counted).
	KeysWritten, KeysDeleted int64
	// LastSuccess is when the store's last snapshot was committed, by
	// this process or an earlier one; zero: never.
	LastSuccess time.Time
	// LastDuration is how long the last snapshot took, failed or not; 0:
	// none yet.
	LastDuration time.Duration
	// InProgress says a snapshot is under way.
	InProgress bool
	// Changes are the changes not yet in a committed snapshot (Changes).
	Changes int64
	// DiskBytes is the store's size on disk (Store.DiskUsage).
	DiskBytes uint64
}

// Stats returns the figures metrics report. It takes each shard's lock in
// turn (Changes), never all at once, and does no I/O.
func (s *Saver) Stats() Stats {
	st := Stats{
		Succeeded:    s.okN.Load(),
		Failed:       s.errN.Load(),
		KeysWritten:  s.written.Load(),
		KeysDeleted:  s.deleted.Load(),
		LastDuration: time.Duration(s.lastDurNs.Load()),
		InProgress:   s.running.Load() > 0,
		Changes:      s.Changes(),
		DiskBytes:    s.store.DiskUsage(),
	}
	if gen, at := s.store.LastSave(); gen > 0 {
		st.LastSuccess = at
	}
	return st
}
