// Package server owns the network side of cellserver: it accepts RESP
// connections (replies encoded by commands.Writer), bounds what a client can
// make it buffer, enforces maxclients and idle timeouts, keeps the list of
// clients and the run-time settings, and hands every command to the
// commands table; it owns the settings table, TLS (tls.go) and the
// queues that carry pub/sub subscribers' output (push.go), and hands a
// replica's connection over to replication once REPLSYNC is answered
// (replication.go). It
// implements commands.Host. It imports commands, engine and packages under
// internal/, never daemon or cmd/cellserver, and it reads no flags or
// config files: cmd/cellserver builds its Config, and package daemon
// reads the TLS files (TLSConfigFromFiles) and wires in anything else
// (persistence, cluster mode, replication) through interfaces.
package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/ahead"
	"github.com/cellserver/cellserver/internal/fdlimit"
	"github.com/cellserver/cellserver/internal/loglimit"
	"github.com/cellserver/cellserver/internal/mono"
)

// Version is cellserver's own version.
const Version = "0.1.0"

// ErrServerClosed is returned by Serve and ListenAndServe after Shutdown
// or Close.
var ErrServerClosed = errors.New("server: closed")

// Server is a cellserver instance: an engine plus the connections to it.
type Server struct {
	eng   *engine.Engine
	loc   ahead.Locator       // eng's, for reading requests ahead
	clock *engine.ManualClock // DEBUG CLOCK's clock; nil when DEBUG is off
	table *commands.Table
	log   *logger

	cfgMu sync.RWMutex
	cfg   Config

	limits limits
	nextID atomic.Int64
	nowSec atomic.Int64 // a coarse clock for CLIENT LIST's idle

	oneThread atomic.Bool // GOMAXPROCS is 1, as of the last cron tick: see the yield before a batch's flush

	// raiseFDs raises the open file limit towards what it is asked
	// (fdlimit.Raise; tests replace it), for maxclients.
	raiseFDs func(want uint64) (limit uint64, ok bool, err error)
	peakMem  atomic.Int64 // the highest used_memory seen (notePeak)

	connsReceived atomic.Int64
	connsRejected atomic.Int64
	outputDropped atomic.Int64   // clients disconnected for their output limits
	tlsFailures   loglimit.Limit // the log lines of failed TLS handshakes (tls.go)
	started       time.Time
	runID         string // INFO's run_id (newRunID)

	ratesMu sync.Mutex // guards the meters
	ops     rateMeter  // commands run
	netIn   rateMeter  // bytes read
	netOut  rateMeter  // bytes written

	mu         sync.Mutex
	clients    map[*commands.Client]*conn
	retired    []commands.CommandCounts
	retiredIn  int64 // bytes read from clients that have gone
	retiredOut int64 // and written to them
	listeners  []net.Listener
	closing    bool
	conns      sync.WaitGroup

	persist        Persistence      // nil: persistence off
	repl           Replication      // nil: no replication (a server built without the daemon)
	link           *commands.Client // a replica's link to its primary, listed as a client; guarded by mu
	saveOnShutdown atomic.Bool      // take a last snapshot at shutdown (SHUTDOWN NOSAVE clears it)

	shutdownOnce sync.Once
	done         chan struct{} // closed when Shutdown has finished
	stopping     chan struct{} // closed when Shutdown begins
	listenOnce   sync.Once
	listening    chan struct{} // closed once ListenAndServe listens on every address
	stopCron     chan struct{}
}

// New returns a server for cfg, which must be valid.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, started: time.Now(), runID: newRunID(), clients: map[*commands.Client]*conn{},
		done: make(chan struct{}), stopCron: make(chan struct{}),
		stopping: make(chan struct{}), listening: make(chan struct{}),
		log: newLogger(cfg.LogLevel, cfg.LogOutput), raiseFDs: fdlimit.Raise,
	}
	if err := s.fitMaxClients(); err != nil {
		return nil, err
	}
	ecfg := engine.Config{Shards: cfg.Shards, TrackChanges: cfg.Persistent()}
	if cfg.EnableDebugCommand {
		s.clock = &engine.ManualClock{}
		if cfg.DebugClockStart != 0 {
			s.clock.Set(cfg.DebugClockStart)
		}
		ecfg.Clock = s.clock
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		return nil, err
	}
	s.eng, s.loc = eng, eng.Ahead()
	s.table = commands.NewTable(s, commands.Options{EnableDebug: cfg.EnableDebugCommand, DebugLocalOnly: cfg.DebugLocalOnly, Router: cfg.Router, Secret: isSecret, Rules: cfg.Rules})
	for _, r := range cfg.RenameCommands {
		if err := s.table.Rename(r[0], r[1]); err != nil {
			return nil, fmt.Errorf("rename-command %s %q: %w", r[0], r[1], err)
		}
	}
	s.table.SetSlowlog(cfg.SlowlogLogSlowerThan, cfg.SlowlogMaxLen)
	s.table.SetAuthLimits(cfg.AuthLimits)
	s.storeLimits(&cfg)
	s.saveOnShutdown.Store(true)
	s.nowSec.Store(time.Now().Unix())
	s.log.Info("cellserver starting", "version", Version, "pid", os.Getpid(), "go", runtime.Version())
	var inForce []any
	for _, kv := range cfg.Get(func(string) bool { return true }) {
		inForce = append(inForce, kv[0], redact(kv[0], kv[1]))
	}
	s.log.Info("Configuration in force", inForce...)
	for _, d := range cfg.Directives {
		s.log.Info("Directive accepted without effect: " + d.String())
	}
	if cfg.Dir != "" && !cfg.Persistent() {
		s.log.Logf("warning", "dir %s is set but save is not: persistence is off and the keys are kept in memory only (add save 1 1 to snapshot them into dir)", cfg.Dir)
	}
	s.oneThread.Store(runtime.GOMAXPROCS(0) == 1)
	eng.Start()
	heap := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		heap[i].Name = name
	}
	rel := new(releaser)
	_, held := heapHeld(heap)
	rel.observe(held)
	go s.cron(rel, heap)
	return s, nil
}

// cron runs the server's periodic work. The releaser's heap base is
// taken before it starts, before any client is served.
func (s *Server) cron(rel *releaser, heap []metrics.Sample) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for tick := 0; ; tick++ {
		select {
		case <-s.stopCron:
			return
		case now := <-t.C:
			s.nowSec.Store(now.Unix())
			s.sampleRates(mono.Now())
			s.usedMemory()
			if tick%4 != 0 {
				continue
			}
			// The thread count may change while running (cmd/cellserver's
			// sizing, with the threads setting at 0).
			s.oneThread.Store(runtime.GOMAXPROCS(0) == 1)
			tables := s.eng.KeyspaceBytes()
			free, held := heapHeld(heap)
			if rel.check(now, tables, free, held) {
				debug.FreeOSMemory()
				_, after := heapHeld(heap)
				rel.observe(after)
				s.log.Logf("verbose", "released memory: keyspace at %d bytes, heap holding %d bytes (%d free), %d after", tables, held, free, after)
			}
		}
	}
}

// sampleRates reads the totals the instantaneous rates of INFO come from.
func (s *Server) sampleRates(nowNs int64) {
	var calls, in, out int64
	s.mu.Lock()
	for _, cc := range s.retired {
		calls += cc.Calls
	}
	in, out = s.retiredIn, s.retiredOut
	for cl := range s.clients {
		calls += cl.TotalCalls()
		i, o := cl.NetIO()
		in += i
		out += o
	}
	s.mu.Unlock()
	s.ratesMu.Lock()
	s.ops.add(nowNs, calls)
	s.netIn.add(nowNs, in)
	s.netOut.add(nowNs, out)
	s.ratesMu.Unlock()
}

// usedMemory returns the memory maxmemory is checked against
// (engine.Engine.UsedMemory: the keyspace's bytes, the connections'
// buffers, which each connection adds as they change size, and the
// replication backlog's ring), and folds it
// into the peak. The cron calls it four times a second, and INFO and the
// metrics whenever they read it. The Go heap's garbage is not counted,
// so that a large request or reply, once answered, does not hold the
// limit for the minutes an idle server may take to collect it; the
// buffers are bounded by the settings (client-query-buffer-limit,
// client-output-buffer-limit) and a connection gives a large one back
// after the request or reply that needed it.
func (s *Server) usedMemory() int64 {
	used := s.eng.UsedMemory()
	s.notePeak(used)
	return used
}

// notePeak raises the peak of used_memory to used if it is higher.
func (s *Server) notePeak(used int64) {
	for {
		p := s.peakMem.Load()
		if used <= p || s.peakMem.CompareAndSwap(p, used) {
			return
		}
	}
}

// newRunID returns a run id as Redis draws one: 40 hexadecimal characters
// from crypto/rand, 160 bits, so that two starts never share one.
func newRunID() string {
	var b [20]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}
