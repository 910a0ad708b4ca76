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
	"github.com/cellserver/cellserver/limiter"
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
	if want := "persist: unknown store format version: db has format version 99, written by a newer cellserver; this build reads version 2 and older: run the newer build (or move the store aside to start empty)"; !errors.Is(err, ErrUnknownFormat) || err.Error() != want {
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

// A large key is on disk about once: the store's key holds it, and the
// record under it no longer repeats it (FormatVersion 2). With the key
// in the value too, a 1 MiB key took 2 MiB of tables.
func TestLargeKeyOnDiskOnce(t *testing.T) { bothWays(t, testLargeKeyOnDiskOnce) }

func testLargeKeyOnDiskOnce(t *testing.T) {
	fs := vfs.NewMem()
	s := openStore(t, fs)
	e, _ := newEngine(t, now0)
	key := []byte(strings.Repeat("k", 1<<20))
	if _, err := e.Apply(key, limiter.FixedWindowRequest{Limit: 10, Window: 3600, Cost: 1}.Request(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil { // the batch's way: into a table
		t.Fatal(err)
	}
	names, err := fs.List("db")
	if err != nil {
		t.Fatal(err)
	}
	var tables, manifests int64
	for _, n := range names {
		st, err := fs.Stat(fs.PathJoin("db", n))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(n, ".sst"):
			tables += st.Size()
		case strings.HasPrefix(n, "MANIFEST"):
			manifests += st.Size()
		}
	}
	// Pebble's manifest records each table's first and last keys: one
	// more copy of a key that is a table's bounds.
	t.Logf("a key of %d bytes: tables %d bytes, manifest %d", len(key), tables, manifests)
	if limit := int64(len(key)) + 64<<10; tables > limit {
		t.Fatalf("a key of %d bytes took %d bytes of tables, want at most %d", len(key), tables, limit)
	}
	s.Close()
	// Not restoredAs: its walk of every slot hashes every key of a shard
	// once per slot.
	e2, rst := restored(t, fs, now0)
	slot := engine.Slot(key)
	if got, want := e2.ExportSlot(slot), e.ExportSlot(slot); rst.Loaded != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("restored %+v: %d records, want %d", rst, len(got), len(want))
	}
}

// A store of version 1, whose records hold their keys, reads as before,
// and is marked version 2 by Open.
func TestOpenReadsVersion1(t *testing.T) {
	fs := vfs.NewMem()
	e, _ := newEngine(t, now0)
	fill(t, e, 3)
	db, err := pebble.Open("db", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	db.Set(formatKey, binary.BigEndian.AppendUint32(nil, formatV1), pebble.Sync)
	for slot := range engine.SlotCount {
		for _, r := range e.ExportSlot(slot) {
			db.Set(dataKey(nil, r.Key), r.AppendBinary(nil), nil) // the key in the value too
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	restoredAs(t, fs, now0, e)
	s := openStore(t, fs)
	v, closer, err := s.db.Get(formatKey)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if got := binary.BigEndian.Uint32(v); got != FormatVersion {
		t.Fatalf("format version %d after Open, want %d", got, FormatVersion)
	}
}
