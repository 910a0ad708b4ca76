package persist

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

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
	if !errors.Is(err, ErrUnknownFormat) || err.Error() != "persist: unknown store format version: db has version 99, this build reads versions 1 and 2" {
		t.Fatalf("Open = %v, want ErrUnknownFormat naming version 99", err)
	}

	fs = vfs.NewMem()
	db, _ = pebble.Open("db", &pebble.Options{FS: fs})
	db.Set([]byte("\x00\x01x"), []byte("y"), pebble.Sync)
	db.Close()
	if _, err := Open("db", Options{FS: fs}); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("Open of data without a version = %v, want ErrUnknownFormat", err)
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
