package metrics

import "github.com/prometheus/client_golang/prometheus"

// Replication are a server's replication figures (package replication),
// read when Prometheus scrapes.
type Replication struct {
	// Replicas is the number of replicas connected (on a primary).
	Replicas int
	// LagSeconds and LagBytes are the most-behind online replica's lag:
	// seconds since its last ack, and bytes of stream it has not
	// acknowledged (the lag in changes, about 30 bytes per change).
	LagSeconds float64
	LagBytes   int64
	// LagChanges is the most-behind online replica's lag in key changes
	// the stream carries past what it has acknowledged.
	LagChanges int64
	// FullCopies counts the full copies sent; SentBytes the bytes sent
	// to replicas.
	FullCopies, SentBytes int64
	// ApplyDelay is, on a replica, the histogram of the delay from a
	// change to its application: counts per bucket (not cumulative) of
	// ApplyBounds (seconds) and one past them, and the sum in seconds.
	ApplyDelay    []int64
	ApplyBounds   []float64
	ApplyDelaySum float64
}

// ReplicationSource is a Source whose server replicates.
type ReplicationSource interface {
	// Replication returns the figures; ok false leaves the series out.
	Replication() (r Replication, ok bool)
}

var (
	descReplReplicas = prometheus.NewDesc("cellserver_replication_connected_replicas",
		"Replicas connected to this primary.", nil, nil)
	descReplLagSeconds = prometheus.NewDesc("cellserver_replication_lag_seconds",
		"Seconds since the most-behind replica's last acknowledgement.", nil, nil)
	descReplLagBytes = prometheus.NewDesc("cellserver_replication_lag_bytes",
		"Bytes of replication stream (about 30 per key change) the most-behind replica has not acknowledged.", nil, nil)
	descReplLagChanges = prometheus.NewDesc("cellserver_replication_lag_changes",
		"Key changes the most-behind replica has not acknowledged.", nil, nil)
	descReplFull = prometheus.NewDesc("cellserver_replication_full_copies_total",
		"Full copies sent to replicas.", nil, nil)
	descReplSent = prometheus.NewDesc("cellserver_replication_sent_bytes_total",
		"Bytes sent to replicas.", nil, nil)
	descReplDelay = prometheus.NewDesc("cellserver_replication_apply_delay_seconds",
		"On a replica: time from a change on the primary to its application here (an upper bound).", nil, nil)
)

func describeReplication(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReplReplicas, descReplLagSeconds, descReplLagBytes, descReplLagChanges, descReplFull, descReplSent, descReplDelay} {
		ch <- d
	}
}

func collectReplication(src Source, ch chan<- prometheus.Metric) {
	rs, ok := src.(ReplicationSource)
	if !ok {
		return
	}
	r, ok := rs.Replication()
	if !ok {
		return
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(descReplReplicas, float64(r.Replicas))
	gauge(descReplLagSeconds, r.LagSeconds)
	gauge(descReplLagBytes, float64(r.LagBytes))
	gauge(descReplLagChanges, float64(r.LagChanges))
	ch <- prometheus.MustNewConstMetric(descReplFull, prometheus.CounterValue, float64(r.FullCopies))
	ch <- prometheus.MustNewConstMetric(descReplSent, prometheus.CounterValue, float64(r.SentBytes))
	cum := make(map[float64]uint64, len(r.ApplyBounds))
	var n uint64
	for i, ub := range r.ApplyBounds {
		n += uint64(r.ApplyDelay[i])
		cum[ub] = n
	}
	if len(r.ApplyDelay) > len(r.ApplyBounds) {
		n += uint64(r.ApplyDelay[len(r.ApplyBounds)])
	}
	ch <- prometheus.MustNewConstHistogram(descReplDelay, n, r.ApplyDelaySum, cum)
}
