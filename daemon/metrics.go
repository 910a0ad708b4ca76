package daemon

import (
	"container/list"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/console"
	"github.com/cellserver/cellserver/grpcsvc"
	"github.com/cellserver/cellserver/metrics"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/rules"
	"github.com/cellserver/cellserver/server"
)

// metricsSource is what the metrics read: the server, its snapshots'
// figures when persistence is on (p not nil), and its cluster node's when
// cluster mode is (node not nil).
type metricsSource struct {
	*server.Server
	p     *persistence
	node  *cluster.Node
	rules *rules.Manager
	repl  *replication.Replication
}

// Replication returns the replication figures for the metrics.
func (m metricsSource) Replication() (metrics.Replication, bool) {
	if m.repl == nil {
		return metrics.Replication{}, false
	}
	st := m.repl.Stats()
	out := metrics.Replication{FullCopies: st.FullCopies.Load(), SentBytes: st.BytesSent.Load()}
	secs, bytes, changes := m.repl.Lag()
	out.Replicas = len(secs)
	for i := range secs {
		out.LagSeconds = max(out.LagSeconds, secs[i])
		out.LagBytes = max(out.LagBytes, bytes[i])
		out.LagChanges = max(out.LagChanges, changes[i])
	}
	counts, sum := st.ApplyDelay.Snapshot()
	out.ApplyDelay, out.ApplyDelaySum = counts, sum.Seconds()
	for _, b := range replication.HistogramBounds {
		out.ApplyBounds = append(out.ApplyBounds, b.Seconds())
	}
	return out, true
}

var (
	_ metrics.SnapshotSource = metricsSource{}
	_ metrics.ClusterSource  = metricsSource{}
	_ metrics.RulesSource    = metricsSource{}
)

func (m metricsSource) Rules() metrics.RulesStats {
	in := m.rules.Info()
	s := metrics.RulesStats{Domains: in.Domains, Rules: in.Rules, LoadedUnix: float64(in.Loaded.UnixNano()) / 1e9,
		Reloads: in.Reloads, Failures: in.Failures}
	m.rules.Service().EachStats(func(key string, st *rules.Stats) {
		s.Counters = append(s.Counters, metrics.RuleCounters{Key: key, TotalHits: st.TotalHits.Load(),
			OverLimit: st.OverLimit.Load(), NearLimit: st.NearLimit.Load(), WithinLimit: st.WithinLimit.Load(),
			ShadowMode: st.ShadowMode.Load()})
	})
	return s
}

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
	// MaxConns is how many connections are open at once (connLimiter):
	// at that many, a new one closes the oldest that is waiting for a
	// request, or waits in the listen queue while none is. fitMaxClients
	// (package server) keeps this many descriptors out of maxclients.
	MaxConns int
	// ReadHeaderTimeout bounds reading a request's headers, ReadTimeout
	// the whole request, WriteTimeout the reply (a scrape of /metrics is
	// a few milliseconds).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for that
	// long.
	IdleTimeout time.Duration
}

// defaultHTTPConfig is what serveHTTP runs with. ReadHeaderTimeout is
// shorter than the liveness probes' own timeout (3 s in
// deploy/kubernetes/statefulset.yaml, deploy/docker/Dockerfile's
// HEALTHCHECK and cellserver --healthcheck), so that a probe queued
// behind connections that never send a request is still answered in
// time. IdleTimeout is shorter than Prometheus's usual scrape interval, so
// a scraper mostly opens a connection per scrape: cheap, and no
// connection lingers.
func defaultHTTPConfig() httpConfig {
	return httpConfig{MaxConns: server.HTTPConns, ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second}
}

// serveHTTP serves, on addr, src's Prometheus metrics at /metrics, the
// health endpoints /healthz (the process answers) and /readyz (ready says
// the server serves), and the web console (package console) at / and
// under /assets/ and /api/v1/, and with rl Envoy's rate-limit service as
// JSON at /json (grpcsvc.JSONHandler), until stop is called. Only the
// console asks for requirepass and obeys protected mode.
//
// With tlsCfg (TLS configured), the port also speaks TLS, and the console
// answers only over it (httptls.go).
func serveHTTP(src metricsSource, ready metrics.Readiness, addr string, hc httpConfig, tlsCfg *tls.Config, rl *grpcsvc.Service) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	bound := ln.Addr()
	ui := console.Handler(src)
	if tlsCfg != nil {
		ln = tlsSniffer{Listener: ln, cfg: httpTLSConfig(tlsCfg)}
		ui = consoleOverTLS(ui)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(src))
	mux.Handle("GET /healthz", metrics.HealthHandler())
	mux.Handle("GET /readyz", metrics.ReadyHandler(ready))
	mux.Handle("/", ui)
	if rl != nil {
		mux.Handle(grpcsvc.JSONPath, rl.JSONHandler())
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: hc.ReadHeaderTimeout, ReadTimeout: hc.ReadTimeout,
		WriteTimeout: hc.WriteTimeout, IdleTimeout: hc.IdleTimeout, MaxHeaderBytes: 16 << 10}
	if hc.MaxConns > 0 {
		ln = limitConns(ln, hc.MaxConns, hs)
	}
	withSniffConn(hs)
	go func() { _ = hs.Serve(ln) }() // http.ErrServerClosed once stopped
	if tlsCfg != nil {
		src.Logf("notice", "Serving metrics on http(s)://%s/metrics, health on /healthz and /readyz, the console on https://%s/ (TLS only)", bound, bound)
	} else {
		src.Logf("notice", "Serving metrics on http://%s/metrics, health on /healthz and /readyz, the console on /", bound)
	}
	return func() { _ = hs.Close() }, nil
}

// connLimiter is a listener that holds at most max connections open, as
// netutil.LimitListener does, but lets a new connection in at the cap
// rather than make it wait for one to close, when some open connection is
// waiting for a request: netutil's semantics let max connections that
// send nothing (each held until the header timeout) or keep alive after a
// request (held until the idle timeout) shut every other client out,
// liveness probes included. The rules:
//
//   - A connection is waiting from its accept until the header of a
//     request has arrived (its handler runs), and again once its reply is
//     written and it is kept alive; it is serving in between.
//   - The accept that brings the count to max closes the oldest waiting
//     connection other than the new one, if any, so that one place stays
//     free for the next client. A probe, which sends its request at once,
//     is served as soon as it is accepted, while connections that send
//     nothing give way to it one by one.
//   - While max are open (every one of them serving), the next accept
//     waits, the client in the listen queue holding no descriptor of the
//     server's, and a connection that finishes a reply is closed rather
//     than kept alive, freeing its place.
//   - A request that carries a body (these endpoints take none but the
//     console's playground, whose body is small and of a declared length:
//     console.AcceptsBody) is answered without reading it, with
//     "Connection: close", so that no client holds a serving place by
//     sending a body slowly.
//
// So the descriptors stay bounded by max, and a client that sends its
// request at once is answered at once even while the port is full of
// connections that send nothing, send slowly or idle after a request.
// (A flood of new connections, max-1 of them between a probe's accept and
// its header's arrival, microseconds apart, can still close the probe.)
// net/http tells when a request's header has arrived only to the handler,
// and netutil's limiter has no way to free a place: hence this by hand.
type connLimiter struct {
	net.Listener
	max int

	mu      sync.Mutex
	free    sync.Cond // signalled when a connection closes, and by Close
	open    int       // connections accepted and not closed
	waiting list.List // of *limitedConn, oldest first: the open connections waiting for a request
	done    bool      // the listener is closed
}

// limitedConn is a connection of a connLimiter.
type limitedConn struct {
	net.Conn
	l      *connLimiter
	wait   *list.Element // in l.waiting while waiting; nil while serving
	closed bool          // guarded by l.mu
}

// connKey is the request context's key to its *limitedConn.
type connKey struct{}

// limitConns returns ln limited to max connections (connLimiter), and
// sets hs's hooks and handler to tell it when each connection serves
// and waits.
func limitConns(ln net.Listener, max int, hs *http.Server) net.Listener {
	l := &connLimiter{Listener: ln, max: max}
	l.free.L = &l.mu
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		if lc, ok := c.(*limitedConn); ok && st == http.StateIdle {
			l.idle(lc)
		}
	}
	h := hs.Handler
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
			l.serving(lc)
		}
		if r.ContentLength != 0 && !console.AcceptsBody(r) && !grpcsvc.AcceptsBody(r) {
			// No body is read: net/http would wait for it (ReadTimeout)
			// before the reply and again after the handler.
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now()) // fails only on a closed connection
		}
		h.ServeHTTP(w, r)
	})
	return l
}

// Accept waits until fewer than max connections are open, accepts one,
// and closes the oldest waiting connection if that makes max.
func (l *connLimiter) Accept() (net.Conn, error) {
	l.mu.Lock()
	for l.open >= l.max && !l.done {
		l.free.Wait()
	}
	l.mu.Unlock()
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: l}
	l.mu.Lock()
	l.open++
	var evict *limitedConn
	if l.open >= l.max {
		if e := l.waiting.Front(); e != nil {
			evict = e.Value.(*limitedConn)
			evict.closeLocked()
		}
	}
	lc.wait = l.waiting.PushBack(lc)
	l.mu.Unlock()
	if evict != nil {
		_ = evict.Conn.Close() // its server goroutine sees the read fail and ends
	}
	return lc, nil
}

// Close closes the listener and wakes an Accept waiting for a place.
func (l *connLimiter) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.done = true // a waiting Accept goes on, to fail
	l.free.Broadcast()
	l.mu.Unlock()
	return err
}

// serving marks c as serving a request.
func (l *connLimiter) serving(c *limitedConn) {
	l.mu.Lock()
	if c.wait != nil {
		l.waiting.Remove(c.wait)
		c.wait = nil
	}
	l.mu.Unlock()
}

// idle marks c, whose reply is written, as waiting for its next request,
// or closes it when max connections are open.
func (l *connLimiter) idle(c *limitedConn) {
	l.mu.Lock()
	full := !c.closed && l.open >= l.max
	if full {
		c.closeLocked()
	} else if !c.closed && c.wait == nil {
		c.wait = l.waiting.PushBack(c)
	}
	l.mu.Unlock()
	if full {
		_ = c.Conn.Close()
	}
}

// closeLocked takes c out of its limiter's count; the caller closes
// c.Conn once l.mu is released.
func (c *limitedConn) closeLocked() {
	c.closed = true
	if c.wait != nil {
		c.l.waiting.Remove(c.wait)
		c.wait = nil
	}
	c.l.open--
	c.l.free.Signal()
}

// Close closes c and frees its place.
func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	if c.closed {
		c.l.mu.Unlock()
		return nil // closed already, to free its place
	}
	c.closeLocked()
	c.l.mu.Unlock()
	return c.Conn.Close()
}
