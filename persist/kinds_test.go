package persist

import (
	"strconv"
	"testing"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// fillEveryKind puts one key of every kind of limiter.Kinds into e (a
// call of the kind's command with its integers 10, 3, 1 and a cost of 2,
// EXACT for a kind reached by it), so that a kind added to the table is
// covered here without a line of its own, and returns the kinds it stored.
func fillEveryKind(t testing.TB, e *engine.Engine) map[limiter.Kind]bool {
	t.Helper()
	kinds := map[limiter.Kind]bool{}
	for k := limiter.KindGCRA; k < limiter.NumKinds; k++ {
		base := k
		for b := limiter.KindGCRA; b < limiter.NumKinds; b++ {
			if b.Spec().Exact == k {
				base = b
			}
		}
		var words [][]byte
		for i := range base.Spec().Params {
			words = append(words, []byte(strconv.Itoa([]int{10, 3, 1}[i])))
		}
		words = append(words, []byte("2"))
		if base != k {
			words = append(words, []byte("EXACT"))
		}
		var r limiter.Request
		if err := limiter.Parse(base, words, &r); err != nil || r.Kind != k {
			t.Fatalf("kind %v: %v (%v)", k, err, r.Kind)
		}
		if _, err := e.Apply([]byte("kind:"+k.TypeName()), &r, nil); err != nil {
			t.Fatal(err)
		}
		kinds[k] = true
	}
	return kinds
}

// TestSnapshotRestoresEveryKindOfTheTable: a key of every kind of
// limiter.Kinds (LB.QUEUE's among them, whose state keeps a fraction of a
// ns: T = 1/3 s here) survives a snapshot and a restore with its kind, its
// state words and its expiry, through the record codec's words, with no
// change of the store's format.
func TestSnapshotRestoresEveryKindOfTheTable(t *testing.T) {
	bothWays(t, func(t *testing.T) {
		fs := vfs.NewMem()
		s := openStore(t, fs)
		e, _ := newEngine(t, now0)
		want := fillEveryKind(t, e)
		if _, err := s.Snapshot(e, saveTime); err != nil {
			t.Fatal(err)
		}
		s.Close()
		e2, _ := restoredAs(t, fs, now0, e)
		for slot := range engine.SlotCount {
			for _, r := range e2.ExportSlot(slot) {
				delete(want, r.Kind)
			}
		}
		if len(want) != 0 {
			t.Fatalf("kinds missing after a restore: %v", want)
		}
	})
}
