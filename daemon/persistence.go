package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/persist"
	"github.com/cellserver/cellserver/server"
)

// storeDir is the store's directory inside the dir setting.
const storeDir = "cellserver.pebble"

// openStore checks that dir exists and is writable, then opens the store
// in it, its log lines (Pebble's among them) going to logf. A damaged
// store (persist.ErrCorrupt) stops the start, unless damaged is
// "move-aside" (the store-damaged setting): the store is then renamed to
// <store>.damaged-<UTC time>, kept for inspection, and a new one opened.
func openStore(dir, damaged string, logf func(level, format string, args ...any)) (*persist.Store, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("dir %s: %w (create it, or leave dir unset to keep keys in memory only)", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("dir %s: not a directory", dir)
	}
	probe, err := os.CreateTemp(dir, ".cellserver-write-test-*")
	if err != nil {
		return nil, fmt.Errorf("dir %s is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	path := filepath.Join(dir, storeDir)
	st, err := persist.Open(path, persist.Options{Logf: logf})
	if errors.Is(err, persist.ErrCorrupt) && damaged == "move-aside" {
		aside := path + ".damaged-" + time.Now().UTC().Format("20060102T150405.000Z")
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, fmt.Errorf("cannot open the snapshot store %s: %w; moving it aside (store-damaged move-aside) failed: %v", path, err, rerr)
		}
		logf("warning", "The snapshot store is damaged, moved aside to %s, starting with no keys (store-damaged move-aside): %v", aside, err)
		st, err = persist.Open(path, persist.Options{Logf: logf})
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open the snapshot store %s: %w (to start empty on purpose, move it aside: mv %s %s.damaged, or set store-damaged move-aside)", path, err, path, path)
	}
	return st, nil
}

// earlyLog holds the log lines of what is built before the server, whose
// log they belong in (the store's, at open), and passes them to it once
// attached; later lines go straight there.
type earlyLog struct {
	mu    sync.Mutex
	lines []earlyLine
	to    func(level, format string, args ...any)
}

type earlyLine struct {
	level, format string
	args          []any
}

// maxEarlyLines bounds the lines earlyLog holds.
const maxEarlyLines = 1000

func (l *earlyLog) Logf(level, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.to != nil {
		l.to(level, format, args...)
		return
	}
	if len(l.lines) < maxEarlyLines {
		l.lines = append(l.lines, earlyLine{level, format, args})
	}
}

// attach writes the lines held to logf, and every later one.
func (l *earlyLog) attach(logf func(level, format string, args ...any)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ln := range l.lines {
		logf(ln.level, ln.format, ln.args...)
	}
	l.lines, l.to = nil, logf
}

// wirePersistence wires store into srv, which answers -LOADING and
// reports loading:1 until restore has loaded the keys.
func wirePersistence(srv *server.Server, store *persist.Store, cfg server.Config, busy func(bool)) *persistence {
	rules, _ := persist.ParseSaveRules(cfg.SaveRules()) // server.Config checked them
	saver := persist.NewSaver(store, srv.Engine(), persist.SaverConfig{Rules: rules, Logf: srv.Logf, Busy: busy})
	p := &persistence{Saver: saver, store: store, dir: cfg.Dir, protected: cfg.ProtectedConfigs, logf: srv.Logf}
	srv.SetPersistence(p)
	srv.SetLoading(true)
	return p
}

// restore loads the keys in the background, then runs startNode (cluster
// mode's join; nil without it), then starts the save rules: until the keys
// are loaded and the node has joined, INFO says loading:1 and limiter
// commands are answered -LOADING. A failed restore or start stops the
// server, and its error arrives on loadErr; loaded is closed once the
// server serves (loading:0).
func (p *persistence) restore(srv *server.Server, cfg server.Config, startNode func() error, loaded chan<- struct{}, loadErr chan<- error) {
	go func() {
		st, err := p.store.Restore(srv.Engine())
		if err != nil {
			p.failed.Store(true)
			loadErr <- fmt.Errorf("restoring the keys from %s: %w (to start empty on purpose, move it away)", filepath.Join(cfg.Dir, storeDir), err)
			srv.Logf("warning", "Restoring the keys failed: %v", err)
			_ = srv.Close()
			return
		}
		srv.Logf("notice", "DB loaded from disk: %d keys in %.3f seconds (%d expired keys dropped)", st.Loaded, st.Duration.Seconds(), st.Expired)
		if startNode != nil {
			if err := startNode(); err != nil {
				if errors.Is(err, cluster.ErrClosed) { // shutting down before it joined
					loadErr <- nil
					return
				}
				loadErr <- err
				srv.Logf("warning", "Starting the cluster node failed: %v", err)
				_ = srv.Close()
				return
			}
		}
		srv.SetLoading(false)
		close(loaded)
		p.Saver.Start()
		loadErr <- nil
	}()
}

// persistence adapts a persist.Saver and its store to server.Persistence.
type persistence struct {
	*persist.Saver
	store     *persist.Store
	dir       string // the dir setting: the store is in <dir>/cellserver.pebble
	protected string // enable-protected-configs: where BACKUP may write (backupPath)
	logf      func(level, format string, args ...any)
	failed    atomic.Bool // the restore failed: take no snapshot
	backingUp atomic.Bool // a BACKUP runs
}

var _ server.Persistence = (*persistence)(nil)

func (p *persistence) Save() error {
	if p.failed.Load() {
		return errors.New("the keys were not restored")
	}
	return p.Saver.Save()
}

func (p *persistence) BGSave(schedule bool) (bool, error) {
	scheduled, err := p.Saver.BGSave(schedule)
	if errors.Is(err, persist.ErrSaveInProgress) {
		err = commands.ErrSaveInProgress
	}
	return scheduled, err
}

// Backup writes a backup that a server starts on with --dir path: the
// directory path (relative: within dir), created here and refused if it
// exists, holding a checkpoint of the store in path/cellserver.pebble.
// Where it may be is backupPath's. One backup runs at a time (a second
// gets commands.ErrBackupInProgress), so that backups do not pile up
// copies on a busy disk. What a failed backup wrote is removed.
func (p *persistence) Backup(path string, local bool) error {
	if p.failed.Load() {
		return errors.New("the keys were not restored")
	}
	asked := path
	path, err := p.backupPath(path, local)
	if errors.Is(err, commands.ErrBackupOutsideDir) || errors.Is(err, commands.ErrBackupInStore) {
		p.logf("warning", "Backup to %q refused: %v", asked, err)
	}
	if err != nil {
		return err
	}
	if !p.backingUp.CompareAndSwap(false, true) {
		return commands.ErrBackupInProgress
	}
	defer p.backingUp.Store(false)
	p.logf("notice", "Backup to %s started", path)
	if err := os.Mkdir(path, 0o755); err != nil {
		p.logf("warning", "Backup to %s failed: %v", path, err)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", commands.ErrBackupExists, path)
		}
		return err
	}
	st, err := p.Saver.Backup(filepath.Join(path, storeDir))
	if err != nil {
		p.logf("warning", "Backup to %s failed: %v", path, err)
		_ = os.RemoveAll(path) // made above: nothing else is in it
		return err
	}
	p.logf("notice", "Backup to %s done in %.3f seconds: every change up to snapshot %d; start a server on it with --dir %s --save 1 1",
		path, st.Duration.Seconds(), st.Generation, path)
	return nil
}

// backupPath returns the directory a backup to path (relative: within
// dir) is written to: path with the symbolic links of its parent resolved
// (filepath.EvalSymlinks; the directory itself is made by Mkdir, which
// does not follow a link there). Like Redis's dir and dbfilename under
// enable-protected-configs, a client may only write under dir (resolved
// too) unless enable-protected-configs is yes, or local and the client is
// local; whatever the setting, never into the live store (resolved), which
// the copy would corrupt. A BACKUP is a write of every key name to a path
// a client chooses: without this, any client could write them anywhere
// the server may write, or through a link planted under dir.
func (p *persistence) backupPath(path string, local bool) (string, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.dir, path)
	}
	path, err := filepath.Abs(path) // cleaned: no "..", no "."
	if err != nil {
		return "", err
	}
	parent, name := filepath.Split(path)
	if name == "" { // the root
		return "", fmt.Errorf("%w: %s", commands.ErrBackupExists, path)
	}
	realParent, err := filepath.EvalSymlinks(parent)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return "", &fs.PathError{Op: "mkdir", Path: path, Err: pe.Err} // as Mkdir would say
		}
		return "", err
	}
	resolved := filepath.Join(realParent, name)
	realDir, err := filepath.EvalSymlinks(p.dir)
	if err != nil {
		return "", err
	}
	if realDir, err = filepath.Abs(realDir); err != nil {
		return "", err
	}
	store := filepath.Join(realDir, storeDir)
	if s, err := filepath.EvalSymlinks(store); err == nil {
		store = s
	}
	if within(store, resolved) {
		return "", fmt.Errorf("%w: %s", commands.ErrBackupInStore, resolved)
	}
	anywhere := p.protected == "yes" || p.protected == "local" && local
	if !anywhere && !within(realDir, resolved) {
		return "", fmt.Errorf("%w: %s is not under %s", commands.ErrBackupOutsideDir, resolved, realDir)
	}
	return resolved, nil
}

// within reports whether path is dir or inside it; both are absolute and
// clean.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (p *persistence) Info() commands.PersistenceInfo {
	in := p.Saver.Info()
	return commands.PersistenceInfo{PendingChanges: in.PendingChanges, BGSaveInProgress: in.BGSaveInProgress,
		LastSave: in.LastSave, LastStatusOK: in.LastStatusOK, LastBGSaveSeconds: in.LastBGSaveSeconds, DiskBytes: in.DiskBytes}
}

func (p *persistence) SetSaveRules(rules string) error {
	r, err := persist.ParseSaveRules(rules)
	if err != nil {
		return err
	}
	p.Saver.SetRules(r)
	return nil
}

func (p *persistence) Close() error {
	p.Saver.Close()
	return p.store.Close()
}
