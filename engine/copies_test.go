package engine

import (
	"testing"
)

// TestApplyCopies: changes apply in order (a key written, removed and
// written again ends written; one removed last is gone), an expired
// record removes the key it replaces, a bad record stops the batch, and
// nothing is listed in the change feed.
func TestApplyCopies(t *testing.T) {
	e, _ := newFeedEngine(t, 4)
	p := gcraParams(t)
	e.throttle([]byte("src"), p)
	rec := e.NewView().ExportSlot(Slot([]byte("src")))[0]
	v := e.NewView()
	v.Del([]byte("src"), nil)
	e.SetFeed(true)
	drainAll(e)
	with := func(key string) Record { r := rec; r.Key = []byte(key); return r }
	expired := with("old")
	expired.ExpireMs = now0/1e6 - 1
	e.throttle([]byte("old"), p)
	drainAll(e)
	changes := []CopyChange{
		{Record: with("a")}, {Record: Record{Key: []byte("a")}, Gone: true}, {Record: with("a")},
		{Record: with("b")}, {Record: Record{Key: []byte("b")}, Gone: true},
		{Record: expired},
	}
	for k := range 100 { // runs across the shards
		changes = append(changes, CopyChange{Record: with(string(rune('c' + k%20)))})
	}
	if err := v.ApplyCopies(changes); err != nil {
		t.Fatal(err)
	}
	if !v.Exists([]byte("a"), nil) || v.Exists([]byte("b"), nil) || v.Exists([]byte("old"), nil) || !v.Exists([]byte("c"), nil) {
		t.Fatalf("a %v b %v old %v c %v, want a and c only", v.Exists([]byte("a"), nil), v.Exists([]byte("b"), nil), v.Exists([]byte("old"), nil), v.Exists([]byte("c"), nil))
	}
	if got := drainAll(e); got != nil {
		t.Fatalf("the feed lists %q, want nothing", got)
	}
	bad := with("z")
	bad.Kind = 0
	if err := v.ApplyCopies([]CopyChange{{Record: with("y")}, {Record: bad}}); err != ErrBadRecord {
		t.Fatalf("a bad record: %v, want ErrBadRecord", err)
	}
	if !v.Exists([]byte("y"), nil) || v.Exists([]byte("z"), nil) {
		t.Fatal("the change before a bad record is not applied, or the bad one is")
	}
	e.throttle([]byte("a"), p) // the feed still lists what the engine's own calls change
	if got := drainAll(e); len(got) != 1 {
		t.Fatalf("after ApplyCopies the feed lists %q, want a", got)
	}
}
