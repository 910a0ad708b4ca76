package daemon

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/persist"
	"github.com/cellserver/cellserver/server"
	"github.com/cockroachdb/pebble/v2"
)

// syncBuffer is a log output tests read while the server writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A store whose log lost a committed snapshot stops the start with an
// error naming the store, the log and the way to start empty; Pebble's
// own lines reach the server's log (at verbose).
func TestDamagedStoreStopsStart(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cfg := server.DefaultConfig()
	cfg.Port, _ = strconv.Atoi(port)
	cfg.Dir, cfg.Save, cfg.SaveSet = dir, "", true
	log := &syncBuffer{}
	cfg.LogLevel, cfg.LogOutput = "verbose", log
	stop := start(t, cfg)
	waitListening(t, addr)
	rc := testkit.Dial(t, addr)
	testkit.WaitFor(t, "the server to finish loading", func() bool { return rc.Do("DBSIZE") == ":0\r\n" })
	for _, k := range []string{"a", "b"} {
		rc.Do("CL.THROTTLE", k, "5", "1", "60")
		if got := rc.Do("SAVE"); got != "+OK\r\n" {
			t.Fatalf("SAVE = %q", got)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "pebble: ") {
		t.Errorf("the log has no line of Pebble's:\n%s", log.String())
	}
	// Damage the first byte of every log: Pebble would open on an
	// earlier snapshot, or none.
	logs, _ := filepath.Glob(filepath.Join(dir, storeDir, "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 {
			b[0] ^= 0x5a
			if err := os.WriteFile(l, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err := New(Config{Server: cfg})
	if err == nil || !errors.Is(err, persist.ErrCorrupt) {
		t.Fatalf("New on a damaged store = %v, want an error wrapping persist.ErrCorrupt", err)
	}
	path := filepath.Join(dir, storeDir)
	for _, want := range []string{"cannot open the snapshot store " + path, ".log", "mv " + path + " " + path + ".damaged", "store-damaged move-aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, lacks %q", err, want)
		}
	}

	// store-damaged move-aside starts with no keys, the damaged store
	// kept beside, and says so in the log.
	cfg.StoreDamaged = "move-aside"
	stop = start(t, cfg)
	waitListening(t, addr)
	rc = testkit.Dial(t, addr)
	testkit.WaitFor(t, "the server to finish loading", func() bool { return rc.Do("DBSIZE") == ":0\r\n" })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	aside, _ := filepath.Glob(path + ".damaged-*")
	if len(aside) != 1 {
		t.Fatalf("stores moved aside: %q, want one", aside)
	}
	if !strings.Contains(log.String(), "The snapshot store is damaged, moved aside to "+aside[0]+", starting with no keys") {
		t.Errorf("the log does not say the store was moved aside:\n%s", log.String())
	}
}

// enable-protected-configs yes lets BACKUP write anywhere, local only for
// a local client; never into the live store, even through a link.
func TestBackupPathProtectedConfigs(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, storeDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, storeDir), filepath.Join(other, "in")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(other, "x")
	for _, c := range []struct {
		protected string
		local     bool
		path      string
		want      error // nil: allowed
	}{
		{"no", true, out, commands.ErrBackupOutsideDir},
		{"yes", false, out, nil},
		{"local", true, out, nil},
		{"local", false, out, commands.ErrBackupOutsideDir},
		{"yes", true, filepath.Join(other, "in", "x"), commands.ErrBackupInStore},
		{"no", false, "x", nil},
	} {
		p := &persistence{dir: dir, protected: c.protected}
		got, err := p.backupPath(c.path, c.local)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("protected %s, local %v, %s: %q, %v; want %v", c.protected, c.local, c.path, got, err, c.want)
		}
	}
}

// waitListening waits until a daemon listens on addr.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	testkit.WaitFor(t, "the daemon to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// A store of a newer format version stops the start, and store-damaged
// move-aside leaves it where it is: it is not damaged.
func TestNewerStoreIsNotMovedAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, storeDir)
	db, err := pebble.Open(path, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newer := persist.FormatVersion + 1
	if err := db.Set([]byte("\xffformat"), []byte{0, 0, 0, byte(newer)}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cfg := server.DefaultConfig()
	cfg.Port = testkit.FreePort(t)
	cfg.Dir, cfg.Save, cfg.SaveSet, cfg.StoreDamaged = dir, "", true, "move-aside"
	_, err = New(Config{Server: cfg})
	if !errors.Is(err, persist.ErrUnknownFormat) || !strings.Contains(err.Error(), "has format version "+strconv.Itoa(newer)+", written by a newer cellserver") {
		t.Fatalf("New = %v, want an error wrapping persist.ErrUnknownFormat naming version %d", err, newer)
	}
	if aside, _ := filepath.Glob(path + ".damaged-*"); len(aside) != 0 {
		t.Fatalf("the newer store was moved aside: %q", aside)
	}
}
