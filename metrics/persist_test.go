package metrics_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/internal/testkit/inproc"
	"github.com/cellserver/cellserver/metrics"
	"github.com/cellserver/cellserver/persist"
	"github.com/cellserver/cellserver/server"
)

// persisted is a Source with snapshots, as cmd/cellserver wires one.
type persisted struct {
	*server.Server
	saver *persist.Saver // nil: persistence off
}

func (p persisted) Snapshots() (metrics.Snapshots, bool) {
	if p.saver == nil {
		return metrics.Snapshots{}, false
	}
	st := p.saver.Stats()
	return metrics.Snapshots{Loading: p.Loading(), InProgress: st.InProgress, LastSuccess: st.LastSuccess,
		LastDuration: st.LastDuration, Succeeded: st.Succeeded, Failed: st.Failed, KeysWritten: st.KeysWritten,
		KeysDeleted: st.KeysDeleted, Changes: st.Changes, DiskBytes: st.DiskBytes}, true
}

// startPersisted serves a server that tracks changes, with a Saver into
// a store on an in-memory filesystem whose writes fail while failing is on.
func startPersisted(t *testing.T, failing *errorfs.Toggle) (persisted, string) {
	t.Helper()
	failing.Injector = errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return errorfs.ErrInjected
		}
		return nil
	})
	store, err := persist.Open("db", persist.Options{FS: errorfs.Wrap(vfs.NewMem(), failing)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() }) // after the server's shutdown
	srv := inproc.Start(t, func(c *server.Config) { c.Dir, c.Save, c.SaveSet = t.TempDir(), "", true })
	return persisted{srv.Server, persist.NewSaver(store, srv.Engine(), persist.SaverConfig{})}, srv.Addr
}

// snapshotSeries are the series persistence adds.
var snapshotSeries = []string{"cellserver_loading", "cellserver_snapshot_in_progress",
	"cellserver_snapshot_last_success_timestamp_seconds", "cellserver_snapshot_last_duration_seconds",
	"cellserver_snapshots_total", "cellserver_snapshot_keys_written_total", "cellserver_snapshot_keys_deleted_total",
	"cellserver_changes_since_last_snapshot", "cellserver_snapshot_store_size_bytes"}

// snapshotText is the exposition of the snapshot series whose values do
// not depend on time or disk layout.
func snapshotText(loading, changes, ok, failed, written, deleted int) string {
	return strings.NewReplacer("LOADING", strconv.Itoa(loading), "CHANGES", strconv.Itoa(changes), "OK", strconv.Itoa(ok), "ERR", strconv.Itoa(failed),
		"WRITTEN", strconv.Itoa(written), "DELETED", strconv.Itoa(deleted)).Replace(`
# HELP cellserver_changes_since_last_snapshot Key changes not yet in a committed snapshot.
# TYPE cellserver_changes_since_last_snapshot gauge
cellserver_changes_since_last_snapshot CHANGES
# HELP cellserver_loading 1 while the keys are being restored from the snapshot store at start, else 0.
# TYPE cellserver_loading gauge
cellserver_loading LOADING
# HELP cellserver_snapshot_in_progress 1 while a snapshot is being taken, else 0.
# TYPE cellserver_snapshot_in_progress gauge
cellserver_snapshot_in_progress 0
# HELP cellserver_snapshot_keys_deleted_total Keys deleted from the store by committed snapshots.
# TYPE cellserver_snapshot_keys_deleted_total counter
cellserver_snapshot_keys_deleted_total DELETED
# HELP cellserver_snapshot_keys_written_total Keys written to the store by committed snapshots.
# TYPE cellserver_snapshot_keys_written_total counter
cellserver_snapshot_keys_written_total WRITTEN
# HELP cellserver_snapshots_total Snapshots taken since the start, by outcome (ok, err).
# TYPE cellserver_snapshots_total counter
cellserver_snapshots_total{outcome="err"} ERR
cellserver_snapshots_total{outcome="ok"} OK
`)
}

// gauge returns the value of the one series named name that col sends.
func gauge(t *testing.T, col prometheus.Collector, name string) float64 {
	t.Helper()
	return testutil.ToFloat64(filtered{col, func(m prometheus.Metric) bool {
		return strings.Contains(m.Desc().String(), `fqName: "`+name+`"`)
	}})
}

// With persistence on, the snapshot series report what SAVE did, a failed
// save, and loading.
func TestSnapshotSeries(t *testing.T) {
	var failing errorfs.Toggle
	src, addr := startPersisted(t, &failing)
	c := testkit.Dial(t, addr)
	do(c, "DEBUG", "CLOCK", "SET", "1700000040000000000")
	for _, k := range []string{"a", "b", "c"} {
		if got := do(c, "CL.THROTTLE", k, "5", "1", "60"); got != ":0 :6 :5 :-1 :60" {
			t.Fatalf("CL.THROTTLE %s = %q", k, got)
		}
	}
	col := metrics.NewCollector(src)
	check := func(what string, changes, ok, failed, written, deleted int) {
		t.Helper()
		if err := testutil.CollectAndCompare(col, strings.NewReader(snapshotText(0, changes, ok, failed, written, deleted)),
			"cellserver_loading", "cellserver_snapshot_in_progress", "cellserver_snapshots_total",
			"cellserver_snapshot_keys_written_total", "cellserver_snapshot_keys_deleted_total",
			"cellserver_changes_since_last_snapshot"); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	check("before any snapshot", 3, 0, 0, 0, 0)
	if last, dur := gauge(t, col, "cellserver_snapshot_last_success_timestamp_seconds"), gauge(t, col, "cellserver_snapshot_last_duration_seconds"); last != 0 || dur != 0 {
		t.Fatalf("before any snapshot: last success %v, last duration %v; want 0, 0", last, dur)
	}

	before := float64(time.Now().UnixMilli()) / 1e3
	if err := src.saver.Save(); err != nil {
		t.Fatal(err)
	}
	// The series has the snapshot's time to the nanosecond: bounds to the
	// millisecond take before down and after up.
	after := float64(time.Now().UnixMilli()+1) / 1e3
	check("after SAVE", 0, 1, 0, 3, 0)
	last := gauge(t, col, "cellserver_snapshot_last_success_timestamp_seconds")
	if last < before || last > after {
		t.Fatalf("last success %v, want within [%v, %v]", last, before, after)
	}
	if dur := gauge(t, col, "cellserver_snapshot_last_duration_seconds"); dur <= 0 || dur > after-before+0.001 {
		t.Fatalf("last duration %v, want within (0, %v]", dur, after-before)
	}
	if size := gauge(t, col, "cellserver_snapshot_store_size_bytes"); size <= 0 {
		t.Fatalf("store size %v, want > 0", size)
	}

	do(c, "DEL", "a")
	failing.On()
	if err := src.saver.Save(); err == nil {
		t.Fatal("a save with failing writes succeeded")
	}
	failing.Off()
	check("after a failed save", 1, 1, 1, 3, 0)
	if got := gauge(t, col, "cellserver_snapshot_last_success_timestamp_seconds"); got != last {
		t.Fatalf("last success after a failed save %v, want %v (the one before)", got, last)
	}
	if err := src.saver.Save(); err != nil {
		t.Fatal(err)
	}
	check("after the retry", 0, 2, 1, 3, 1)

	src.SetLoading(true)
	if got := gauge(t, col, "cellserver_loading"); got != 1 {
		t.Fatalf("cellserver_loading while loading = %v", got)
	}
	src.SetLoading(false)

	// The series pass a pedantic registry's checks (names, types, help).
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// With persistence off no snapshot series is sent: neither from a Source
// that is not a SnapshotSource nor from one that says it is off.
func TestNoSnapshotSeriesWithPersistenceOff(t *testing.T) {
	srv := inproc.Start(t).Server
	for _, src := range []metrics.Source{srv, persisted{Server: srv}} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(metrics.NewCollector(src))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if len(mfs) == 0 {
			t.Fatal("no series at all")
		}
		for _, mf := range mfs {
			for _, name := range snapshotSeries {
				if mf.GetName() == name {
					t.Errorf("%T: %s sent with persistence off", src, name)
				}
			}
		}
	}
}
