package persist

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestStoreKeysBySlot(t *testing.T) { bothWays(t, testStoreKeysBySlot) }

func testStoreKeysBySlot(t *testing.T) {
	_, s, _ := saved(t, 0)
	slot := engine.Slot([]byte("fw"))
	lo, hi := SlotRange(slot)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, string(it.Key()))
	}
	it.Close()
	want := string(binary.BigEndian.AppendUint16(nil, uint16(slot))) + "fw"
	if !reflect.DeepEqual(keys, []string{want}) {
		t.Fatalf("keys of slot %d = %q, want %q", slot, keys, want)
	}
}

func TestOpenChecksFormat(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	db.Set(formatKey, binary.BigEndian.AppendUint32(nil, 99), pebble.Sync)
	db.Close()
	_, err = Open("db", Options{FS: fs})
	if want := "persist: unknown store format version: db has format version 99, written by a newer cellserver; this build reads version 1 and older: run the newer build (or move the store aside to start empty)"; !errors.Is(err, ErrUnknownFormat) || err.Error() != want {
		t.Fatalf("Open = %v, want %q", err, want)
	}

	fs = vfs.NewMem()
	db, _ = pebble.Open("db", &pebble.Options{FS: fs})
	db.Set([]byte("\x00\x01x"), []byte("y"), pebble.Sync)
	db.Close()
	if _, err := Open("db", Options{FS: fs}); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("Open of data without a version = %v, want ErrUnknownFormat", err)
	}
}

// A store in a Pebble format newer than this build's Pebble reads (as a
// newer cellserver with a newer Pebble might write) is refused as of an
// unknown format, not as damaged: store-damaged move-aside must not move
// it.
func TestOpenRefusesNewerPebbleFormat(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs)
	s.Close()
	names, _ := fs.List("db")
	renamed := false
	for _, n := range names {
		if strings.HasPrefix(n, "marker.format-version.") {
			// The marker's name holds the version: 000001.013 is the
			// first marker, version 13.
			if err := fs.Rename("db/"+n, "db/marker.format-version.000002.099"); err != nil {
				t.Fatal(err)
			}
			renamed = true
		}
	}
	if !renamed {
		t.Fatalf("no format marker among %q", names)
	}
	_, err := Open("db", Options{FS: fs})
	if !errors.Is(err, ErrUnknownFormat) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "format major version 99") {
		t.Fatalf("Open = %v, want ErrUnknownFormat naming Pebble's format 99", err)
	}
}

// updateFixture rewrites testdata/store-v1 and its keys with this build's
// code (see TestFormatV1Fixture). Run it only for a new FormatVersion's
// fixture, never to make the test pass:
//
//	go test ./persist -run TestFormatV1Fixture -update-fixture
var updateFixture = flag.Bool("update-fixture", false, "rewrite testdata/store-v1 with this build")

// TestFormatV1Fixture restores the store in testdata/store-v1, written by
// the code of format version 1 (a first snapshot ingested as a table, a
// second in Pebble's log that changes, deletes and adds keys, of every
// limiter kind; the fixture has no LOCK file, which Open creates), and checks it restores exactly the keys in
// testdata/store-v1.keys, with its generation and time. Every later build
// must pass it unchanged: it is the promise that a newer cellserver reads
// an older store. The restore runs on a copy in memory; the fixture is
// not touched.
func TestFormatV1Fixture(t *testing.T) {
	const dir, keys = "testdata/store-v1", "testdata/store-v1.keys"
	savedAt := time.Unix(1_800_000_060, 0)
	if *updateFixture {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, _ := newEngine(t, now0)
		fill(t, e, 10)
		s.ingestFrom = 0
		if _, err := s.Snapshot(e, savedAt.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		fill(t, e, 15) // changes keys 0 to 9 and every kind's, adds 10 to 14
		for i := range 5 {
			e.Del([]byte(fmt.Sprintf("user:%012d", i)), nil)
		}
		s.ingestFrom = 1 << 30
		if _, err := s.Snapshot(e, savedAt); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, "LOCK")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keys, []byte(strings.Join(dump(e), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	mem := vfs.NewMem()
	if err := mem.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, mem, "db/"+f.Name(), b)
	}
	s, err := Open("db", Options{FS: mem})
	if err != nil {
		t.Fatalf("Open of the version 1 store: %v", err)
	}
	defer s.Close()
	if gen, at := s.LastSave(); gen != 2 || !at.Equal(savedAt) {
		t.Errorf("LastSave = %d, %v; want 2, %v", gen, at, savedAt)
	}
	e, _ := newEngine(t, now0)
	if _, err := s.Restore(e); err != nil {
		t.Fatalf("Restore of the version 1 store: %v", err)
	}
	if got := strings.Join(dump(e), "\n") + "\n"; got != string(want) {
		t.Fatalf("the version 1 store restored\n%s\nwant (%s)\n%s", got, keys, want)
	}
}
