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
	"crypto/tls"
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
	"github.com/cellserver/cellserver/internal/fdlimit"
	"github.com/cellserver/cellserver/internal/mono"
	"github.com/cellserver/cellserver/internal/rawconn"
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
	raiseFDs   func(want uint64) (limit uint64, ok bool, err error)
	heapSample []metrics.Sample // the heap's objects, for the memory limit: cron only

	connsReceived atomic.Int64
	connsRejected atomic.Int64
	outputDropped atomic.Int64 // clients disconnected for their output limits
	started       time.Time

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

	persist        Persistence // nil: persistence off
	saveOnShutdown atomic.Bool // take a last snapshot at shutdown (SHUTDOWN NOSAVE clears it)

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
		log: newLogger(cfg.LogLevel, cfg.LogOutput), raiseFDs: fdlimit.Raise,
	}
	if err := s.fitMaxClients(); err != nil {
		return nil, err
	}
	ecfg := engine.Config{Shards: cfg.Shards, TrackChanges: cfg.Dir != ""}
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
	heap := make([]metrics.Sample, 1)
	heap[0].Name = heapObjectsMetric
	s.heapSample = heap
	s.table = commands.NewTable(s, commands.Options{EnableDebug: cfg.EnableDebugCommand, DebugLocalOnly: cfg.DebugLocalOnly, Router: cfg.Router})
	for _, r := range cfg.RenameCommands {
		if err := s.table.Rename(r[0], r[1]); err != nil {
			return nil, fmt.Errorf("rename-command %s %q: %w", r[0], r[1], err)
		}
	}
	s.table.SetSlowlog(cfg.SlowlogLogSlowerThan, cfg.SlowlogMaxLen)
	s.storeLimits(&cfg)
	s.saveOnShutdown.Store(true)
	s.reportHeap()
	s.nowSec.Store(time.Now().Unix())
	s.log.Info("cellserver starting", "version", Version, "pid", os.Getpid(), "go", runtime.Version())
	var inForce []any
	for _, kv := range cfg.Get(func(string) bool { return true }) {
		inForce = append(inForce, kv[0], redact(kv[0], kv[1]))
	}
	s.log.Info("Configuration in force", inForce...)
	for _, d := range cfg.Ignored {
		s.log.Debug("Directive accepted without effect: " + d)
	}
	s.oneThread.Store(runtime.GOMAXPROCS(0) == 1)
	eng.Start()
	go s.cron()
	return s, nil
}

// reservedFDs is how many open files fitMaxClients keeps for other uses
// than clients (listeners, the poller, logs), as Redis's
// CONFIG_MIN_RESERVED_FDS.
const reservedFDs = 32

// fitMaxClients makes maxclients fit the limit on open files, as Redis's
// adjustOpenFilesLimit: it asks raise for maxclients + reservedFDs files;
// if the limit stays lower, it lowers maxclients to the limit less the
// reserve and logs it in Redis's words, so that clients past the limit
// get "max number of clients reached" rather than waiting in the accept
// queue of a server out of descriptors. It fails when the limit leaves no
// room for a client.
func (s *Server) fitMaxClients() error {
	want := uint64(s.cfg.MaxClients) + reservedFDs
	limit, ok, err := s.raiseFDs(want)
	if !ok || limit >= want {
		return nil
	}
	if limit <= reservedFDs {
		return fmt.Errorf("server: the open file limit (ulimit -n) of %d is not enough for the server to start; raise it to at least %d", limit, want)
	}
	old := s.cfg.MaxClients
	s.cfg.MaxClients = int(limit - reservedFDs)
	if err == nil {
		err = syscall.EPERM
	}
	s.log.Logf("warning", "You requested maxclients of %d requiring at least %d max file descriptors.", old, want)
	s.log.Logf("warning", "Server can't set maximum open files to %d because of OS error: %v.", want, err)
	s.log.Logf("warning", "Current maximum open files is %d. maxclients has been reduced to %d to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.", limit, s.cfg.MaxClients)
	return nil
}

func (s *Server) cron() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	var rel releaser
	heap := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		heap[i].Name = name
	}
	for tick := 0; ; tick++ {
		select {
		case <-s.stopCron:
			return
		case now := <-t.C:
			s.nowSec.Store(now.Unix())
			s.sampleRates(mono.Now())
			s.reportHeap()
			if tick%4 != 0 {
				continue
			}
			// The thread count may change while running (cmd/cellserver's
			// sizing, with the threads setting at 0).
			s.oneThread.Store(runtime.GOMAXPROCS(0) == 1)
			tables := s.eng.Stats().TableBytes
			held, live := spare(heap)
			if rel.check(now, tables, held, live) {
				debug.FreeOSMemory()
				s.log.Logf("verbose", "released memory: tables at %d bytes, heap %d bytes over its live %d", tables, held, live)
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

// heapObjectsMetric is the Go heap's objects, live or not yet collected:
// what the heap holds for the memory limit.
const heapObjectsMetric = "/memory/classes/heap/objects:bytes"

// reportHeap tells the engine what the Go heap holds, for maxmemory. It
// reads a runtime metric, which stops nothing (runtime.ReadMemStats
// would stop the world).
func (s *Server) reportHeap() {
	metrics.Read(s.heapSample)
	if v := s.heapSample[0].Value; v.Kind() == metrics.KindUint64 {
		s.eng.SetOtherMemory(int64(v.Uint64()))
	}
}

// ListenAndServe listens on every address of Config.Bind at Config.Port
// and serves until Shutdown. It returns ErrServerClosed after a shutdown,
// or the first listening error.
func (s *Server) ListenAndServe() error {
	s.cfgMu.RLock()
	binds, port, tlsPort, tlsCfg := s.cfg.Bind, s.cfg.Port, s.cfg.TLSPort, s.cfg.TLSConfig
	s.cfgMu.RUnlock()
	if tlsPort != 0 && tlsCfg == nil {
		return errors.New("server: tls-port without a TLS configuration")
	}
	var lns []net.Listener
	listen := func(b string, port int) error {
		ln, err := net.Listen("tcp", net.JoinHostPort(b, strconv.Itoa(port)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("server: listen on %s port %d: %w", b, port, err)
		}
		lns = append(lns, ln)
		return nil
	}
	for _, b := range binds {
		if err := listen(b, port); err != nil {
			return err
		}
	}
	plain := len(lns)
	if tlsPort != 0 {
		for _, b := range binds {
			if err := listen(b, tlsPort); err != nil {
				return err
			}
		}
		for i := plain; i < len(lns); i++ {
			// A TLS connection is read through tls.Conn, never rawConn:
			// newRawConn passes a *tls.Conn through as it is.
			lns[i] = tls.NewListener(lns[i], tlsCfg)
		}
	}
	errs := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errs <- s.Serve(ln) }()
	}
	s.cfgMu.RLock()
	open := !s.cfg.ProtectedMode && s.cfg.RequirePass == ""
	guarded := s.cfg.ProtectedMode && s.cfg.RequirePass == ""
	s.cfgMu.RUnlock()
	for _, ln := range lns {
		if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
			switch {
			case open:
				s.log.Logf("warning", "WARNING: listening on %s with protected-mode no and no requirepass: any client that can reach it may run any command", ta)
			case guarded:
				s.log.Logf("notice", "Protected mode: listening on %s with no requirepass, only loopback clients are served", ta)
			}
		}
	}
	s.log.Logf("notice", "Ready to accept connections tcp on %s port %d", binds, port)
	if tlsPort != 0 {
		s.log.Logf("notice", "Ready to accept connections tls on %s port %d", binds, tlsPort)
	}
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

// admit registers a new connection, or refuses it when protected mode
// turns it away, the server is closing or at maxclients.
func (s *Server) admit(nc net.Conn) *conn {
	s.connsReceived.Add(1)
	s.cfgMu.RLock()
	maxClients, pass := s.cfg.MaxClients, s.cfg.RequirePass
	refused := s.cfg.refuses(nc.RemoteAddr())
	s.cfgMu.RUnlock()
	if refused {
		s.connsRejected.Add(1)
		go refuse(nc, commands.ErrProtectedMode)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		nc.Close()
		return nil
	}
	if len(s.clients) >= maxClients {
		s.connsRejected.Add(1)
		s.log.Info("Client rejected: max number of clients reached", "addr", nc.RemoteAddr().String(), "maxclients", maxClients)
		go refuse(nc, commands.ErrMaxClients)
		return nil
	}
	nc = rawconn.Wrap(nc)
	c := &conn{s: s, nc: nc, w: commands.NewWriter(nc)}
	c.cl = s.table.NewClient(commands.ClientOptions{
		ID:         s.nextID.Add(1),
		Addr:       nc.RemoteAddr().String(),
		LocalAddr:  nc.LocalAddr().String(),
		Writer:     c.w,
		Close:      func() { nc.Close() },
		Flush:      func() bool { return c.flush(false) },
		Authorized: pass == "",
		Local:      isLocal(nc.RemoteAddr()),
	})
	s.clients[c.cl] = c
	s.conns.Add(1)
	return c
}

// refuse answers a new connection the error msg, waiting at most a second
// for the write, and closes it. It runs on its own goroutine, so that a
// client that does not read cannot hold up the accept loop. Errors are
// ignored: the connection is being dropped either way.
func refuse(nc net.Conn, msg string) {
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write([]byte("-" + msg + "\r\n"))
	_ = nc.Close()
}

// release unregisters a connection that has ended, keeping its counters.
func (s *Server) release(c *conn) {
	c.nc.Close()
	c.cl.Settle() // the timings of a batch cut short
	s.mu.Lock()
	counts := c.cl.Counts() // under mu: a CONFIG RESETSTAT cannot slip in between
	delete(s.clients, c.cl)
	if len(s.retired) < len(counts) {
		s.retired = append(s.retired, make([]commands.CommandCounts, len(counts)-len(s.retired))...)
	}
	for i := range counts {
		s.retired[i].Add(&counts[i])
	}
	in, out := c.cl.NetIO()
	s.retiredIn += in
	s.retiredOut += out
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
			s.closePersistence()
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

// Persistence is what a server needs of its snapshots (package persist,
// wired in by cmd/cellserver): what commands use, plus applying CONFIG SET
// save and closing at shutdown.
type Persistence interface {
	commands.Persistence
	// SetSaveRules applies a save setting (Config.SaveRules' form).
	SetSaveRules(rules string) error
	// Close stops the snapshots and closes the store.
	Close() error
}

// SetPersistence turns persistence on with p; call it before serving. The
// server then takes a last snapshot at shutdown (unless SHUTDOWN NOSAVE)
// and closes p. The engine must track changes: Config.Dir must be set.
func (s *Server) SetPersistence(p Persistence) { s.persist = p }

// SetLoading sets whether the server is loading its keys from disk: while
// it is, INFO says loading:1 and the limiter and keyspace commands are
// answered with Redis's LOADING error.
func (s *Server) SetLoading(on bool) { s.table.SetLoading(on) }

// Loading reports whether the server is loading its keys (SetLoading).
func (s *Server) Loading() bool { return s.table.Loading() }

// closePersistence takes the last snapshot, unless SHUTDOWN NOSAVE asked
// otherwise, and closes the store.
func (s *Server) closePersistence() {
	p := s.persist
	if p == nil {
		return
	}
	if s.saveOnShutdown.Load() && !s.table.Loading() {
		s.log.Logf("notice", "Saving the final snapshot before exiting.")
		if err := p.Save(); err != nil {
			s.log.Logf("warning", "Error saving the final snapshot: %v", err)
		} else {
			s.log.Logf("notice", "DB saved on disk")
		}
	}
	if err := p.Close(); err != nil {
		s.log.Logf("warning", "Closing the snapshot store: %v", err)
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

// ConfigSet changes settings that may change at run time, all of pairs or
// none, as Redis 7's CONFIG SET: it first checks, pair by pair, that each
// name is a setting, may change at run time and is not given twice; then
// it sets every value on a copy of the configuration and keeps the copy
// only if every value was valid. On failure bad is the index of the pair
// at fault.
func (s *Server) ConfigSet(pairs [][2]string) (bad int, err error) {
	seen := make(map[string]bool, len(pairs))
	timeout, save := false, false
	for i, p := range pairs {
		st := lookupSetting(p[0])
		switch {
		case st == nil || st.set == nil:
			return i, commands.ErrUnknownSetting
		case !st.mutable:
			return i, ErrImmutableSetting
		case seen[st.name]:
			return i, commands.ErrDuplicateSetting
		}
		seen[st.name] = true
		timeout = timeout || st.name == "timeout"
		save = save || st.name == "save"
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	next := s.cfg
	for i, p := range pairs {
		if err := next.Set(p[0], p[1]); err != nil {
			return i, err
		}
		if lookupSetting(p[0]).name == "maxclients" && next.MaxClients > s.cfg.MaxClients {
			// As Redis: more clients need more open files.
			want := uint64(next.MaxClients) + reservedFDs
			if limit, ok, _ := s.raiseFDs(want); ok && limit < want {
				return i, errors.New(commands.ErrTextMaxClientsFit(max(int(limit)-reservedFDs, 0)))
			}
		}
	}
	for _, p := range pairs {
		s.log.Info("CONFIG SET", "name", lookupSetting(p[0]).name, "value", redact(lookupSetting(p[0]).name, p[1]))
	}
	s.cfg = next
	s.storeLimits(&s.cfg)
	s.log.setLevel(s.cfg.LogLevel)
	s.table.SetSlowlog(s.cfg.SlowlogLogSlowerThan, s.cfg.SlowlogMaxLen)
	if timeout {
		s.applyTimeout(s.cfg.Timeout)
	}
	if save && s.persist != nil {
		if err := s.persist.SetSaveRules(s.cfg.SaveRules()); err != nil {
			return 0, err
		}
	}
	return 0, nil
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
		_ = c.nc.SetReadDeadline(at) // a closed connection is going anyway
	}
}

// storeLimits publishes the request bounds and idle timeout to the
// connections, which read them on every request.
func (s *Server) storeLimits(cfg *Config) {
	s.limits.maxBulk.Store(cfg.ProtoMaxBulkLen)
	s.limits.maxQuery.Store(cfg.QueryBufferLimit)
	s.limits.timeout.Store(int64(cfg.Timeout))
	out := cfg.OutputLimits[ClassNormal]
	s.limits.outHard.Store(out.Hard)
	s.limits.outSoft.Store(out.Soft)
	s.limits.outSecs.Store(out.SoftSeconds)
	s.eng.SetMemoryLimit(cfg.MaxMemory, maxMemoryPolicies[cfg.MaxMemoryPolicy])
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
		MaxMemory: s.cfg.MaxMemory, MaxMemoryPolicy: s.cfg.MaxMemoryPolicy,
	}
	s.cfgMu.RUnlock()
	if addrs := s.Addrs(); len(addrs) > 0 {
		if ta, ok := addrs[0].(*net.TCPAddr); ok {
			st.Port = ta.Port
		}
	}
	st.ConnsReceived = s.connsReceived.Load()
	st.ConnsRejected = s.connsRejected.Load()
	st.OutputDropped = s.outputDropped.Load()
	s.mu.Lock()
	st.CommandsRetired = append([]commands.CommandCounts(nil), s.retired...)
	st.Clients = make([]*commands.Client, 0, len(s.clients))
	st.NetInput, st.NetOutput = s.retiredIn, s.retiredOut
	for cl := range s.clients {
		st.Clients = append(st.Clients, cl)
		in, out := cl.NetIO()
		st.NetInput += in
		st.NetOutput += out
	}
	s.mu.Unlock()
	s.ratesMu.Lock()
	st.OpsPerSec = int64(s.ops.rate() + 0.5)
	st.InputKbps, st.OutputKbps = s.netIn.rate()/1024, s.netOut.rate()/1024
	s.ratesMu.Unlock()
	return st
}

// Commands returns the commands' names and their counters, summed over
// every client there has been since the start or CONFIG RESETSTAT.
func (s *Server) Commands() ([]string, []commands.CommandCounts) {
	s.mu.Lock()
	st := commands.HostStats{CommandsRetired: append([]commands.CommandCounts(nil), s.retired...), Clients: make([]*commands.Client, 0, len(s.clients))}
	for cl := range s.clients {
		st.Clients = append(st.Clients, cl)
	}
	s.mu.Unlock()
	return s.table.Names(), s.table.Counts(st)
}

// ResetStats zeroes the counters CONFIG RESETSTAT resets.
func (s *Server) ResetStats() {
	s.connsReceived.Store(0)
	s.connsRejected.Store(0)
	s.eng.ResetStats()
	s.mu.Lock()
	s.retired = nil
	s.retiredIn, s.retiredOut = 0, 0
	for c := range s.clients {
		c.ResetCounts()
	}
	s.mu.Unlock()
}

// RequestShutdown starts a shutdown and returns at once (SHUTDOWN). save
// false skips the last snapshot.
func (s *Server) RequestShutdown(save bool) {
	s.saveOnShutdown.Store(save)
	go func() { _ = s.Shutdown(context.Background()) }()
}

// Persistence returns the server's snapshots, nil when persistence is off.
func (s *Server) Persistence() commands.Persistence {
	if s.persist == nil {
		return nil
	}
	return s.persist
}

// Logf logs at a level.
func (s *Server) Logf(level, format string, args ...any) { s.log.Logf(level, format, args...) }

// redact hides a secret setting's value from logs: "(set)" or "(none)".
func redact(name, value string) string {
	if name != "requirepass" {
		return value
	}
	if value == "" {
		return "(none)"
	}
	return "(set)"
}

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
