package persist

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCorruptStore damages a small store, one file and one way at a time
// (a byte flipped at offsets spread over each file, the file cut in half,
// emptied, or removed), for every kind of file in it: tables, logs, the
// MANIFEST, OPTIONS, Pebble's markers (its CURRENT) and the generation
// file. Each damaged copy must either be refused by Open or Restore with
// an error wrapping ErrCorrupt that names the damaged file (or, for a
// log, says the store holds less than was committed and names the logs),
// or restore exactly the last snapshot: never a panic, a hang, or an
// earlier snapshot without a word. About 150 cases (80 under the race
// detector), each a store of a few KB in memory, in rounds over the files
// within a time budget.
func TestCorruptStore(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem)
	e, _ := newEngine(t, now0)
	// A first snapshot ingested as a table, two more as batches in the
	// log, the second of which ends the log.
	for g := range 3 {
		s.ingestFrom = 1 << 30
		if g == 0 {
			s.ingestFrom = 0
		}
		fill(t, e, 20*(g+1))
		if _, err := s.Snapshot(e, saveTime.Add(time.Duration(g)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	want := dump(e)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := mem.List("db")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	kinds := map[string]bool{}
	// Every file's damages, in rounds: each file's first damage, then
	// each file's second, and so on, so that a run cut short by the time
	// budget (a loaded machine) has still damaged every file.
	type damage struct {
		name, what string
		fn         func(fs vfs.FS)
	}
	var perFile [][]damage
	for _, name := range names {
		if name == "LOCK" {
			continue
		}
		for _, k := range []string{".sst", ".log", "MANIFEST-", "OPTIONS-", "marker.manifest", genName} {
			if strings.Contains(name, k) {
				kinds[k] = true
			}
		}
		orig := readFile(t, mem, "db/"+name)
		var damages []damage
		damages = append(damages, damage{name, "removed", func(fs vfs.FS) {
			if err := fs.Remove("db/" + name); err != nil {
				t.Fatal(err)
			}
		}})
		if len(orig) > 1 {
			damages = append(damages, damage{name, "cut in half", func(fs vfs.FS) { writeFile(t, fs, "db/"+name, orig[:len(orig)/2]) }})
		}
		if len(orig) > 0 {
			damages = append(damages, damage{name, "emptied", func(fs vfs.FS) { writeFile(t, fs, "db/"+name, nil) }})
		}
		for _, off := range offsets(len(orig)) {
			damages = append(damages, damage{name, fmt.Sprintf("byte %d flipped", off), func(fs vfs.FS) {
				b := slices.Clone(orig)
				b[off] ^= 0x5a
				writeFile(t, fs, "db/"+name, b)
			}})
		}
		perFile = append(perFile, damages)
	}
	var all []damage
	for round := 0; ; round++ {
		n := len(all)
		for _, ds := range perFile {
			if round < len(ds) {
				all = append(all, ds[round])
			}
		}
		if len(all) == n {
			break
		}
	}
	// The budget: about 1 s alone, 4 s under the race detector; several
	// times that when the machine is busy with other packages' tests.
	deadline := time.Now().Add(8 * time.Second)
	cases := 0
	for _, d := range all {
		if time.Now().After(deadline) && cases >= len(perFile) {
			t.Logf("stopped after %d of %d damaged stores: over the time budget (a busy machine)", cases, len(all))
			break
		}
		cases++
		name := d.name
		fs := cloneStore(t, mem)
		d.fn(fs)
		err := openAndRestore(t, fs, want)
		// What names the file: its name (a table's number); for a
		// removed one, its kind (a marker's), or, for a removed log,
		// that the log is damaged.
		names := name
		if strings.HasSuffix(name, ".sst") {
			names = strings.TrimSuffix(name, ".sst") // Pebble's table number
		}
		if d.what == "removed" {
			switch {
			case strings.HasSuffix(name, ".log"):
				names = "log"
			case strings.HasPrefix(name, "marker."):
				names = strings.Join(strings.SplitN(name, ".", 3)[:2], ".")
			}
		}
		switch {
		case err == nil:
		case !errors.Is(err, ErrCorrupt):
			t.Errorf("%s %s: %v, want an error wrapping ErrCorrupt, or an exact restore", name, d.what, err)
		case !strings.Contains(err.Error(), names):
			t.Errorf("%s %s: %v, does not name %s", name, d.what, err, names)
		}
	}
	for _, k := range []string{".sst", ".log", "MANIFEST-", "OPTIONS-", "marker.manifest", genName} {
		if !kinds[k] {
			t.Errorf("the store has no %s file to damage: %q", k, names)
		}
	}
	t.Logf("%d damaged stores", cases)
}

// offsets returns offsets spread over a file of n bytes: its first bytes
// (headers), fractions of it, and its last bytes (footers, trailers);
// fewer under the race detector, which makes each case ten times dearer.
func offsets(n int) []int {
	at := []int{0, 4, 8, 12, n / 4, n / 2, 3 * n / 4, n - 40, n - 21, n - 8, n - 1}
	if raceBuild {
		at = []int{0, 8, n / 2, n - 21, n - 1}
	}
	var out []int
	for _, o := range at {
		if o >= 0 && o < n && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// openAndRestore opens the store on fs and restores it, and returns the
// error of either, failing the test unless a restore gives want's keys
// or either call returns within 10 s.
func openAndRestore(t *testing.T, fs vfs.FS, want []string) error {
	t.Helper()
	done := make(chan error, 1)
	var got []string
	go func() {
		s, err := Open("db", Options{FS: fs})
		if err != nil {
			done <- err
			return
		}
		defer s.Close()
		e, _ := newEngine(t, now0)
		if _, err := s.Restore(e); err != nil {
			done <- err
			return
		}
		got = dump(e)
		done <- nil
	}()
	select {
	case err := <-done:
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("restored %d keys without an error, not the last snapshot's %d", len(got), len(want))
		}
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Open and Restore did not return within 10 s")
		return nil
	}
}

// cloneStore copies the store "db" of src into a new memory filesystem.
func cloneStore(t *testing.T, src vfs.FS) vfs.FS {
	t.Helper()
	dst := vfs.NewMem()
	if err := dst.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := src.List("db")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		writeFile(t, dst, "db/"+n, readFile(t, src, "db/"+n))
	}
	return dst
}

func readFile(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// A table damaged while the store is open (after Open's checks) makes
// Restore return an error naming the file, and the store's log says what
// Pebble found; Pebble's default would end the process (Fatalf), and the
// restore's goroutines used to end halfway and panic.
func TestTableDamagedAfterOpen(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem)
	s.ingestFrom = 0 // a table
	e, _ := newEngine(t, now0)
	fill(t, e, 50)
	if _, err := s.Snapshot(e, saveTime); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var log strings.Builder
	var mu sync.Mutex
	s2, err := Open("db", Options{FS: mem, CacheBytes: 1, Logf: func(level, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&log, level+" "+format+"\n", args...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	names, _ := mem.List("db")
	var tables []string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			tables = append(tables, n)
			b := readFile(t, mem, "db/"+n)
			// In place: Pebble has the file open.
			f, err := mem.OpenReadWrite("db/"+n, vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{b[len(b)/4] ^ 0x5a}, int64(len(b)/4)); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	e2, _ := newEngine(t, now0)
	done := make(chan error, 1)
	go func() { _, err := s2.Restore(e2); done <- err }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Restore did not return within 10 s")
	}
	named := ""
	for _, n := range tables {
		if strings.Contains(fmt.Sprint(err), "corrupt file db/"+n) {
			named = n
		}
	}
	if !errors.Is(err, ErrCorrupt) || named == "" {
		t.Fatalf("Restore = %v, want an error wrapping ErrCorrupt naming one of %q", err, tables)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(log.String(), "warning pebble: corrupt file db/"+named) || !strings.Contains(log.String(), "checksum mismatch") {
		t.Errorf("the log does not say what Pebble found:\n%s", log.String())
	}
}

// contain turns a Fatalf of Pebble's on the goroutine it runs into an
// error with Pebble's message, rather than ending the caller.
func TestContainFatalf(t *testing.T) {
	note := newFatalNote()
	var logged []string
	lg := logger{func(level, format string, args ...any) {
		logged = append(logged, level+" "+fmt.Sprintf(format, args...))
	}, note}
	err := contain(note, func() error {
		lg.Fatalf("MANIFEST %s failed", "sync")
		return nil
	})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "pebble gave up: MANIFEST sync failed") {
		t.Fatalf("contain = %v, want ErrCorrupt with Pebble's message", err)
	}
	if want := []string{"warning pebble: fatal: MANIFEST sync failed"}; !reflect.DeepEqual(logged, want) {
		t.Fatalf("logged %q, want %q", logged, want)
	}
}
