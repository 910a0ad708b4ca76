package commands

import (
	"errors"
	"strings"
	"time"

	"github.com/cellserver/cellserver/engine"
)

// Persistence is the snapshot side of a server, as SAVE, BGSAVE,
// LASTSAVE, SHUTDOWN and INFO persistence use it. Host.Persistence
// returns nil when persistence is off. Implementations must be safe for
// concurrent use.
type Persistence interface {
	// Save takes a snapshot and returns once it is on disk.
	Save() error
	// BGSave starts a snapshot in the background. When one is under way it
	// returns ErrSaveInProgress, or, with schedule, schedules another for
	// when it ends and returns scheduled true.
	BGSave(schedule bool) (scheduled bool, err error)
	// LastSave returns when the last snapshot was committed. It must take
	// no shard lock.
	LastSave() time.Time
	// Info returns the figures of INFO persistence. It must take no shard
	// lock: INFO may run inside MULTI/EXEC, which holds them all.
	Info() PersistenceInfo
	// Backup takes a snapshot, then writes a consistent copy of the store
	// into the new directory path (relative: within the dir setting), to
	// be started with --dir <path>, and returns once it is complete; local
	// says the client is on a loopback address or a unix socket (for
	// enable-protected-configs local). It returns ErrBackupInProgress
	// while another backup runs, and ErrBackupExists, ErrBackupInStore or
	// ErrBackupOutsideDir (wrapped or not) for a path that exists, lies
	// inside the store's own directory, or, unless enable-protected-configs
	// allows it, outside the dir setting.
	Backup(path string, local bool) error
}

// Errors Persistence returns (wrapped or not).
var (
	// ErrSaveInProgress is BGSave's while a background snapshot runs.
	ErrSaveInProgress = errors.New("a background save is already in progress")
	// ErrBackupInProgress is Backup's while another backup runs.
	ErrBackupInProgress = errors.New("a backup is already in progress")
	// ErrBackupExists is Backup's for a path that exists.
	ErrBackupExists = errors.New("the backup path exists")
	// ErrBackupInStore is Backup's for a path inside the store's directory.
	ErrBackupInStore = errors.New("the backup path is inside the store's directory")
	// ErrBackupOutsideDir is Backup's for a path outside the dir setting
	// (symlinks resolved) while enable-protected-configs forbids it.
	ErrBackupOutsideDir = errors.New("the backup path is outside the dir setting")
)

// PersistenceInfo are the figures INFO persistence reports.
type PersistenceInfo struct {
	// PendingChanges are changes taken out of the engine by snapshots that
	// failed; INFO adds the engine's count of changes since the last
	// snapshot (engine.View.Changes) for rdb_changes_since_last_save.
	PendingChanges    int64
	BGSaveInProgress  bool
	LastSave          time.Time
	LastStatusOK      bool
	LastBGSaveSeconds int64 // -1: none yet
	DiskBytes         uint64
}

func registerPersistence(t *Table) {
	rows := []Command{
		{Name: "save", Arity: 1, Flags: FlagAdmin | FlagNoMulti, Handler: save, Complexity: "O(N) for N keys changed since the last snapshot",
			Summary: "Takes a snapshot of the keys changed since the last one and replies once it is on disk."},
		{Name: "bgsave", Arity: -1, MaxArgs: 2, Flags: FlagAdmin, Handler: bgsave, Complexity: "O(1); the snapshot is O(N) for N keys changed",
			Summary: "Takes a snapshot in the background; SCHEDULE queues one when a snapshot is under way.",
			Args:    []Arg{{Name: "schedule", Type: "pure-token", Token: "SCHEDULE", Optional: true}}},
		{Name: "backup", Arity: 2, Flags: FlagAdmin | FlagNoMulti, Handler: backup,
			Complexity: "O(N) for N keys changed since the last snapshot, then O(S) for a store of S bytes (hard links where the filesystem allows)",
			Summary:    "Takes a snapshot, then writes a consistent copy of the store into a new directory, to start a server on with --dir and save rules; replies once it is complete.",
			Args:       []Arg{{Name: "path", Type: "string"}}},
		{Name: "lastsave", Arity: 1, Flags: FlagFast | FlagStale, Handler: lastsave, Complexity: "O(1)",
			Summary: "The Unix time of the last snapshot committed to disk (the server's start before any)."},
	}
	for _, r := range rows {
		r.Group, r.Since = "server", "1.0.0"
		t.Register(r)
	}
}

func save(c *Client, _ *Request) {
	p := c.host.Persistence()
	if p == nil {
		c.fail(errNoPersistence)
		return
	}
	if err := p.Save(); err != nil {
		c.host.Logf("warning", "SAVE failed: %v", err)
		c.fail(errSaveFailed)
		return
	}
	c.host.Logf("notice", "DB saved on disk")
	c.writeOK()
}

func bgsave(c *Client, req *Request) {
	args := req.Args
	schedule := false
	if len(args) == 2 {
		if !equalFold(args[1], "schedule") {
			c.fail(errSyntax)
			return
		}
		schedule = true
	}
	p := c.host.Persistence()
	if p == nil {
		c.fail(errNoPersistence)
		return
	}
	scheduled, err := p.BGSave(schedule)
	switch {
	case errors.Is(err, ErrSaveInProgress):
		c.fail(errBGSaveInProgress)
	case err != nil:
		c.fail(errSaveFailed)
	case scheduled:
		c.W.WriteString("Background saving scheduled")
	default:
		c.W.WriteString("Background saving started")
	}
}

// backup answers BACKUP <path>. The snapshot and the copy run on the
// calling connection's goroutine, which holds no lock meanwhile (BACKUP is
// never queued in MULTI): other clients are served throughout.
func backup(c *Client, req *Request) {
	args := req.Args
	p := c.host.Persistence()
	if p == nil {
		c.fail(errNoPersistence)
		return
	}
	if len(args[1]) == 0 {
		c.fail(errBackupEmptyPath)
		return
	}
	err := p.Backup(string(args[1]), c.local)
	switch {
	case err == nil:
		c.writeOK()
	case errors.Is(err, ErrBackupInProgress):
		c.fail(errBackupInProgress)
	case errors.Is(err, ErrBackupExists):
		c.fail(errBackupExists)
	case errors.Is(err, ErrBackupInStore):
		c.fail(errBackupInStore)
	case errors.Is(err, ErrBackupOutsideDir):
		c.fail(errBackupOutsideDir)
	default:
		c.fail(errBackupFailed(err))
	}
}

func lastsave(c *Client, _ *Request) {
	if p := c.host.Persistence(); p != nil {
		c.W.WriteInt64(p.LastSave().Unix())
		return
	}
	c.W.WriteInt64(c.host.Stats().Started.Unix())
}

func infoPersistence(c *Client, b *strings.Builder, st HostStats, _ engine.Stats) {
	field(b, "loading", boolInt(c.table.Loading()))
	in := PersistenceInfo{LastSave: st.Started, LastStatusOK: true, LastBGSaveSeconds: -1}
	p := c.host.Persistence()
	if p != nil {
		in = p.Info()
	}
	field(b, "rdb_changes_since_last_save", in.PendingChanges+c.view.Changes())
	field(b, "rdb_bgsave_in_progress", boolInt(in.BGSaveInProgress))
	field(b, "rdb_last_save_time", in.LastSave.Unix())
	status := "ok"
	if !in.LastStatusOK {
		status = "err"
	}
	field(b, "rdb_last_bgsave_status", status)
	field(b, "rdb_last_bgsave_time_sec", in.LastBGSaveSeconds)
	field(b, "rdb_saves_enabled", boolInt(p != nil))
	field(b, "store_disk_bytes", in.DiskBytes)
	field(b, "store_disk_human", humanBytes(in.DiskBytes))
	field(b, "aof_enabled", 0)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// shutdownSave reports what SHUTDOWN's arguments ask of a snapshot: save
// is true unless NOSAVE is given (with persistence on) or persistence is
// off; forced says SAVE was given explicitly.
func shutdownSave(args [][]byte) (save, explicit bool, ok bool) {
	save = true
	for _, a := range args[1:] {
		switch {
		case equalFold(a, "nosave"):
			save = false
		case equalFold(a, "save"):
			explicit = true
		case equalFold(a, "now") || equalFold(a, "force"):
		default:
			return false, false, false
		}
	}
	if explicit && !save {
		return false, false, false
	}
	return save, explicit, true
}
