package metrics_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/internal/testkit/inproc"
	"github.com/cellserver/cellserver/metrics"
	"github.com/cellserver/cellserver/server"
)

// do sends words over c and returns the reply as testkit.Flat has it:
// ":0 :1 :0 :-1 :60" for a limiter's.
func do(c *testkit.Conn, words ...string) string { return testkit.Flat(c.Do(words...)) }

// The collector reports exactly what the commands did: calls by outcome,
// one histogram observation per call that ran, keys by kind, the limiter's
// own counters and the connections.
func TestCollectorCounts(t *testing.T) {
	srv := inproc.Start(t)
	c := srv.Dial(t)
	for _, step := range []struct{ words, want string }{
		{"DEBUG CLOCK SET 1700000040000000000", "+OK"},
		{"CL.THROTTLE k 0 1 60", ":0 :1 :0 :-1 :60"},
		{"CL.THROTTLE k 0 1 60", ":1 :1 :0 :60 :60"},
		{"CL.THROTTLE k 0 1 60", ":1 :1 :0 :60 :60"},
		{"CL.THROTTLE k x 1 60", "-Cell error: Store error: Couldn't parse as integer: x"},
		{"CL.THROTTLE k", "-Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"},
		{"TB.TAKE b 10 1 1", ":0 :10 :9 :-1 :1"},
		// LB.QUEUE is counted by its row of the kinds table like the others.
		{"LB.QUEUE q 1 1 60", ":0 :1 :0 :-1 :0"},
		{"LB.QUEUE q 1 1 60", ":1 :1 :0 :60 :60"},
	} {
		if got := do(c, strings.Fields(step.words)...); got != step.want {
			t.Fatalf("%s: %q, want %q", step.words, got, step.want)
		}
	}
	col := metrics.NewCollector(srv.Server)
	// testdata/collector_counts.prom is the exposition expected, series by
	// series.
	want, err := os.ReadFile("testdata/collector_counts.prom")
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(col, bytes.NewReader(want),
		"cellserver_commands_total", "cellserver_connected_clients", "cellserver_connections_received_total",
		"cellserver_evicted_keys_total", "cellserver_expired_keys_total", "cellserver_keys",
		"cellserver_limiter_requests_total", "cellserver_rejected_connections_total"); err != nil {
		t.Fatal(err)
	}

	// The histogram: one observation per call that ran (the arity error
	// never ran), cumulative buckets ending at the count.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "cellserver_command_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			bs := h.GetBucket()
			if len(bs) != 12 || bs[0].GetUpperBound() != 1e-6 || bs[11].GetUpperBound() != 1 {
				t.Errorf("buckets %v", bs)
			}
			for i := 1; i < len(bs); i++ {
				if bs[i].GetCumulativeCount() < bs[i-1].GetCumulativeCount() {
					t.Errorf("buckets not cumulative: %v", bs)
				}
			}
			if h.GetSampleSum() <= 0 {
				t.Errorf("%s: sum %v", m.GetLabel()[0].GetValue(), h.GetSampleSum())
			}
			counts[m.GetLabel()[0].GetValue()] = h.GetSampleCount()
		}
	}
	if fmt.Sprint(counts) != "map[cl.throttle:4 debug:1 lb.queue:2 tb.take:1]" {
		t.Errorf("histogram counts %v, want cl.throttle 4, debug 1, lb.queue 2, tb.take 1", counts)
	}
}

// Handler serves the collector's metrics with the Go and process ones.
func TestHandler(t *testing.T) {
	srv := inproc.Start(t)
	c := srv.Dial(t)
	if got := do(c, "PING"); got != "+PONG" {
		t.Fatal(got)
	}
	hs := httptest.NewServer(metrics.Handler(srv.Server))
	defer hs.Close()
	resp, err := http.Get(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`cellserver_commands_total{command="ping",outcome="allowed"} 1`,
		`cellserver_command_duration_seconds_count{command="ping"} 1`,
		"cellserver_connected_clients 1",
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// A client's counts outlive its connection: the server keeps them, and
// the collector reports them the same after the client has gone.
func TestCollectorKeepsDepartedClients(t *testing.T) {
	srv := inproc.Start(t)
	c := srv.Dial(t)
	do(c, "DEBUG", "CLOCK", "SET", "1700000040000000000")
	for range 3 {
		do(c, "CL.THROTTLE", "k", "0", "1", "60")
	}
	col := metrics.NewCollector(srv.Server)
	before := testutil.ToFloat64(commandSeries(col, "cl.throttle", "limited"))
	c.NetConn().Close()
	testkit.WaitFor(t, "the client to be gone", func() bool { return len(srv.Clients()) == 0 })
	after := testutil.ToFloat64(commandSeries(col, "cl.throttle", "limited"))
	if before != 2 || after != 2 {
		t.Fatalf("limited cl.throttle: %v before the client left, %v after; want 2", before, after)
	}
	want := `
# HELP cellserver_connected_clients Client connections open now.
# TYPE cellserver_connected_clients gauge
cellserver_connected_clients 0
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "cellserver_connected_clients"); err != nil {
		t.Fatal(err)
	}
}

// commandSeries is a collector of the one cellserver_commands_total series
// for cmd and outcome.
func commandSeries(col prometheus.Collector, cmd, outcome string) prometheus.Collector {
	return filtered{col, func(m prometheus.Metric) bool {
		var pb dto.Metric
		if m.Write(&pb) != nil || pb.Counter == nil {
			return false
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		return labels["command"] == cmd && labels["outcome"] == outcome
	}}
}

// filtered passes on the metrics of a collector that keep accepts.
type filtered struct {
	prometheus.Collector
	keep func(prometheus.Metric) bool
}

func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { f.Collector.Collect(all); close(all) }()
	for m := range all {
		if f.keep(m) {
			ch <- m
		}
	}
}

// cellserver_evicted_keys_total counts the evictions INFO counts, and the
// memory gauges read INFO's used_memory, used_memory_peak and maxmemory.
func TestCollectorMemory(t *testing.T) {
	srv := inproc.Start(t, func(c *server.Config) {
		c.MaxMemory, c.MaxMemoryPolicy = 256<<10, "allkeys-random"
	})
	c := srv.Dial(t)
	const keys = 20000
	var req strings.Builder
	for i := range keys {
		req.WriteString(testkit.Encode("CL.THROTTLE", fmt.Sprintf("key:%d", i), "5", "1", "3600"))
	}
	c.Send(req.String())
	for range keys {
		if r := c.Reply(); !strings.HasPrefix(r, "*5") {
			t.Fatalf("CL.THROTTLE: %q", r)
		}
	}
	info := c.Do("INFO")
	evicted := infoField(t, info, "evicted_keys")
	if evicted == "0" {
		t.Fatalf("%d keys under maxmemory 256kb: none evicted", keys)
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "# HELP cellserver_evicted_keys_total Keys evicted to make room for new keys under maxmemory (INFO's evicted_keys).\n# TYPE cellserver_evicted_keys_total counter\ncellserver_evicted_keys_total %s\n", evicted)
	fmt.Fprintf(&out, "# HELP cellserver_memory_max_bytes The maxmemory setting; 0: no limit.\n# TYPE cellserver_memory_max_bytes gauge\ncellserver_memory_max_bytes %d\n", 256<<10)
	col := metrics.NewCollector(srv.Server)
	if err := testutil.CollectAndCompare(col, &out, "cellserver_evicted_keys_total", "cellserver_memory_max_bytes"); err != nil {
		t.Fatal(err)
	}
	// used_memory moves with the connections' buffers; the peak saw the
	// keys fill maxmemory.
	used := gauge(t, col, "cellserver_memory_used_bytes")
	peak := gauge(t, col, "cellserver_memory_used_peak_bytes")
	if used <= 0 || peak < used || peak < 200<<10 {
		t.Fatalf("used %v, peak %v", used, peak)
	}
	// An 8 MB ECHO's buffers raise the peak; CONFIG RESETSTAT brings it
	// back to what is used now, as Redis's does.
	if got := c.Do("ECHO", strings.Repeat("x", 8<<20)); len(got) < 8<<20 {
		t.Fatalf("ECHO: %d bytes", len(got))
	}
	if peak := gauge(t, col, "cellserver_memory_used_peak_bytes"); peak < 8<<20 {
		t.Fatalf("peak %v after an 8 MB ECHO", peak)
	}
	if got := c.Do("CONFIG", "RESETSTAT"); got != "+OK\r\n" {
		t.Fatalf("CONFIG RESETSTAT: %q", got)
	}
	used = gauge(t, col, "cellserver_memory_used_bytes")
	if peak := gauge(t, col, "cellserver_memory_used_peak_bytes"); peak >= 8<<20 || peak < used {
		t.Fatalf("peak %v after CONFIG RESETSTAT, used %v", peak, used)
	}
}

// infoField returns field's value in an INFO reply.
func infoField(t *testing.T, info, field string) string {
	t.Helper()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO has no %s", field)
	return ""
}
