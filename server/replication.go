package server

import (
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/internal/rawconn"
)

// Replication is what a server needs of its replication (package
// replication, wired in by package daemon): what commands use, plus
// applying replica-read-only and stopping at shutdown.
type Replication interface {
	commands.Replication
	// ReadOnlyChanged applies replica-read-only's value; it must not read
	// the server's settings (the server holds their lock).
	ReadOnlyChanged(readOnly bool)
	// Close stops every replication link.
	Close() error
}

// SetReplication gives the server its replication; call it before
// serving. The server closes it at shutdown.
func (s *Server) SetReplication(r Replication) { s.repl = r }

// Replication returns the server's replication, nil when it has none.
func (s *Server) Replication() commands.Replication {
	if s.repl == nil {
		return nil // not a typed nil
	}
	return s.repl
}

// SetReadOnly sets whether the server refuses writes with READONLY (a
// replica with replica-read-only yes).
func (s *Server) SetReadOnly(on bool) { s.table.SetReadOnly(on) }

// SetReplicaOf records the primary the server replicates ("" and 0: none)
// as the replicaof setting, for CONFIG GET and CONFIG REWRITE.
func (s *Server) SetReplicaOf(host string, port int) {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	s.cfg.ReplicaOf = ""
	if host != "" {
		s.cfg.ReplicaOf = host + " " + strconv.Itoa(port)
	}
}

// CurrentConfig returns a copy of the settings in force.
func (s *Server) CurrentConfig() Config {
	s.cfgMu.RLock()
	defer s.cfgMu.RUnlock()
	return s.cfg
}

// ParseReplicaOf splits a replicaof setting ("host port") into its host
// and port; ok false for "" or a malformed value.
func ParseReplicaOf(v string) (host string, port int, ok bool) {
	f := strings.Fields(v)
	if len(f) != 2 {
		return "", 0, false
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 1 || n > 65535 {
		return "", 0, false
	}
	return f[0], n, true
}

// AddMasterLink lists a replica's link to its primary (local and remote
// addresses) as a client of type master, flag M, until the returned
// function is called; CLIENT KILL of it calls kill.
func (s *Server) AddMasterLink(laddr, raddr string, kill func()) (remove func()) {
	cl := s.table.NewClient(commands.ClientOptions{ID: s.nextID.Add(1), Addr: raddr, LocalAddr: laddr, Close: kill, Authorized: true})
	cl.SetMaster()
	s.mu.Lock()
	s.link = cl
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.link == cl {
			s.link = nil
		}
		s.mu.Unlock()
	}
}

// closeReplication stops the replication links.
func (s *Server) closeReplication() {
	if s.repl != nil {
		_ = s.repl.Close()
	}
}

// handOff runs what REPLSYNC asked for on c's connection, once its reply
// is flushed, and reports that the connection is done.
func (c *conn) handOff(fn func(nc net.Conn, buffered []byte), rest []byte) {
	if !c.flush(true) {
		return
	}
	rawconn.Detach(c.nc)
	_ = c.nc.SetReadDeadline(time.Time{}) // the idle timeout is not the link's
	fn(c.nc, rest)
}
