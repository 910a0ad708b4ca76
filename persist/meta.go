package persist

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// Metadata records are small facts kept beside the snapshots, such as the
// rules defined over RESP (RULES SET): each is one key, "\xffmeta/" and
// its name, written durably at once (they change rarely) and copied by a
// backup with the rest of the store. Restore reads only the slots' key
// ranges and a build that does not know a name never reads it, so adding
// a record leaves FormatVersion as it is.

// metaKey returns name's key.
func metaKey(name string) []byte { return append([]byte("\xffmeta/"), name...) }

// PutMeta writes the metadata record name durably; ErrClosed on a store
// that is closed (or reopening after a failed commit).
func (s *Store) PutMeta(name string, value []byte) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	return s.db.Set(metaKey(name), value, pebble.Sync)
}

// GetMeta returns the metadata record name, nil when there is none.
func (s *Store) GetMeta(name string) ([]byte, error) {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.db == nil {
		return nil, ErrClosed
	}
	v, closer, err := s.db.Get(metaKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}
