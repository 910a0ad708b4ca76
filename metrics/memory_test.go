package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cellserver/cellserver/internal/testkit/inproc"
	"github.com/cellserver/cellserver/metrics"
	"github.com/cellserver/cellserver/server"
)

// The memory the limit counts and the limit itself are series, so that
// a dashboard or an alert sets one against the other.
func TestCollectorMemory(t *testing.T) {
	srv := inproc.Start(t, func(c *server.Config) { c.MaxMemory = 1 << 30 })
	col := metrics.NewCollector(srv.Server)
	want := "# HELP cellserver_memory_max_bytes The maxmemory setting in bytes; 0: no limit.\n" +
		"# TYPE cellserver_memory_max_bytes gauge\ncellserver_memory_max_bytes 1.073741824e+09\n"
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "cellserver_memory_max_bytes"); err != nil {
		t.Fatal(err)
	}
	used := testutil.ToFloat64(filtered{col, func(m prometheus.Metric) bool {
		return strings.Contains(m.Desc().String(), `"cellserver_memory_used_bytes"`)
	}})
	if engine := float64(srv.Engine().UsedMemory()); used <= 0 || used > 2*engine || used < engine/2 {
		t.Fatalf("cellserver_memory_used_bytes %v, the engine counts %v", used, engine)
	}
}
