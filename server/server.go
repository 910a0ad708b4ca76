// Package server owns the network side of cellserver: it accepts RESP
// connections (replies encoded by commands.Writer), bounds what a client can
// make it buffer, enforces maxclients and idle timeouts, keeps the list of
// clients and the run-time settings, and hands every command to the
// commands table. It implements commands.Host. It imports commands, engine
// and packages under internal/, never cmd/cellserver, and it reads no
// flags or files: cmd/cellserver builds its Config and wires in anything
// else (persistence, cluster mode) through interfaces.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/internal/ahead"
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

	connsReceived atomic.Int64
	connsRejected atomic.Int64
	started       time.Time

	mu        sync.Mutex
	clients   map[*commands.Client]*conn
	retired   []commands.CommandCounts
	listeners []net.Listener
	closing   bool
	conns     sync.WaitGroup

	shutdownOnce sync.Once
	done         chan struct{} // closed when Shutdown has finished
	stopCron     chan struct{}
}

// New returns a server for cfg, which must be valid.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, started: time.Now(), clients: map[*commands.Client]*conn{},
		done: make(chan struct{}), stopCron: make(chan struct{}),
		log: newLogger(cfg.LogLevel),
	}
	ecfg := engine.Config{Shards: cfg.Shards}
	if cfg.EnableDebugCommand {
		s.clock = &engine.ManualClock{}
		ecfg.Clock = s.clock
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		return nil, err
	}
	s.eng, s.loc = eng, eng.Ahead()
	s.table = commands.NewTable(s, commands.Options{EnableDebug: cfg.EnableDebugCommand, Router: cfg.Router})
	s.storeLimits(&cfg)
	s.nowSec.Store(time.Now().Unix())
	eng.Start()
	go s.cron()
	return s, nil
}

func (s *Server) cron() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	var rel releaser
	free := []metrics.Sample{{Name: heapFreeMetric}}
	for tick := 0; ; tick++ {
		select {
		case <-s.stopCron:
			return
		case now := <-t.C:
			s.nowSec.Store(now.Unix())
			if tick%4 != 0 {
				continue
			}
			tables := s.eng.Stats().TableBytes
			if rel.check(now, tables, heapFree(free)) {
				debug.FreeOSMemory()
				s.log.Logf("verbose", "released memory: tables at %d bytes", tables)
			}
		}
	}
}

// ListenAndServe listens on every address of Config.Bind at Config.Port
// and serves until Shutdown. It returns ErrServerClosed after a shutdown,
// or the first listening error.
func (s *Server) ListenAndServe() error {
	s.cfgMu.RLock()
	binds, port := s.cfg.Bind, s.cfg.Port
	s.cfgMu.RUnlock()
	var lns []net.Listener
	for _, b := range binds {
		ln, err := net.Listen("tcp", net.JoinHostPort(b, strconv.Itoa(port)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("server: listen on %s port %d: %w", b, port, err)
		}
		lns = append(lns, ln)
	}
	errs := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errs <- s.Serve(ln) }()
	}
	s.log.Logf("notice", "Ready to accept connections tcp on %s port %d", binds, port)
	var first error
	for range lns {
		if err := <-errs; first == nil || errors.Is(first, ErrServerClosed) {
			first = err
		}
	}
	return first
}

// Serve serves connections accepted from ln until Shutdown or Close, and
// returns ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of file descriptors or a passing error: wait, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Logf("warning", "accept: %v; retrying in %v", err, backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if c := s.admit(nc); c != nil {
			go c.serve()
		}
	}
}

// admit registers a new connection, or refuses it when the server is
// closing or at maxclients.
func (s *Server) admit(nc net.Conn) *conn {
	s.connsReceived.Add(1)
	s.cfgMu.RLock()
	maxClients, pass := s.cfg.MaxClients, s.cfg.RequirePass
	s.cfgMu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		nc.Close()
		return nil
	}
	if len(s.clients) >= maxClients {
		s.connsRejected.Add(1)
		nc.SetWriteDeadline(time.Now().Add(time.Second))           //nolint:errcheck
		nc.Write([]byte("-ERR max number of clients reached\r\n")) //nolint:errcheck
		nc.Close()
		return nil
	}
	nc = newRawConn(nc)
	c := &conn{s: s, nc: nc, w: commands.NewWriter(nc), oneThread: runtime.GOMAXPROCS(0) == 1}
	c.cl = s.table.NewClient(commands.ClientOptions{
		ID:         s.nextID.Add(1),
		Addr:       nc.RemoteAddr().String(),
		LocalAddr:  nc.LocalAddr().String(),
		Writer:     c.w,
		Close:      func() { nc.Close() },
		Authorized: pass == "",
	})
	s.clients[c.cl] = c
	s.conns.Add(1)
	return c
}

// release unregisters a connection that has ended, keeping its counters.
func (s *Server) release(c *conn) {
	c.nc.Close()
	s.mu.Lock()
	counts := c.cl.Counts() // under mu: a CONFIG RESETSTAT cannot slip in between
	delete(s.clients, c.cl)
	if len(s.retired) < len(counts) {
		s.retired = append(s.retired, make([]commands.CommandCounts, len(counts)-len(s.retired))...)
	}
	for i, cc := range counts {
		s.retired[i].Calls += cc.Calls
		s.retired[i].Rejected += cc.Rejected
		s.retired[i].Failed += cc.Failed
	}
	s.mu.Unlock()
	s.conns.Done()
}

// Shutdown stops accepting connections, closes the open ones once the
// command each is running has finished, stops the engine's background work
// and returns. It returns ctx's error if ctx ends first. Later calls wait
// for the first to finish.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		go func() {
			s.mu.Lock()
			s.closing = true
			ls := s.listeners
			for _, c := range s.clients {
				// A command running now finishes; its reply has nowhere to
				// go, and nothing after it runs.
				c.cl.Kill()
			}
			s.mu.Unlock()
			for _, l := range ls {
				l.Close()
			}
			s.conns.Wait()
			close(s.stopCron)
			s.eng.Close()
			s.log.Logf("warning", "cellserver is now ready to exit, bye bye...")
			close(s.done)
		}()
	})
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close shuts the server down without waiting.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Done is closed once a shutdown (Shutdown, Close or SHUTDOWN) is complete.
func (s *Server) Done() <-chan struct{} { return s.done }

// Addrs returns the addresses the server is listening on.
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []net.Addr
	for _, l := range s.listeners {
		out = append(out, l.Addr())
	}
	return out
}

// --- commands.Host ---

var _ commands.Host = (*Server)(nil)

// Engine returns the limiter store.
func (s *Server) Engine() *engine.Engine { return s.eng }

// DebugClock returns DEBUG CLOCK's clock, nil when DEBUG is off.
func (s *Server) DebugClock() *engine.ManualClock { return s.clock }

// RequirePass returns the password AUTH checks.
func (s *Server) RequirePass() string {
	s.cfgMu.RLock()
	defer s.cfgMu.RUnlock()
	return s.cfg.RequirePass
}

// QueryBufferLimit returns client-query-buffer-limit.
func (s *Server) QueryBufferLimit() int64 { return s.limits.maxQuery.Load() }

// Clients returns the connected clients.
func (s *Server) Clients() []*commands.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*commands.Client, 0, len(s.clients))
	for c := range s.clients {
		out = append(out, c)
	}
	return out
}

// ConfigGet returns the settings matching pattern.
func (s *Server) ConfigGet(pattern string) [][2]string {
	s.cfgMu.RLock()
	defer s.cfgMu.RUnlock()
	return s.cfg.Get(func(name string) bool { return commands.Match(pattern, name) })
}

// ConfigSet changes a setting that may change at run time.
func (s *Server) ConfigSet(name, value string) error {
	st := lookupSetting(name)
	switch {
	case st == nil || st.set == nil:
		return commands.ErrUnknownSetting
	case !st.mutable:
		return ErrImmutableSetting
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	if err := s.cfg.Set(name, value); err != nil {
		return err
	}
	s.storeLimits(&s.cfg)
	s.log.setLevel(s.cfg.LogLevel)
	if lookupSetting(name).name == "timeout" {
		s.applyTimeout(s.cfg.Timeout)
	}
	return nil
}

// applyTimeout gives connections blocked in a read the new idle timeout at
// once (each connection sets its own deadline again before its next read).
func (s *Server) applyTimeout(d time.Duration) {
	var at time.Time // zero: no deadline
	if d > 0 {
		at = time.Now().Add(d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.clients {
		c.nc.SetReadDeadline(at) //nolint:errcheck // a closed connection is going anyway
	}
}

// storeLimits publishes the request bounds and idle timeout to the
// connections, which read them on every request.
func (s *Server) storeLimits(cfg *Config) {
	s.limits.maxBulk.Store(cfg.ProtoMaxBulkLen)
	s.limits.maxQuery.Store(cfg.QueryBufferLimit)
	s.limits.timeout.Store(int64(cfg.Timeout))
}

// Stats returns the figures INFO reports.
func (s *Server) Stats() commands.HostStats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.cfgMu.RLock()
	st := commands.HostStats{
		Version: Version, Port: s.cfg.Port, PID: os.Getpid(), ConfigFile: s.cfg.ConfigFile,
		Executable: executable(), Started: s.started, MaxClients: s.cfg.MaxClients,
		// The tables' large arrays are mapped outside the Go heap, which
		// HeapAlloc does not count.
		UsedMemory: ms.HeapAlloc + uint64(s.eng.OffHeapBytes()), UsedMemoryRSS: rss(),
	}
	s.cfgMu.RUnlock()
	if addrs := s.Addrs(); len(addrs) > 0 {
		if ta, ok := addrs[0].(*net.TCPAddr); ok {
			st.Port = ta.Port
		}
	}
	st.ConnsReceived = s.connsReceived.Load()
	st.ConnsRejected = s.connsRejected.Load()
	s.mu.Lock()
	st.CommandsRetired = append([]commands.CommandCounts(nil), s.retired...)
	s.mu.Unlock()
	return st
}

// ResetStats zeroes the counters CONFIG RESETSTAT resets.
func (s *Server) ResetStats() {
	s.connsReceived.Store(0)
	s.connsRejected.Store(0)
	s.mu.Lock()
	s.retired = nil
	for c := range s.clients {
		c.ResetCounts()
	}
	s.mu.Unlock()
}

// RequestShutdown starts a shutdown and returns at once (SHUTDOWN).
func (s *Server) RequestShutdown() {
	go func() { _ = s.Shutdown(context.Background()) }()
}

// Logf logs at a level.
func (s *Server) Logf(level, format string, args ...any) { s.log.Logf(level, format, args...) }

// executable returns the running binary's path, "" if unknown.
func executable() string {
	p, _ := os.Executable()
	return p
}

// rss reads the process's resident set size from /proc, 0 if unavailable.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res uint64
	if _, err := fmt.Sscan(string(b), &size, &res); err != nil {
		return 0
	}
	return res * uint64(os.Getpagesize())
}
