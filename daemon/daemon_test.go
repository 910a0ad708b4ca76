package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/persist"
	"github.com/cellserver/cellserver/server"
)

// start builds a daemon on cfg and runs it; stop shuts it down and returns
// what Run returned. The test's cleanup stops it if the test did not.
func start(t *testing.T, cfg server.Config) (stop func() error) {
	t.Helper()
	d, err := New(Config{Server: cfg})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- d.Run() }()
	var once bool
	var runErr error
	stop = func() error {
		if !once {
			once = true
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = d.Shutdown(ctx)
			runErr = <-errc
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// freeAddr returns a loopback address no one listens on now, for a
// daemon, which takes addresses rather than listeners (see
// testkit.FreePort).
func freeAddr(t *testing.T) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testkit.FreePort(t)))
}

// getMetrics returns the body of addr's /metrics once it answers.
func getMetrics(t *testing.T, addr string) string {
	t.Helper()
	var body []byte
	testkit.Until(t, testkit.IOTimeout, "/metrics at "+addr, func() error {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err // not listening yet
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err
	})
	return string(body)
}

// metrics-addr serves /metrics while the server runs.
func TestRunServesMetrics(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr = testkit.FreePort(t), "warning", freeAddr(t)
	stop := start(t, cfg)
	body := getMetrics(t, cfg.MetricsAddr)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "cellserver_connected_clients 0") || strings.Contains(body, "cellserver_cluster_") {
		t.Fatalf("/metrics: %.300s", body)
	}
}

// BACKUP writes, within dir for a relative path, a directory a server
// starts on with --dir; it refuses a path that exists or lies in the
// store, and names the reason for one it cannot create. /metrics shows
// the snapshot series with persistence on.
func TestRunBackupAndSnapshotMetrics(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cfg := server.DefaultConfig()
	cfg.Port, _ = strconv.Atoi(port)
	cfg.Dir, cfg.Save, cfg.SaveSet = dir, "", true
	cfg.LogLevel, cfg.MetricsAddr = "warning", freeAddr(t)
	stop := start(t, cfg)
	testkit.WaitFor(t, "the daemon to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	rc := testkit.Dial(t, addr)
	// -LOADING until restored
	testkit.WaitFor(t, "the server to finish loading", func() bool { return rc.Do("DBSIZE") == ":0\r\n" })
	if got := rc.Do("CL.THROTTLE", "k", "5", "1", "60"); !strings.HasPrefix(got, "*5\r\n") {
		t.Fatalf("CL.THROTTLE = %q", got)
	}
	if err := os.Mkdir(filepath.Join(dir, "backups"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A directory outside dir, and links under dir to it and to the
	// live store.
	other := t.TempDir()
	if err := os.Symlink(other, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, storeDir), filepath.Join(dir, "in")); err != nil {
		t.Fatal(err)
	}
	const outside = "-ERR the backup path is outside the dir setting (symlinks resolved): enable-protected-configs allows only paths under dir"
	for _, c := range []struct{ path, want string }{
		{filepath.Join(other, "x"), outside},
		{"../x", outside},
		{"backups/../../x", outside},
		{"out/x", outside},
		{"in/x", "-ERR the backup path is inside the store's directory (<dir>/cellserver.pebble): choose another"},
		{"backups/one", "+OK"},
		{"backups/one", "-ERR the backup path already exists: BACKUP writes into a new directory"},
		{filepath.Join(dir, "backups"), "-ERR the backup path already exists: BACKUP writes into a new directory"},
		{"cellserver.pebble/copy", "-ERR the backup path is inside the store's directory (<dir>/cellserver.pebble): choose another"},
		{filepath.Join(dir, "cellserver.pebble"), "-ERR the backup path is inside the store's directory (<dir>/cellserver.pebble): choose another"},
		{"no/such/parent", "-ERR backup failed: mkdir " + filepath.Join(dir, "no/such/parent") + ": no such file or directory"},
		{filepath.Join(dir, "backups", "two"), "+OK"},
	} {
		if got := strings.TrimSuffix(rc.Do("BACKUP", c.path), "\r\n"); got != c.want {
			t.Errorf("BACKUP %s = %q, want %q", c.path, got, c.want)
		}
	}
	for i, b := range []string{"one", "two"} {
		st, err := persist.Open(filepath.Join(dir, "backups", b, storeDir), persist.Options{})
		if err != nil {
			t.Fatalf("opening backup %s: %v", b, err)
		}
		if gen, _ := st.LastSave(); gen != uint64(i+1) {
			t.Errorf("backup %s holds snapshot %d, want %d", b, gen, i+1)
		}
		st.Close()
	}
	body := getMetrics(t, cfg.MetricsAddr)
	for _, want := range []string{"cellserver_loading 0\n", `cellserver_snapshots_total{outcome="ok"} 2` + "\n",
		"cellserver_snapshot_keys_written_total 1\n", "cellserver_changes_since_last_snapshot 0\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
