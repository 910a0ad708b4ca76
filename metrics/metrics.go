// Package metrics owns cellserver's Prometheus exposition: a
// prometheus.Collector that reads, when Prometheus scrapes, the counters
// engine/, commands/ and server/ already keep, the HTTP handler that
// serves them with the Go and process collectors, and the health
// endpoints' handlers (/healthz, /readyz; health.go). Nothing on the request
// path calls into this package or client_golang: commands and connections
// bump plain per-client and per-shard counters, and Collect sums them.
//
// It imports commands, engine and client_golang; it must not import
// server, daemon or cmd/cellserver (a server reaches it through Source,
// and only package daemon wires the two).
package metrics

import (
	"net/http"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// Source is what the collector reads: *server.Server implements it. Its
// methods must be safe for concurrent use. A Source that also implements
// SnapshotSource (persist.go) has its snapshots reported too.
type Source interface {
	// Stats returns the server-wide counters (connections).
	Stats() commands.HostStats
	// Engine is the limiter store, for its key and expiry counters.
	Engine() *engine.Engine
	// Clients returns the connected clients.
	Clients() []*commands.Client
	// Commands returns the commands' names and counters, indexed alike.
	Commands() ([]string, []commands.CommandCounts)
}

// Outcomes label cellserver_commands_total: a call that ran and replied
// without error is "allowed" unless a limiter command replied "limited";
// one that replied an error, or was refused before running (arity,
// authentication), is "error".
const (
	OutcomeAllowed = "allowed"
	OutcomeLimited = "limited"
	OutcomeError   = "error"
)

var (
	descCommands = prometheus.NewDesc("cellserver_commands_total",
		"Commands processed, by command name and outcome (allowed, limited, error).",
		[]string{"command", "outcome"}, nil)
	descDuration = prometheus.NewDesc("cellserver_command_duration_seconds",
		"Time spent running commands, by command name.",
		[]string{"command"}, nil)
	descKeys = prometheus.NewDesc("cellserver_keys",
		"Keys held, by limiter kind (as TYPE names it).",
		[]string{"kind"}, nil)
	descLimiter = prometheus.NewDesc("cellserver_limiter_requests_total",
		"Limiter requests answered, by limiter kind and outcome (allowed, limited).",
		[]string{"kind", "outcome"}, nil)
	descExpired = prometheus.NewDesc("cellserver_expired_keys_total",
		"Keys removed because they expired.", nil, nil)
	descEvicted = prometheus.NewDesc("cellserver_evicted_keys_total",
		"Keys evicted to make room for new keys under maxmemory (INFO's evicted_keys).", nil, nil)
	descMemUsed = prometheus.NewDesc("cellserver_memory_used_bytes",
		"Memory counted against maxmemory (INFO's used_memory): the keyspace's bytes plus the connections' buffers.", nil, nil)
	descMemPeak = prometheus.NewDesc("cellserver_memory_used_peak_bytes",
		"The highest cellserver_memory_used_bytes since the start or CONFIG RESETSTAT (INFO's used_memory_peak).", nil, nil)
	descMemMax = prometheus.NewDesc("cellserver_memory_max_bytes",
		"The maxmemory setting; 0: no limit.", nil, nil)
	descConnected = prometheus.NewDesc("cellserver_connected_clients",
		"Client connections open now.", nil, nil)
	descReceived = prometheus.NewDesc("cellserver_connections_received_total",
		"Client connections accepted.", nil, nil)
	descRejected = prometheus.NewDesc("cellserver_rejected_connections_total",
		"Client connections refused (maxclients).", nil, nil)
	descAuth = prometheus.NewDesc("cellserver_auth_failures_total",
		"Failed AUTH (and HELLO AUTH), by reason: wrong_password (checked and wrong), over_budget (refused unchecked: too many failed AUTH from the address, or in all).",
		[]string{"reason"}, nil)
)

// runtimeLatencies selects the runtime/metrics histograms of scheduling
// latency and stop-the-world pauses.
var runtimeLatencies = regexp.MustCompile(`^/sched/(latencies|pauses/total/(gc|other)):seconds$`)

// Collector is a prometheus.Collector over a Source.
type Collector struct {
	src     Source
	buckets []float64 // commands.LatencyBuckets in seconds
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector reading src at every scrape.
func NewCollector(src Source) *Collector {
	c := &Collector{src: src}
	for _, ns := range commands.LatencyBuckets {
		c.buckets = append(c.buckets, float64(ns)/1e9)
	}
	return c
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCommands, descDuration, descKeys, descLimiter,
		descExpired, descEvicted, descMemUsed, descMemPeak, descMemMax, descConnected, descReceived, descRejected, descAuth} {
		ch <- d
	}
	describeCluster(ch)
	describeSnapshots(ch)
	describeReplication(ch)
}

// Collect reads the counters and sends the metrics. Commands never called
// since the start (or CONFIG RESETSTAT) are left out.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	names, counts := c.src.Commands()
	for i, cc := range counts {
		if cc.Calls+cc.Rejected == 0 {
			continue
		}
		name := names[i]
		allowed := cc.Calls - cc.Failed - cc.Limited
		ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(allowed), name, OutcomeAllowed)
		ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(cc.Limited), name, OutcomeLimited)
		ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(cc.Failed+cc.Rejected), name, OutcomeError)
		cum := make(map[float64]uint64, len(c.buckets))
		var n uint64
		for j, ub := range c.buckets {
			n += uint64(cc.Buckets[j])
			cum[ub] = n
		}
		n += uint64(cc.Buckets[commands.NumLatencyBuckets])
		ch <- prometheus.MustNewConstHistogram(descDuration, n, float64(cc.Nanos)/1e9, cum, name)
	}
	es := c.src.Engine().Stats()
	for k := range limiter.Kind(limiter.NumKinds) {
		if !k.Valid() {
			continue
		}
		kind := k.TypeName()
		ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(es.KeysByKind[k]), kind)
		ch <- prometheus.MustNewConstMetric(descLimiter, prometheus.CounterValue, float64(es.Allowed[k]), kind, OutcomeAllowed)
		ch <- prometheus.MustNewConstMetric(descLimiter, prometheus.CounterValue, float64(es.Limited[k]), kind, OutcomeLimited)
	}
	ch <- prometheus.MustNewConstMetric(descExpired, prometheus.CounterValue, float64(es.ExpiredKeys))
	ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(es.EvictedKeys))
	st := c.src.Stats()
	ch <- prometheus.MustNewConstMetric(descMemUsed, prometheus.GaugeValue, float64(st.UsedMemory))
	ch <- prometheus.MustNewConstMetric(descMemPeak, prometheus.GaugeValue, float64(st.UsedMemoryPeak))
	ch <- prometheus.MustNewConstMetric(descMemMax, prometheus.GaugeValue, float64(st.MaxMemory))
	ch <- prometheus.MustNewConstMetric(descConnected, prometheus.GaugeValue, float64(len(c.src.Clients())))
	ch <- prometheus.MustNewConstMetric(descReceived, prometheus.CounterValue, float64(st.ConnsReceived))
	ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, float64(st.ConnsRejected))
	ch <- prometheus.MustNewConstMetric(descAuth, prometheus.CounterValue, float64(st.AuthFailed), "wrong_password")
	ch <- prometheus.MustNewConstMetric(descAuth, prometheus.CounterValue, float64(st.AuthRefused), "over_budget")
	collectCluster(c.src, ch)
	collectSnapshots(c.src, ch)
	collectReplication(c.src, ch)
}

// Handler returns the /metrics handler: src's metrics plus the Go runtime
// and process collectors, in a registry of its own. The Go collector adds
// two histograms to its defaults, for explaining tail latency: how long
// goroutines waited to run (go_sched_latencies_seconds) and the
// stop-the-world pauses (go_sched_pauses_total_gc_seconds and
// go_sched_pauses_total_other_seconds). A request slower than both was
// delayed outside the Go runtime: by the operating system's scheduler or
// the network.
func Handler(src Source) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src),
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: runtimeLatencies})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
