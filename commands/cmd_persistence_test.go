package commands

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPersistenceOff(t *testing.T) {
	h := newHarness(t, "")
	for _, cmd := range [][]string{{"SAVE"}, {"BGSAVE"}, {"BGSAVE", "SCHEDULE"}, {"BACKUP", "b"}} {
		if got, want := h.do(cmd...), errReply(errNoPersistence); got != want {
			t.Errorf("%v = %q, want %q", cmd, got, want)
		}
	}
	if got := h.do("BGSAVE", "NOW"); got != errReply(errSyntax) {
		t.Errorf("BGSAVE NOW = %q", got)
	}
	info := h.do("INFO", "persistence")
	for _, f := range []string{"loading:0\r\n", "rdb_changes_since_last_save:0\r\n", "rdb_bgsave_in_progress:0\r\n",
		"rdb_last_bgsave_status:ok\r\n", "rdb_last_bgsave_time_sec:-1\r\n", "rdb_saves_enabled:0\r\n", "aof_enabled:0\r\n"} {
		if !strings.Contains(info, f) {
			t.Errorf("INFO persistence lacks %q:\n%s", f, info)
		}
	}
	h.do("SHUTDOWN", "SAVE")
	if h.host.shutdown != 1 || h.host.shutdownSave {
		t.Errorf("SHUTDOWN SAVE with persistence off: %d shutdowns, save %v; want 1, false", h.host.shutdown, h.host.shutdownSave)
	}
}

func TestPersistenceCommands(t *testing.T) {
	h := newHarness(t, "")
	h.do("CL.THROTTLE", "k", "1", "1", "1") // one change in the engine
	p := &fakePersistence{info: PersistenceInfo{PendingChanges: 41, BGSaveInProgress: true,
		LastSave: time.Unix(1_800_000_000, 0), LastBGSaveSeconds: 3, DiskBytes: 2048}}
	h.host.persist = p
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"SAVE"}, "+OK\r\n"},
		{[]string{"BGSAVE"}, "+Background saving started\r\n"},
		{[]string{"LASTSAVE"}, ":1800000000\r\n"},
	}
	for _, c := range cases {
		if got := h.do(c.words...); got != c.want {
			t.Errorf("%v = %q, want %q", c.words, got, c.want)
		}
	}
	p.inProgress = true
	if got, want := h.do("BGSAVE"), errReply(errBGSaveInProgress); got != want {
		t.Errorf("BGSAVE while one runs = %q, want %q", got, want)
	}
	if got, want := h.do("bgsave", "schedule"), "+Background saving scheduled\r\n"; got != want {
		t.Errorf("BGSAVE SCHEDULE while one runs = %q, want %q", got, want)
	}
	p.fail = true
	if got, want := h.do("SAVE"), errReply(errSaveFailed); got != want {
		t.Errorf("failing SAVE = %q, want %q", got, want)
	}
	info := h.do("INFO", "persistence")
	for _, f := range []string{"rdb_changes_since_last_save:42\r\n", "rdb_bgsave_in_progress:1\r\n",
		"rdb_last_save_time:1800000000\r\n", "rdb_last_bgsave_status:err\r\n", "rdb_last_bgsave_time_sec:3\r\n",
		"rdb_saves_enabled:1\r\n", "store_disk_bytes:2048\r\n", "store_disk_human:2.00K\r\n"} {
		if !strings.Contains(info, f) {
			t.Errorf("INFO persistence lacks %q:\n%s", f, info)
		}
	}
	// SHUTDOWN saves first; a failed save keeps the server up.
	if got, want := h.do("SHUTDOWN"), errReply(errShutdownSave); got != want || h.host.shutdown != 0 {
		t.Errorf("SHUTDOWN with a failing save = %q (%d shutdowns), want %q", got, h.host.shutdown, want)
	}
	h.do("SHUTDOWN", "NOSAVE")
	if h.host.shutdown != 1 || h.host.shutdownSave {
		t.Errorf("SHUTDOWN NOSAVE: %d shutdowns, save %v", h.host.shutdown, h.host.shutdownSave)
	}
	p.fail = false
	saves := p.saves
	h.do("SHUTDOWN")
	if h.host.shutdown != 2 || !h.host.shutdownSave || p.saves != saves+1 {
		t.Errorf("SHUTDOWN: %d shutdowns, save %v, %d saves", h.host.shutdown, h.host.shutdownSave, p.saves-saves)
	}
	if got := h.do("SHUTDOWN", "SAVE", "NOSAVE"); got != errReply(errSyntax) {
		t.Errorf("SHUTDOWN SAVE NOSAVE = %q", got)
	}
}

// BACKUP answers +OK once the backup is complete, each error of
// Persistence.Backup with its text, and is refused while loading and
// inside MULTI.
func TestBackup(t *testing.T) {
	h := newHarness(t, "")
	p := &fakePersistence{}
	h.host.persist = p
	cases := []struct {
		err  error
		want string
	}{
		{nil, "+OK\r\n"},
		{ErrBackupInProgress, errReply(errBackupInProgress)},
		{fmt.Errorf("mkdir: %w", ErrBackupExists), errReply(errBackupExists)},
		{ErrBackupInStore, errReply(errBackupInStore)},
		{fmt.Errorf("%w: /etc/x", ErrBackupOutsideDir), errReply(errBackupOutsideDir)},
		{errors.New("persist: backup: no space left on device\r\n"), errReply(errBackupFailed(errors.New("persist: backup: no space left on device  ")))},
	}
	for _, c := range cases {
		p.backupErr = c.err
		if got := h.do("BACKUP", "backups/b1"); got != c.want {
			t.Errorf("BACKUP with Backup returning %v = %q, want %q", c.err, got, c.want)
		}
	}
	if got, want := p.backups, []string{"backups/b1", "backups/b1", "backups/b1", "backups/b1", "backups/b1", "backups/b1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Backup got %q, want %q", got, want)
	}
	// Backup learns whether the client is local (enable-protected-configs
	// local).
	h.c.local = true
	h.do("BACKUP", "x")
	if got := p.backupLocal; got[len(got)-2] || !got[len(got)-1] {
		t.Errorf("Backup's local = %v, want false for a remote client, then true", got)
	}
	p.backups = nil
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"BACKUP", ""}, errReply(errBackupEmptyPath)},
		{[]string{"BACKUP"}, errReply(errArity("backup"))},
		{[]string{"BACKUP", "a", "b"}, errReply(errArity("backup"))},
	} {
		if got := h.do(c.words...); got != c.want {
			t.Errorf("%q = %q, want %q", c.words, got, c.want)
		}
	}
	h.do("MULTI")
	if got, want := h.do("BACKUP", "b"), errReply(errNotInMulti); got != want {
		t.Errorf("BACKUP in MULTI = %q, want %q", got, want)
	}
	h.do("DISCARD")
	h.table.SetLoading(true)
	if got, want := h.do("BACKUP", "b"), errReply(errLoading); got != want {
		t.Errorf("BACKUP while loading = %q, want %q", got, want)
	}
	h.table.SetLoading(false)
	if len(p.backups) != 0 {
		t.Errorf("Backup called for refused BACKUPs: %q", p.backups)
	}
}

// TestPersistenceInsideExec checks that INFO and LASTSAVE queued in MULTI
// run in EXEC, which holds every shard lock, without waiting for one (a
// deadlock would hang the test). SHUTDOWN cannot be queued at all
// (TestShutdownRefusedInMulti).
func TestPersistenceInsideExec(t *testing.T) {
	h := newHarness(t, "")
	p := &fakePersistence{}
	h.host.persist = p
	h.do("CL.THROTTLE", "k", "1", "1", "1")
	h.do("MULTI")
	h.do("INFO", "persistence")
	h.do("LASTSAVE")
	got := h.do("EXEC")
	if !strings.Contains(got, "rdb_changes_since_last_save:1\r\n") || !strings.Contains(got, ":1800000000\r\n") {
		t.Fatalf("EXEC = %q", got)
	}
	if p.saves != 0 {
		t.Fatalf("%d saves from INFO and LASTSAVE", p.saves)
	}
}
