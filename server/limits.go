package server

import (
	"fmt"
	"syscall"
	"time"
)

// reservedFDs is how many open files fitMaxClients keeps for other uses
// than clients (listeners, the poller, logs), as Redis's
// CONFIG_MIN_RESERVED_FDS.
const reservedFDs = 32

// HTTPConns is how many connections the metrics' HTTP server (metrics-addr,
// which package daemon serves) holds open at once; at that many, a new one
// closes the oldest that is waiting for a request, or waits in the listen
// queue, where it holds none of the process's file descriptors, while
// none is. With metrics-addr set, fitMaxClients keeps that many open
// files for it besides reservedFDs, so that HTTP clients, idle or not,
// never take the descriptors the RESP port's clients need.
const HTTPConns = 16

// fdReserve is how many open files c keeps for other uses than clients:
// reservedFDs, and HTTPConns with metrics-addr set.
func (c *Config) fdReserve() uint64 {
	if c.MetricsAddr != "" {
		return reservedFDs + HTTPConns
	}
	return reservedFDs
}

// fitMaxClients makes maxclients fit the limit on open files, as Redis's
// adjustOpenFilesLimit: it asks raise for maxclients + fdReserve files;
// if the limit stays lower, it lowers maxclients to the limit less the
// reserve and logs it in Redis's words, so that clients past the limit
// get "max number of clients reached" rather than waiting in the accept
// queue of a server out of descriptors. It fails when the limit leaves no
// room for a client.
func (s *Server) fitMaxClients() error {
	reserve := s.cfg.fdReserve()
	want := uint64(s.cfg.MaxClients) + reserve
	limit, ok, err := s.raiseFDs(want)
	if !ok || limit >= want {
		return nil
	}
	if limit <= reserve {
		return fmt.Errorf("server: the open file limit (ulimit -n) of %d is not enough for the server to start; raise it to at least %d", limit, want)
	}
	old := s.cfg.MaxClients
	s.cfg.MaxClients = int(limit - reserve)
	if err == nil {
		err = syscall.EPERM
	}
	s.log.Logf("warning", "You requested maxclients of %d requiring at least %d max file descriptors.", old, want)
	s.log.Logf("warning", "Server can't set maximum open files to %d because of OS error: %v.", want, err)
	s.log.Logf("warning", "Current maximum open files is %d. maxclients has been reduced to %d to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.", limit, s.cfg.MaxClients)
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
	for cl, c := range s.clients {
		if ch, pat := cl.SubCounts(); ch+pat > 0 || cl.IsReplica() {
			continue // a subscriber has no idle timeout, as in Redis, nor a replica's link
		}
		_ = c.nc.SetReadDeadline(at) // a closed connection is going anyway
	}
}

// storeLimits publishes the request bounds and idle timeout to the
// connections, which read them on every request.
func (s *Server) storeLimits(cfg *Config) {
	s.limits.maxBulk.Store(cfg.ProtoMaxBulkLen)
	s.limits.maxQuery.Store(cfg.QueryBufferLimit)
	s.limits.timeout.Store(int64(cfg.Timeout))
	s.table.SetMaxKeySize(cfg.MaxKeySize)
	out := cfg.OutputLimits[ClassNormal]
	s.limits.outHard.Store(out.Hard)
	s.limits.outSoft.Store(out.Soft)
	s.limits.outSecs.Store(out.SoftSeconds)
	ps := cfg.OutputLimits[ClassPubSub]
	s.limits.psHard.Store(ps.Hard)
	s.limits.psSoft.Store(ps.Soft)
	s.limits.psSecs.Store(ps.SoftSeconds)
	s.eng.SetMemoryLimit(cfg.MaxMemory, maxMemoryPolicies[cfg.MaxMemoryPolicy])
}
