package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// getMetrics returns the body of addr's /metrics, waiting up to 10 s for
// it to answer.
func getMetrics(t *testing.T, addr string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			return string(body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // not listening yet
	}
}

// metrics-addr serves /metrics while the server runs.
func TestRunServesMetrics(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr = 0, "warning", freeAddr(t)
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
	var nc net.Conn
	for deadline := time.Now().Add(10 * time.Second); nc == nil; {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		nc = c
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	do := func(args ...string) string {
		t.Helper()
		fmt.Fprintf(nc, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(nc, "$%d\r\n%s\r\n", len(a), a)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(line, "\r\n")
	}
	for deadline := time.Now().Add(10 * time.Second); do("DBSIZE") != ":0"; { // -LOADING until restored
		if time.Now().After(deadline) {
			t.Fatal("the server did not finish loading")
		}
		time.Sleep(time.Millisecond)
	}
	if got := do("CL.THROTTLE", "k", "5", "1", "60"); got != "*5" {
		t.Fatalf("CL.THROTTLE = %q", got)
	}
	for range 5 {
		r.ReadString('\n') //nolint:errcheck // the reply's elements
	}
	if err := os.Mkdir(filepath.Join(dir, "backups"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"backups/one", "+OK"},
		{"backups/one", "-ERR the backup path already exists: BACKUP writes into a new directory"},
		{filepath.Join(dir, "backups"), "-ERR the backup path already exists: BACKUP writes into a new directory"},
		{"cellserver.pebble/copy", "-ERR the backup path is inside the store's directory (<dir>/cellserver.pebble): choose another"},
		{filepath.Join(dir, "cellserver.pebble"), "-ERR the backup path is inside the store's directory (<dir>/cellserver.pebble): choose another"},
		{"no/such/parent", "-ERR backup failed: mkdir " + filepath.Join(dir, "no/such/parent") + ": no such file or directory"},
		{filepath.Join(dir, "backups", "two"), "+OK"},
	} {
		if got := do("BACKUP", c.path); got != c.want {
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
