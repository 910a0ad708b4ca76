package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/grpcsvc"
	"github.com/cellserver/cellserver/rules"
	"github.com/cellserver/cellserver/server"
)

// The gRPC rate-limit service (package grpcsvc): Envoy's ShouldRateLimit
// on grpc-port (off by default) and /json on the HTTP port, both
// answered by the daemon's rules Checker, the one RL.CHECK asks. Health
// checks answer SERVING from Ready until the daemon begins to stop.

// grpcHealthEvery is how often the gRPC health status is set again from
// the daemon's readiness.
const grpcHealthEvery = time.Second

// grpcShutdownTimeout bounds how long a graceful stop waits for the calls
// under way before it closes their connections.
const grpcShutdownTimeout = 5 * time.Second

// newRateLimitService builds the service over checker from cfg's
// settings, when grpc-port or the HTTP port (for /json) is set; nil
// otherwise.
func newRateLimitService(cfg *server.Config, checker rules.Checker, logf func(level, format string, args ...any)) (*grpcsvc.Service, error) {
	if cfg.GRPCPort == 0 && cfg.MetricsAddr == "" {
		return nil, nil
	}
	gc := grpcsvc.Config{ResponseHeaders: cfg.GRPCResponseHeaders, MaxConns: cfg.GRPCMaxConns, Logf: logf}
	if cfg.TLSGRPC {
		if cfg.TLSConfig == nil {
			return nil, errors.New("tls-grpc: needs tls-port with its files")
		}
		gc.TLS = cfg.TLSConfig // its certificate reloads as the TLS port's
	}
	return grpcsvc.New(checker, gc)
}

// serveGRPC listens on grpc-port on every bind address (an optional one,
// "-addr", that the machine does not have is skipped, as the RESP ports
// do) and serves s there. Once the daemon is ready, s's health follows
// /readyz's answer (followReadiness); when the daemon begins to stop
// (Stopping), s shuts down gracefully. stop marks the daemon stopping and
// waits for that.
func (d *Daemon) serveGRPC(s *grpcsvc.Service) (stop func(), err error) {
	var lns []net.Listener
	for _, b := range d.cfg.Bind {
		host, optional := server.BindHost(b)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(d.cfg.GRPCPort)))
		if err != nil && optional && !errors.Is(err, syscall.EADDRINUSE) {
			d.srv.Logf("warning", "grpc: skipping optional address %s: %v", b, err)
			continue
		}
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("grpc-port: %w", err)
		}
		lns = append(lns, ln)
	}
	for _, ln := range lns {
		go func() { _ = s.Serve(ln) }() // ErrServerClosed once stopped
		scheme := "plaintext"
		if d.cfg.TLSGRPC {
			scheme = "TLS"
		}
		d.srv.Logf("notice", "Serving Envoy's rate-limit service (gRPC, %s) on %s", scheme, ln.Addr())
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-d.ready:
			followReadiness(s, d.readiness, grpcHealthEvery, d.stopping)
		case <-d.stopping:
		}
		// Shutdown health-checks NOT_SERVING at once, then lets the
		// calls under way finish, while the rest of the daemon stops.
		ctx, cancel := context.WithTimeout(context.Background(), grpcShutdownTimeout)
		defer cancel()
		_ = s.Shutdown(ctx) // past the timeout, the connections are closed
	}()
	return func() {
		d.markStopping()
		<-stopped
	}, nil
}

// servingSetter is what followReadiness sets: *grpcsvc.Service.
type servingSetter interface{ SetServing(bool) }

// followReadiness sets s's health from ready (the daemon's /readyz answer)
// now and every period until stop is closed: in cluster mode a node whose
// slots lose their owner, or wait for a hand-off, answers NOT_SERVING, so
// that Envoy's health checks send its calls to another node meanwhile.
func followReadiness(s servingSetter, ready func() (bool, string), every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	was, first := false, true
	for {
		if ok, _ := ready(); ok != was || first {
			s.SetServing(ok)
			was, first = ok, false
		}
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}
