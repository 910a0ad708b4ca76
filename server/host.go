package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/engine"
)

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
	out := make([]*commands.Client, 0, len(s.clients)+1)
	for c := range s.clients {
		out = append(out, c)
	}
	if s.link != nil {
		out = append(out, s.link)
	}
	return out
}

// ConfigGet returns the settings matching pattern, a secret's value
// (requirepass, cluster-secret) as Redacted when it is set: a client that
// may run CONFIG GET learns whether a password is set, never the password.
func (s *Server) ConfigGet(pattern string) [][2]string {
	s.cfgMu.RLock()
	defer s.cfgMu.RUnlock()
	out := s.cfg.Get(func(name string) bool { return commands.Match(pattern, name) })
	for i := range out {
		out[i][1] = redact(out[i][0], out[i][1])
	}
	return out
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
		case st.secret && s.secretFromFile(st.name) != "":
			return i, fmt.Errorf("%s is read from %s at start: change that file and restart", st.name, s.secretFromFile(st.name))
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
			reserve := next.fdReserve()
			want := uint64(next.MaxClients) + reserve
			if limit, ok, _ := s.raiseFDs(want); ok && limit < want {
				return i, errors.New(commands.ErrTextMaxClientsFit(max(int(limit)-int(reserve), 0)))
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
	s.table.SetAuthLimits(s.cfg.AuthLimits)
	if timeout {
		s.applyTimeout(s.cfg.Timeout)
	}
	if s.repl != nil {
		s.repl.ReadOnlyChanged(s.cfg.ReplicaReadOnly) // cfgMu is held: the value is passed
	}
	if save && s.persist != nil {
		if err := s.persist.SetSaveRules(s.cfg.SaveRules()); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// secretFromFile returns the file the secret setting name was read from
// at start (its -file setting), "" if none.
func (s *Server) secretFromFile(name string) string {
	for _, st := range settings {
		if st.fileOf == name {
			s.cfgMu.RLock()
			defer s.cfgMu.RUnlock()
			return st.get(&s.cfg)
		}
	}
	return ""
}

// Stats returns the figures INFO reports.
func (s *Server) Stats() commands.HostStats {
	// What maxmemory is checked against (engine.Engine.UsedMemory), in
	// its two parts, read once.
	keyspace, buffers, backlog := s.eng.KeyspaceBytes(), s.eng.BufferMemory(), s.eng.BacklogMemory()
	s.notePeak(keyspace + buffers + backlog)
	s.cfgMu.RLock()
	st := commands.HostStats{
		Version: Version, Port: s.cfg.Port, PID: os.Getpid(), RunID: s.runID, ConfigFile: s.cfg.ConfigFile,
		Executable: executable(), Started: s.started, MaxClients: s.cfg.MaxClients,
		UsedMemoryRSS: rss(), MaxMemory: s.cfg.MaxMemory, MaxMemoryPolicy: s.cfg.MaxMemoryPolicy,
	}
	st.UsedMemory = uint64(keyspace + buffers + backlog)
	st.UsedMemoryPeak = uint64(s.peakMem.Load())
	st.UsedMemoryDataset, st.UsedMemoryClients = uint64(keyspace), uint64(buffers)
	st.MemReplicationBacklog = uint64(backlog)
	s.cfgMu.RUnlock()
	if addrs := s.Addrs(); len(addrs) > 0 {
		if ta, ok := addrs[0].(*net.TCPAddr); ok {
			st.Port = ta.Port
		}
	}
	st.ConnsReceived = s.connsReceived.Load()
	st.ConnsRejected = s.connsRejected.Load()
	st.OutputDropped = s.outputDropped.Load()
	st.AuthFailed, st.AuthRefused = s.table.AuthCounts()
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
	s.peakMem.Store(s.eng.UsedMemory()) // as Redis's CONFIG RESETSTAT resets used_memory_peak
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
