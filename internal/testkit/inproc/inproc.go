// Package inproc starts a whole cellserver server in the test's own
// process, on a listener of package testkit. It is the part of the test
// kit that imports server, so package server's own tests cannot use it:
// they use package testkit directly (Serve, NewConn over a pipe).
package inproc

import (
	"testing"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
)

// Server is one in-process cellserver.
type Server struct {
	*server.Server
	Addr string // 127.0.0.1:port
	Port int
}

// Config returns the configuration Start begins from: the defaults with
// DEBUG enabled (tests freeze the clock with DEBUG CLOCK) and no log.
func Config() server.Config {
	cfg := server.DefaultConfig()
	cfg.EnableDebugCommand = true
	cfg.LogLevel = "nothing"
	return cfg
}

// Start serves a server of Config, changed by opts, on a listener of
// testkit.Listen, and shuts it down when the test ends.
func Start(t testing.TB, opts ...func(*server.Config)) *Server {
	t.Helper()
	cfg := Config()
	for _, o := range opts {
		o(&cfg)
	}
	return StartWith(t, cfg)
}

// StartWith serves a server of cfg on a listener of testkit.Listen, and
// shuts it down when the test ends. cfg's port becomes the listener's.
func StartWith(t testing.TB, cfg server.Config) *Server {
	t.Helper()
	ln := testkit.Listen(t)
	cfg.Port = testkit.Port(ln)
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	testkit.Serve(t, srv, ln, server.ErrServerClosed)
	return &Server{Server: srv, Addr: ln.Addr().String(), Port: testkit.Port(ln)}
}

// ServeAlso makes s serve on a second listener on host (at a port the
// system chooses) as well, and returns its address; the shutdown closes
// it.
func (s *Server) ServeAlso(t testing.TB, host string) string {
	t.Helper()
	ln := testkit.ListenOn(t, host)
	go func() { _ = s.Serve(ln) }()
	return ln.Addr().String()
}

// Dial opens a raw RESP connection to s, closed when the test ends.
func (s *Server) Dial(t testing.TB) *testkit.Conn {
	t.Helper()
	return testkit.Dial(t, s.Addr)
}
