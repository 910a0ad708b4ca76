package daemon

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/metrics"
	"github.com/cellserver/cellserver/server"
)

// metricsSource is what the metrics read: the server, its snapshots'
// figures when persistence is on (p not nil), and its cluster node's when
// cluster mode is (node not nil).
type metricsSource struct {
	*server.Server
	p    *persistence
	node *cluster.Node
}

var (
	_ metrics.SnapshotSource = metricsSource{}
	_ metrics.ClusterSource  = metricsSource{}
)

func (m metricsSource) Snapshots() (metrics.Snapshots, bool) {
	if m.p == nil {
		return metrics.Snapshots{}, false
	}
	st := m.p.Saver.Stats()
	return metrics.Snapshots{Loading: m.Server.Loading(), InProgress: st.InProgress, LastSuccess: st.LastSuccess,
		LastDuration: st.LastDuration, Succeeded: st.Succeeded, Failed: st.Failed, KeysWritten: st.KeysWritten,
		KeysDeleted: st.KeysDeleted, Changes: st.Changes, DiskBytes: st.DiskBytes}, true
}

// serveMetrics serves src's Prometheus metrics over HTTP at addr's
// /metrics until stop is called.
func serveMetrics(src metricsSource, addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(src))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }() // http.ErrServerClosed once stopped
	src.Logf("notice", "Serving metrics on http://%s/metrics", ln.Addr())
	return func() { _ = hs.Close() }, nil
}
