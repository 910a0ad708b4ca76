package persist

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/cellserver/cellserver/limiter"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func TestRestoreDropsAndDeletesExpired(t *testing.T) { bothWays(t, testRestoreDropsAndDeletesExpired) }

func testRestoreDropsAndDeletesExpired(t *testing.T) {
	fs := vfs.NewMem()
	saveAllButLongExpiring(t, fs)
	later := now0 + 1000*1e9 // every key but "long" has expired
	e2, rst := restored(t, fs, later)
	if rst.Loaded != 1 || rst.Expired != 7 {
		t.Fatalf("restore = %+v, want 1 loaded, 7 expired", rst)
	}
	if got := dump(e2); len(got) != 1 {
		t.Fatalf("keys = %q, want only long", got)
	}
	// The expired records are gone from the store.
	_, rst = restored(t, fs, later)
	if rst.Loaded != 1 || rst.Expired != 0 {
		t.Fatalf("second restore = %+v, want 1 loaded, 0 expired", rst)
	}
}

// A restore on a disk that fails writes still returns, with the keys
// loaded (its deletions of the expired records may be lost), and the
// next snapshot, the disk recovered, succeeds.
func TestRestoreOnFailingDisk(t *testing.T) {
	mem := vfs.NewMem()
	saveAllButLongExpiring(t, mem)
	failing := failingWrites()
	s2 := openStore(t, errorfs.Wrap(mem, failing))
	e2, _ := newEngine(t, now0+1000*1e9) // every key but "long" has expired
	failing.On()
	done := make(chan RestoreStats, 1)
	go func() {
		st, err := s2.Restore(e2)
		if err != nil {
			t.Errorf("Restore: %v", err)
		}
		done <- st
	}()
	select {
	case st := <-done:
		if st.Loaded != 1 || st.Expired != 7 {
			t.Fatalf("restore = %+v, want 1 loaded, 7 expired", st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Restore on a failing disk did not return within 30 s")
	}
	failing.Off()
	if _, err := e2.Apply([]byte("new"), limiter.FixedWindowRequest{Limit: 10, Window: 3600, Cost: 1}.Request(), nil); err != nil {
		t.Fatal(err)
	}
	// The restore's deletions are written to Pebble's log in the
	// background: their failure may be noted during the first snapshot,
	// which then fails and leaves its changes to the next.
	if _, err := s2.Snapshot(e2, saveTime.Add(time.Hour)); err != nil {
		if _, err := s2.Snapshot(e2, saveTime.Add(time.Hour+time.Second)); err != nil {
			t.Fatalf("second snapshot after the disk recovered: %v", err)
		}
	}
	s2.Close()
	e3, _ := restored(t, mem, now0+1000*1e9)
	if got, want := dump(e3), dump(e2); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored keys differ:\n got %q\nwant %q", got, want)
	}
}

func TestRestoreRefusesCorruptRecord(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs)
	if err := s.db.Set([]byte("\x00\x01x"), []byte("not a record"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	e, _ := newEngine(t, now0)
	if _, err := s.Restore(e); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Restore = %v, want ErrCorrupt", err)
	}
}
