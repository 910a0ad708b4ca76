package metrics

import "github.com/prometheus/client_golang/prometheus"

var (
	descMemoryUsed = prometheus.NewDesc("cellserver_memory_used_bytes",
		"Memory counted against maxmemory now, in bytes (engine.Engine.UsedMemory).", nil, nil)
	descMemoryMax = prometheus.NewDesc("cellserver_memory_max_bytes",
		"The maxmemory setting in bytes; 0: no limit.", nil, nil)
)

// describeMemory sends the memory series' descriptions.
func describeMemory(ch chan<- *prometheus.Desc) {
	ch <- descMemoryUsed
	ch <- descMemoryMax
}

// collectMemory sends the memory the limit counts and the limit, so that
// a dashboard or an alert can set one against the other.
func collectMemory(used, max int64, ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descMemoryUsed, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(descMemoryMax, prometheus.GaugeValue, float64(max))
}
