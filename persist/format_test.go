package persist

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

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
	if !errors.Is(err, ErrUnknownFormat) || err.Error() != "persist: unknown store format version: db has version 99, this build reads version 1" {
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
