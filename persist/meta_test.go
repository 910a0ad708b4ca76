package persist

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A metadata record survives a reopening, stays out of a restore, and a
// closed store refuses it.
func TestMetaRecords(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem)
	if v, err := s.GetMeta("rules"); v != nil || err != nil {
		t.Fatalf("GetMeta of none: %q, %v", v, err)
	}
	e, _ := newEngine(t, now0)
	fill(t, e, 10)
	if err := NewSaver(s, e, SaverConfig{}).Save(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMeta("rules", []byte(`{"version":3}`)); err != nil {
		t.Fatal(err)
	}
	want := dump(e)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, mem)
	if v, err := s.GetMeta("rules"); string(v) != `{"version":3}` || err != nil {
		t.Fatalf("GetMeta after reopening: %q, %v", v, err)
	}
	e2, _ := newEngine(t, now0)
	if _, err := s.Restore(e2); err != nil {
		t.Fatal(err)
	}
	if got := dump(e2); !reflect.DeepEqual(got, want) {
		t.Fatalf("restore with a metadata record:\n%s\nwant\n%s", got, want)
	}
	_ = s.Close()
	if err := s.PutMeta("rules", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutMeta on a closed store: %v", err)
	}
}
