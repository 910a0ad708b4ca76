package daemon

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/grpcsvc"
	"github.com/cellserver/cellserver/persist"
	"github.com/cellserver/cellserver/replication"
	"github.com/cellserver/cellserver/rules"
	"github.com/cellserver/cellserver/server"
)

// Config configures a Daemon.
type Config struct {
	// Server is the server's configuration. It holds the settings of the
	// parts the daemon wires around the server too: Dir and Save
	// (persistence), the Cluster* settings (cluster mode), MetricsAddr
	// (HTTP) and the tls-* files, which New reads into TLSConfig when
	// TLSPort is set and TLSConfig is nil. It must be valid
	// (server.Config.Validate). Default: server.DefaultConfig().
	Server server.Config
	// Busy, when not nil, is called with true when persistence's
	// background work (a snapshot, then the store's compactions) starts
	// and with false when it ends (persist.SaverConfig.Busy):
	// cmd/cellserver runs one more thread meanwhile. Default: nil.
	Busy func(busy bool)
}

// Daemon is a cellserver with every part its Config asks for: the server,
// and around it persistence, cluster mode and the metrics' HTTP server.
type Daemon struct {
	cfg   server.Config
	srv   *server.Server
	node  *cluster.Node // nil: cluster mode off
	p     *persistence  // nil: persistence off
	rules *rules.Manager
	repl  *replication.Replication
	// rulesEvery is how often rules-file is checked for changes
	// (rulesWatchInterval; tests shorten it).
	rulesEvery time.Duration
	// rl is the gRPC rate-limit service, answering from rules (nil:
	// neither grpc-port nor the HTTP port is set).
	rl *grpcsvc.Service

	ready    chan struct{} // Ready
	stopping chan struct{} // Stopping
	stopOnce sync.Once
	http     httpConfig // the metrics' HTTP server's bounds
}

// New builds the parts cfg asks for and wires them together: it reads the
// TLS files, opens the snapshot store (refusing to start when dir is
// missing or not writable, or the store is unreadable), builds the
// cluster node and the server. Nothing listens or runs until Run. When New
// fails it closes what it built.
func New(cfg Config) (*Daemon, error) {
	scfg := cfg.Server
	var err error
	if scfg.TLSPort != 0 && scfg.TLSConfig == nil {
		if scfg.TLSConfig, err = server.TLSConfigFromFiles(&scfg); err != nil {
			return nil, err
		}
	}
	var store *persist.Store
	storeLog := &earlyLog{}
	if scfg.Persistent() {
		if store, err = openStore(scfg.Dir, scfg.StoreDamaged, storeLog.Logf); err != nil {
			return nil, err
		}
	}
	d := &Daemon{ready: make(chan struct{}), stopping: make(chan struct{}), http: defaultHTTPConfig(), rulesEvery: rulesWatchInterval}
	node, err := newClusterNode(&scfg, func(level, format string, args ...any) { d.srv.Logf(level, format, args...) })
	if err != nil {
		if store != nil {
			store.Close()
		}
		return nil, err
	}
	d.node = node // newRules shares the rules through it
	if d.rules, err = newRules(d, &scfg); err == nil && store != nil {
		err = restoreRules(d.rules, store)
	}
	if err != nil {
		if store != nil {
			store.Close()
		}
		if node != nil {
			_ = node.Close()
		}
		return nil, err
	}
	srv, err := server.New(scfg)
	if err != nil {
		if store != nil {
			store.Close()
		}
		return nil, err
	}
	d.cfg, d.srv, d.node = scfg, srv, node
	storeLog.attach(srv.Logf)
	if d.rl, err = newRateLimitService(&scfg, d.rules.Service(), srv.Logf); err != nil {
		_ = srv.Close()
		if store != nil {
			store.Close()
		}
		return nil, err
	}
	d.repl = wireReplication(d, srv, scfg)
	if store != nil {
		// From here srv closes the store, however it stops.
		d.p = wirePersistence(srv, store, scfg, cfg.Busy)
	}
	return d, nil
}

// Run starts the parts in order and serves until Shutdown, Close or
// SHUTDOWN: the cluster node joins its cluster (with persistence, once
// the keys are restored, so that it joins knowing which keys it holds;
// until then the server answers -LOADING), the metrics' HTTP server
// listens (/metrics, /healthz, /readyz), the keys are restored in the
// background, and the server listens on its ports; Ready is closed once it
// serves. After a shutdown Run returns nil, or the error that made
// restoring the keys or starting the node fail; otherwise it returns the
// first error starting a part or listening. It stops the metrics' HTTP
// server and closes the node before it returns.
func (d *Daemon) Run() error {
	defer d.markStopping()
	srv, node := d.srv, d.node
	var startNode func() error
	if node != nil {
		defer node.Close()
		startNode = func() error { return node.Start(srv.Engine()) }
		if d.p == nil {
			// A Shutdown before Run closed the node: the server is closed
			// too, and ListenAndServe below says so.
			if err := startNode(); err != nil && !errors.Is(err, cluster.ErrClosed) {
				_ = srv.Close()
				return err
			}
			startNode = nil
		}
	}
	stopRules := make(chan struct{})
	defer close(stopRules)
	go d.rules.Watch(stopRules, d.rulesEvery)
	loaded := make(chan struct{})
	d.watchReady(loaded)
	if d.cfg.MetricsAddr != "" {
		stop, err := serveHTTP(metricsSource{srv, d.p, node, d.rules, d.repl}, d.readiness, d.cfg.MetricsAddr, d.http, d.cfg.TLSConfig, d.rl)
		if err != nil {
			_ = srv.Close()
			return err
		}
		defer stop()
	}
	if d.cfg.GRPCPort != 0 {
		stop, err := d.serveGRPC(d.rl)
		if err != nil {
			_ = srv.Close()
			return err
		}
		defer stop()
	}
	loadErr := make(chan error, 1)
	if d.p != nil {
		d.p.restore(srv, d.cfg, startNode, loaded, loadErr)
	} else {
		close(loaded)
		loadErr <- nil
	}
	go func() {
		// A replica connects once its own keys are loaded: the full copy
		// then replaces them all, and a restore cannot bring back a key
		// the primary has removed.
		select {
		case <-loaded:
		case <-d.stopping:
			return
		}
		if err := startReplica(d.repl, d.cfg); err != nil {
			srv.Logf("warning", "replicaof %s: %v", d.cfg.ReplicaOf, err)
		}
	}()
	err := srv.ListenAndServe()
	if errors.Is(err, server.ErrServerClosed) {
		<-srv.Done()
		select {
		case err := <-loadErr:
			return err
		default:
			return nil
		}
	}
	_ = srv.Close()
	return err
}

// Shutdown stops the daemon gracefully: in cluster mode the node first
// hands its slots, with their keys, to the others and leaves (a node still
// loading has not joined, and once closed never will), then the server
// shuts down (server.Server.Shutdown: the last snapshot, with persistence
// on). It returns ctx's error if ctx ends first.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.markStopping()
	if d.node != nil {
		if err := d.node.Leave(); err != nil && !errors.Is(err, cluster.ErrNotStarted) {
			d.srv.Logf("warning", "cluster: leaving: %v", err)
		}
		_ = d.node.Close()
	}
	return d.srv.Shutdown(ctx)
}

// Close stops the daemon without waiting: the node closes without handing
// its slots off, and the server closes (server.Server.Close).
func (d *Daemon) Close() error {
	d.markStopping()
	if d.node != nil {
		_ = d.node.Close()
	}
	return d.srv.Close()
}

// Done is closed once the server's shutdown is complete.
func (d *Daemon) Done() <-chan struct{} { return d.srv.Done() }

// Logf writes to the server's log at a level.
func (d *Daemon) Logf(level, format string, args ...any) { d.srv.Logf(level, format, args...) }
