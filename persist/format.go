package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cellserver/cellserver/engine"
	"github.com/cockroachdb/pebble/v2"
)

// FormatVersion is the version of the on-disk format this package writes
// and reads: the store's keys and facts (this file), the records' encoding
// (engine.Record.AppendBinary, versioned on its own), and Pebble's format
// (pebbleFormat). Open refuses a store of a higher version, written by a
// newer cellserver, by name. A build that raises it must still read every
// lower version, converting the store when it opens it: the store written
// by version 1's code in testdata/store-v1 must restore exactly
// (TestFormatV1Fixture), and so on for each version.
//
// Version 2 leaves a record's key out of its value, since the store's key
// (dataKey) holds it: a key's bytes are on disk once, not twice. A version
// 1 store's values hold their keys and read as they are; Open marks the
// store version 2, after which a build of version 1 refuses it by name.
const FormatVersion = 2

// formatV1 is the version before FormatVersion, which Open still reads.
const formatV1 = 1

// pebbleFormat is the Pebble format major version the store is written in,
// fixed rather than Pebble's default (its oldest supported, which a newer
// Pebble may raise): a store moves to a newer Pebble format only with a
// new FormatVersion, so that the build before it can still say why it
// cannot read it.
const pebbleFormat = pebble.FormatFlushableIngest

// Keys of the store's own facts; data keys start with a slot < 0x4000.
var (
	formatKey = []byte("\xffformat")
	genKey    = []byte("\xffgeneration")
)

// checkFormat checks db's format version, writing it into an empty store.
// A store opened read-only (check) is only checked.
func (s *Store) checkFormat(db *pebble.DB, note *fatalNote, readOnly bool) error {
	v, closer, err := db.Get(formatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		it, err := db.NewIter(nil)
		if err != nil {
			return s.readErr(note, err)
		}
		empty := !it.First()
		if err := it.Close(); err != nil {
			return s.readErr(note, err)
		}
		if !empty {
			return fmt.Errorf("%w: %s holds data but no format version", ErrUnknownFormat, s.dir)
		}
		if readOnly {
			return nil
		}
		if err := db.Set(formatKey, binary.BigEndian.AppendUint32(nil, FormatVersion), pebble.Sync); err != nil {
			return fmt.Errorf("persist: create store in %s: %w", s.dir, err)
		}
		return nil
	}
	if err != nil {
		return s.readErr(note, err)
	}
	defer closer.Close()
	if len(v) != 4 {
		return fmt.Errorf("%w: %s: bad format version marker", ErrUnknownFormat, s.dir)
	}
	switch got := binary.BigEndian.Uint32(v); {
	case got > FormatVersion:
		return fmt.Errorf("%w: %s has format version %d, written by a newer cellserver; this build reads version %d and older: run the newer build (or move the store aside to start empty)",
			ErrUnknownFormat, s.dir, got, FormatVersion)
	case got == formatV1:
		// Its records read as they are; the snapshots from now on write
		// values without keys, which a build of version 1 would not read.
		if readOnly {
			return nil
		}
		if err := db.Set(formatKey, binary.BigEndian.AppendUint32(nil, FormatVersion), pebble.Sync); err != nil {
			return fmt.Errorf("persist: mark store %s version %d: %w", s.dir, FormatVersion, err)
		}
	case got != FormatVersion:
		return fmt.Errorf("%w: %s has format version %d, which no cellserver wrote; this build reads version %d", ErrUnknownFormat, s.dir, got, FormatVersion)
	}
	return nil
}

// dataKey returns the store's key for key: its slot, then its bytes.
func dataKey(buf, key []byte) []byte {
	buf = binary.BigEndian.AppendUint16(buf, uint16(engine.Slot(key)))
	return append(buf, key...)
}

// isDataKeyOf reports whether k is the store's key for key (dataKey).
func isDataKeyOf(k, key []byte) bool {
	return len(k) >= 2 && string(k[2:]) == string(key) && int(binary.BigEndian.Uint16(k)) == engine.Slot(key)
}

// genMarker returns the value under genKey for the snapshot of generation
// gen committed at t: gen, then t in Unix milliseconds, each 8 bytes
// big-endian.
func genMarker(gen uint64, t time.Time) []byte {
	b := binary.BigEndian.AppendUint64(nil, gen)
	return binary.BigEndian.AppendUint64(b, uint64(t.UnixMilli()))
}

// parseGenMarker reads what genMarker wrote; ok is false for a value of
// another length.
func parseGenMarker(v []byte) (gen uint64, t time.Time, ok bool) {
	if len(v) != 16 {
		return 0, time.Time{}, false
	}
	return binary.BigEndian.Uint64(v), time.UnixMilli(int64(binary.BigEndian.Uint64(v[8:]))), true
}

// SlotRange returns the bounds [start, end) of the store's keys in hash
// slot slot, for streaming or dropping one slot's keys.
func SlotRange(slot int) (start, end []byte) {
	return binary.BigEndian.AppendUint16(nil, uint16(slot)), binary.BigEndian.AppendUint16(nil, uint16(slot+1))
}
