package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Snapshots are the figures of a server's snapshots (package persist)
// that the collector reports, read when Prometheus scrapes.
type Snapshots struct {
	// Loading is true while the keys are being restored at start.
	Loading bool
	// InProgress is true while a snapshot is under way.
	InProgress bool
	// LastSuccess is when the store's last snapshot was committed (by this
	// process or an earlier one); zero: never.
	LastSuccess time.Time
	// LastDuration is how long the last snapshot took, failed or not; 0:
	// none yet.
	LastDuration time.Duration
	// Succeeded and Failed count the snapshots taken since the start.
	Succeeded, Failed int64
	// KeysWritten and KeysDeleted count the keys committed snapshots wrote
	// and deleted since the start.
	KeysWritten, KeysDeleted int64
	// Changes are the key changes not in a committed snapshot yet.
	Changes int64
	// DiskBytes is the store's size on disk.
	DiskBytes uint64
}

// SnapshotSource is what a Source implements to have its snapshots
// reported. Its method must be safe for concurrent use and must not hold
// every shard lock at once.
type SnapshotSource interface {
	// Snapshots returns the figures; ok false (persistence off) leaves
	// every snapshot series out.
	Snapshots() (s Snapshots, ok bool)
}

// Outcomes label cellserver_snapshots_total.
const (
	SnapshotOK  = "ok"
	SnapshotErr = "err"
)

var (
	descLoading = prometheus.NewDesc("cellserver_loading",
		"1 while the keys are being restored from the snapshot store at start, else 0.", nil, nil)
	descSnapInProgress = prometheus.NewDesc("cellserver_snapshot_in_progress",
		"1 while a snapshot is being taken, else 0.", nil, nil)
	descSnapLastSuccess = prometheus.NewDesc("cellserver_snapshot_last_success_timestamp_seconds",
		"Unix time the store's last snapshot was committed (0: never).", nil, nil)
	descSnapLastDuration = prometheus.NewDesc("cellserver_snapshot_last_duration_seconds",
		"How long the last snapshot took, failed or not (0: none since the start).", nil, nil)
	descSnapshots = prometheus.NewDesc("cellserver_snapshots_total",
		"Snapshots taken since the start, by outcome (ok, err).", []string{"outcome"}, nil)
	descSnapWritten = prometheus.NewDesc("cellserver_snapshot_keys_written_total",
		"Keys written to the store by committed snapshots.", nil, nil)
	descSnapDeleted = prometheus.NewDesc("cellserver_snapshot_keys_deleted_total",
		"Keys deleted from the store by committed snapshots.", nil, nil)
	descSnapChanges = prometheus.NewDesc("cellserver_changes_since_last_snapshot",
		"Key changes not yet in a committed snapshot.", nil, nil)
	descStoreBytes = prometheus.NewDesc("cellserver_snapshot_store_size_bytes",
		"Size of the snapshot store on disk, as of the last snapshot.", nil, nil)
)

// describeSnapshots sends the snapshot series' descriptions.
func describeSnapshots(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLoading, descSnapInProgress, descSnapLastSuccess, descSnapLastDuration,
		descSnapshots, descSnapWritten, descSnapDeleted, descSnapChanges, descStoreBytes} {
		ch <- d
	}
}

// collectSnapshots sends the snapshot series when src keeps snapshots.
func collectSnapshots(src Source, ch chan<- prometheus.Metric) {
	ss, ok := src.(SnapshotSource)
	if !ok {
		return
	}
	s, ok := ss.Snapshots()
	if !ok {
		return
	}
	last := 0.0
	if !s.LastSuccess.IsZero() {
		last = float64(s.LastSuccess.UnixNano()) / 1e9
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(descLoading, boolFloat(s.Loading))
	gauge(descSnapInProgress, boolFloat(s.InProgress))
	gauge(descSnapLastSuccess, last)
	gauge(descSnapLastDuration, s.LastDuration.Seconds())
	gauge(descSnapChanges, float64(s.Changes))
	gauge(descStoreBytes, float64(s.DiskBytes))
	ch <- prometheus.MustNewConstMetric(descSnapshots, prometheus.CounterValue, float64(s.Succeeded), SnapshotOK)
	ch <- prometheus.MustNewConstMetric(descSnapshots, prometheus.CounterValue, float64(s.Failed), SnapshotErr)
	ch <- prometheus.MustNewConstMetric(descSnapWritten, prometheus.CounterValue, float64(s.KeysWritten))
	ch <- prometheus.MustNewConstMetric(descSnapDeleted, prometheus.CounterValue, float64(s.KeysDeleted))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
