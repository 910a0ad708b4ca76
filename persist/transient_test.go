package persist

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestTransientErrorIsNotDamage: check() calls every
// error of Pebble's read-only open of a store that exists damage
// (ErrCorrupt) unless it is ErrUnknownFormat or a permission error. A
// transient one (too many open files, EIO, ENOMEM) on an intact store
// thus reads "damaged", and with store-damaged move-aside
// (daemon/persistence.go openStore) the intact store is renamed aside and
// the server starts with no keys: every limit's state is lost.
func TestTransientErrorIsNotDamage(t *testing.T) {
	mem := vfs.NewMem()
	s, e := savedOn(t, mem, 50)
	want := dump(e)
	s.Close()

	var fail atomic.Bool
	fail.Store(true)
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && op.Kind == errorfs.OpOpen && strings.HasSuffix(op.Path, ".log") {
			fail.Store(false) // once
			return syscall.EMFILE
		}
		return nil
	})
	_, err := Open("db", Options{FS: errorfs.Wrap(mem, inj)})
	if err == nil {
		t.Skip("the injected error was not met")
	}
	t.Logf("Open with one EMFILE: %v", err)
	// The store is intact: it opens, and restores every key, right after.
	e2, _ := restored(t, mem, now0)
	if got := dump(e2); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the store differs after all")
	}
	if errors.Is(err, ErrCorrupt) {
		t.Fatalf("a transient EMFILE on an intact store is reported as damage (ErrCorrupt), which store-damaged move-aside acts on: %v", err)
	}
}
