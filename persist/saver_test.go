package persist

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestParseSaveRules(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []SaveRule
		err  error
	}{
		{"", []SaveRule{}, nil},
		{"3600 1 300 100", []SaveRule{{3600, 1}, {300, 100}}, nil},
		{" 1  1 ", []SaveRule{{1, 1}}, nil},
		{"3600", nil, ErrBadSaveRules},
		{"0 1", nil, ErrBadSaveRules},
		{"10 -1", nil, ErrBadSaveRules},
		{"x 1", nil, ErrBadSaveRules},
	} {
		got, err := ParseSaveRules(c.in)
		if !errors.Is(err, c.err) || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseSaveRules(%q) = %v, %v; want %v, %v", c.in, got, err, c.want, c.err)
		}
	}
	if got := FormatSaveRules([]SaveRule{{3600, 1}, {300, 100}}); got != "3600 1 300 100" {
		t.Errorf("FormatSaveRules = %q", got)
	}
}

// TestSaverRules drives the rule check with instants of its own: no
// snapshot before a rule's seconds have passed or without enough changes.
func TestSaverRules(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	e, _ := newEngine(t, now0)
	sv := NewSaver(s, e, SaverConfig{Rules: []SaveRule{{Seconds: 10, Changes: 3}, {Seconds: 60, Changes: 1}}})
	start := sv.lastTry
	fill(t, e, 0) // 4 keys, 5 changes
	sv.tick(start.Add(9 * time.Second))
	if gen, _ := s.LastSave(); gen != 0 {
		t.Fatalf("a snapshot before 10 s: generation %d", gen)
	}
	if got := sv.Changes(); got != 5 {
		t.Fatalf("Changes = %d, want 5", got)
	}
	sv.tick(start.Add(10 * time.Second))
	if gen, _ := s.LastSave(); gen != 1 {
		t.Fatalf("no snapshot at 10 s with 5 changes: generation %d", gen)
	}
	in := sv.Info()
	if in.PendingChanges != 0 || !in.LastStatusOK || in.BGSaveInProgress || in.LastBGSaveSeconds != 0 || in.DiskBytes == 0 {
		t.Fatalf("Info = %+v", in)
	}
	// One change: only the 60 s rule applies, counted from the last snapshot.
	e.Del([]byte("tb"), nil)
	next := sv.lastTry
	sv.tick(next.Add(59 * time.Second))
	if gen, _ := s.LastSave(); gen != 1 {
		t.Fatalf("a snapshot before 60 s with 1 change: generation %d", gen)
	}
	sv.tick(next.Add(60 * time.Second))
	if gen, _ := s.LastSave(); gen != 2 {
		t.Fatalf("no snapshot at 60 s with 1 change: generation %d", gen)
	}
	// No change: no snapshot, whatever the time.
	sv.tick(next.Add(time.Hour))
	if gen, _ := s.LastSave(); gen != 2 {
		t.Fatalf("a snapshot with no change: generation %d", gen)
	}
}

func TestSaverSaveAndBGSave(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	e, _ := newEngine(t, now0)
	sv := NewSaver(s, e, SaverConfig{})
	fill(t, e, 1)
	if err := sv.Save(); err != nil {
		t.Fatal(err)
	}
	if gen, at := s.LastSave(); gen != 1 || !sv.LastSave().Equal(at) {
		t.Fatalf("after Save: generation %d at %v, LastSave %v", gen, at, sv.LastSave())
	}
	// A background save is under way: BGSAVE refuses, BGSAVE SCHEDULE queues.
	sv.mu.Lock()
	sv.inBG = true
	sv.mu.Unlock()
	if _, err := sv.BGSave(false); !errors.Is(err, ErrSaveInProgress) {
		t.Fatalf("BGSave during a background save = %v", err)
	}
	if scheduled, err := sv.BGSave(true); !scheduled || err != nil {
		t.Fatalf("BGSave SCHEDULE = %v, %v", scheduled, err)
	}
	sv.mu.Lock()
	sv.inBG = false
	sv.mu.Unlock()
	e.Del([]byte("fw"), nil)
	sv.tick(time.Now()) // the scheduled save runs, rules or not
	if gen, _ := s.LastSave(); gen != 2 {
		t.Fatalf("scheduled save did not run: generation %d", gen)
	}
}

// The loop calls Busy with true before a background snapshot, and with
// false at a tick after it, the store having no compaction under way;
// Close ends a busy spell it finds.
func TestSaverBusy(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	e, _ := newEngine(t, now0)
	calls := make(chan bool, 16)
	sv := NewSaver(s, e, SaverConfig{Tick: time.Millisecond, Busy: func(b bool) { calls <- b }})
	sv.Start()
	fill(t, e, 10)
	if _, err := sv.BGSave(false); err != nil {
		t.Fatal(err)
	}
	next := func() bool {
		t.Helper()
		return testkit.Recv(t, calls, "a call of Busy")
	}
	if !next() {
		t.Fatal("first call false, want true")
	}
	if next() {
		t.Fatal("second call true, want false")
	}
	if gen, _ := s.LastSave(); gen != 1 {
		t.Fatalf("generation %d after BGSAVE, want 1", gen)
	}
	sv.Close()
	select {
	case b := <-calls:
		t.Fatalf("Close called Busy(%v) with no spell under way", b)
	default:
	}
}

// tick is what the rules' loop does at each tick, without the loop.
func (s *Saver) tick(now time.Time) {
	if s.due(now) {
		s.background()
	}
}
