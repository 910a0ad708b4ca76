package daemon

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

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

// httpConfig bounds the metrics' HTTP server, whose port, unlike the RESP
// port, has no maxclients and no AUTH: without bounds, idle keep-alive
// connections pile up until they take the descriptors the RESP port
// needs.
type httpConfig struct {
	// MaxConns is how many connections are open at once; more wait in the
	// listen queue until one closes. fitMaxClients (package server) keeps
	// this many descriptors out of maxclients.
	MaxConns int
	// ReadHeaderTimeout bounds reading a request's headers, ReadTimeout
	// the whole request, WriteTimeout the reply (a scrape of /metrics is
	// a few milliseconds).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for that
	// long.
	IdleTimeout time.Duration
}

// defaultHTTPConfig is what serveHTTP runs with. IdleTimeout is shorter
// than Prometheus's usual scrape interval, so a scraper mostly opens a
// connection per scrape: cheap, and no connection lingers.
func defaultHTTPConfig() httpConfig {
	return httpConfig{MaxConns: server.HTTPConns, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second}
}

// serveHTTP serves, on addr, src's Prometheus metrics at /metrics and the
// health endpoints /healthz (the process answers) and /readyz (ready says
// the server serves), until stop is called.
func serveHTTP(src metricsSource, ready metrics.Readiness, addr string, hc httpConfig) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if hc.MaxConns > 0 {
		ln = netutil.LimitListener(ln, hc.MaxConns)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(src))
	mux.Handle("GET /healthz", metrics.HealthHandler())
	mux.Handle("GET /readyz", metrics.ReadyHandler(ready))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: hc.ReadHeaderTimeout, ReadTimeout: hc.ReadTimeout,
		WriteTimeout: hc.WriteTimeout, IdleTimeout: hc.IdleTimeout, MaxHeaderBytes: 16 << 10}
	go func() { _ = hs.Serve(ln) }() // http.ErrServerClosed once stopped
	src.Logf("notice", "Serving metrics on http://%s/metrics, health on /healthz and /readyz", ln.Addr())
	return func() { _ = hs.Close() }, nil
}
