package persist

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// A backup holds every change made before it, including those no snapshot
// had written yet, opens like the store, and leaves the store working.
func TestBackupRestoresLikeTheStore(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem)
	e, _ := newEngine(t, now0)
	sv := NewSaver(s, e, SaverConfig{})
	fill(t, e, 50)
	if err := sv.Save(); err != nil {
		t.Fatal(err)
	}
	e.Del([]byte("user:000000000003"), nil)
	fill(t, e, 60) // changed since the snapshot: the backup takes them too
	want := dump(e)
	st, err := sv.Backup("backups/one")
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	if st.Generation != 2 {
		t.Fatalf("backup stats = %+v, want generation 2", st)
	}
	if _, err := sv.Backup("backups/one"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Backup into an existing directory = %v, want fs.ErrExist", err)
	}
	// The store goes on after the backup.
	e.Del([]byte("tb"), nil)
	if err := sv.Save(); err != nil {
		t.Fatalf("Save after the backup: %v", err)
	}

	b, err := Open("backups/one", Options{FS: mem})
	if err != nil {
		t.Fatalf("opening the backup: %v", err)
	}
	defer b.Close()
	if gen, _ := b.LastSave(); gen != 2 {
		t.Fatalf("the backup's generation = %d, want 2", gen)
	}
	e2, _ := newEngine(t, now0)
	if _, err := b.Restore(e2); err != nil {
		t.Fatalf("restoring the backup: %v", err)
	}
	if got := dump(e2); !reflect.DeepEqual(got, want) {
		t.Fatalf("the backup's keys differ:\n got %q\nwant %q", got, want)
	}

	s.Close()
	if err := s.Checkpoint("backups/two"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Checkpoint of a closed store = %v, want ErrClosed", err)
	}
}

// Snapshots go on, and commit, while a checkpoint is copying files; the
// checkpoint then holds one snapshot or the other, whole.
func TestSnapshotsGoOnDuringCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasPrefix(op.Path, "backup") {
			once.Do(func() { close(blocked) })
			<-release
		}
		return nil
	})
	s, e := savedOn(t, errorfs.Wrap(mem, inj), 20)
	before := dump(e)
	done := make(chan error, 1)
	go func() { done <- s.Checkpoint("backup") }()
	<-blocked

	e.Del([]byte("sw"), nil)
	fill(t, e, 30)
	after := dump(e)
	committed := make(chan error, 1)
	go func() {
		_, err := s.Snapshot(e, saveTime.Add(time.Second))
		committed <- err
	}()
	select {
	case err := <-committed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a deadlock, not a timing
		t.Fatal("a snapshot waited for the checkpoint")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}

	b, err := Open("backup", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e2, _ := newEngine(t, now0)
	if _, err := b.Restore(e2); err != nil {
		t.Fatal(err)
	}
	got := dump(e2)
	if !reflect.DeepEqual(got, before) && !reflect.DeepEqual(got, after) {
		t.Fatalf("the checkpoint holds neither snapshot:\n got %q\nwant %q\n  or %q", got, before, after)
	}
}

// Stats count the snapshots by outcome and the keys they wrote.
func TestSaverStats(t *testing.T) {
	mem := vfs.NewMem()
	failing := failingWrites()
	s := openStore(t, errorfs.Wrap(mem, failing))
	e, _ := newEngine(t, now0)
	sv := NewSaver(s, e, SaverConfig{})
	if st := sv.Stats(); st != (Stats{DiskBytes: st.DiskBytes}) {
		t.Fatalf("Stats before any snapshot = %+v", st)
	}
	fill(t, e, 10) // 10 + 4 keys
	if got := sv.Stats().Changes; got != 15 {
		t.Fatalf("Changes = %d, want 15 (the log was hit twice)", got)
	}
	before := time.Now()
	if err := sv.Save(); err != nil {
		t.Fatal(err)
	}
	st := sv.Stats()
	if st.Succeeded != 1 || st.Failed != 0 || st.KeysWritten != 14 || st.KeysDeleted != 0 || st.Changes != 0 ||
		st.InProgress || st.LastDuration <= 0 || st.LastSuccess.Before(before.Truncate(time.Millisecond)) || st.DiskBytes == 0 {
		t.Fatalf("Stats after a save = %+v", st)
	}
	e.Del([]byte("fw"), nil)
	failing.On()
	if err := sv.Save(); err == nil {
		t.Fatal("Save with failing writes succeeded")
	}
	failing.Off()
	st2 := sv.Stats()
	if st2.Succeeded != 1 || st2.Failed != 1 || st2.KeysWritten != 14 || st2.Changes != 1 || !st2.LastSuccess.Equal(st.LastSuccess) {
		t.Fatalf("Stats after a failed save = %+v", st2)
	}
	if err := sv.Save(); err != nil {
		t.Fatal(err)
	}
	if st := sv.Stats(); st.Succeeded != 2 || st.KeysDeleted != 1 || st.Changes != 0 {
		t.Fatalf("Stats after the retry = %+v", st)
	}
}
