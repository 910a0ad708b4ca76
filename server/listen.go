package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cellserver/cellserver/commands"
	"github.com/cellserver/cellserver/internal/rawconn"
)

// BindHost reads one word of the bind setting as redis.conf writes it:
// the host to listen on ("*" is every IPv4 address, 0.0.0.0, and "::*"
// every IPv6 one, ::), and whether it is optional (a leading "-": an
// address the machine does not have is skipped, not an error).
func BindHost(word string) (host string, optional bool) {
	host, optional = strings.CutPrefix(word, "-")
	switch host {
	case "*":
		host = "0.0.0.0"
	case "::*":
		host = "::"
	}
	return host, optional
}

// ListenAndServe listens on every address of Config.Bind at Config.Port
// (none when Port is 0) and at Config.TLSPort (when not 0), and serves
// until Shutdown. An optional address (BindHost) that cannot be had is
// logged and skipped. It returns ErrServerClosed after a shutdown, or the
// first listening error.
func (s *Server) ListenAndServe() error {
	s.cfgMu.RLock()
	binds, port, tlsPort, tlsCfg := s.cfg.Bind, s.cfg.Port, s.cfg.TLSPort, s.cfg.TLSConfig
	s.cfgMu.RUnlock()
	if tlsPort != 0 && tlsCfg == nil {
		return errors.New("server: tls-port without a TLS configuration")
	}
	if port == 0 && tlsPort == 0 {
		return errors.New("server: port 0 and no tls-port: nothing to listen on")
	}
	var lns []net.Listener
	closeAll := func() {
		for _, l := range lns {
			l.Close()
		}
	}
	// listen listens on every address at port and returns how many.
	listen := func(port int) (int, error) {
		n := 0
		for _, b := range binds {
			host, optional := BindHost(b)
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil && optional && !errors.Is(err, syscall.EADDRINUSE) {
				s.log.Logf("warning", "Skipping optional bind address %s port %d: %v", host, port, err)
				continue
			}
			if err != nil {
				closeAll()
				return 0, fmt.Errorf("server: listen on %s port %d: %w", host, port, err)
			}
			lns = append(lns, ln)
			n++
		}
		if n == 0 {
			closeAll()
			return 0, fmt.Errorf("server: none of the bind addresses %s could be had at port %d", strings.Join(binds, " "), port)
		}
		return n, nil
	}
	if port != 0 {
		if _, err := listen(port); err != nil {
			return err
		}
	}
	plain := len(lns)
	if tlsPort != 0 {
		if _, err := listen(tlsPort); err != nil {
			return err
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
	links := s.cfg.admitsLinks()
	s.cfgMu.RUnlock()
	for _, ln := range lns {
		if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
			switch {
			case open:
				s.log.Logf("warning", "WARNING: listening on %s with protected-mode no and no requirepass: any client that can reach it may run any command", ta)
			case guarded:
				if links {
					s.log.Logf("notice", "Protected mode: listening on %s with no requirepass, only loopback clients are served, and others may run the cluster link handshake alone", ta)
				} else {
					s.log.Logf("notice", "Protected mode: listening on %s with no requirepass, only loopback clients are served", ta)
				}
			}
		}
	}
	s.listenOnce.Do(func() { close(s.listening) })
	addrs := func(lns []net.Listener) string {
		var a []string
		for _, l := range lns {
			a = append(a, l.Addr().String())
		}
		return strings.Join(a, " ")
	}
	if port != 0 {
		s.log.Logf("notice", "Ready to accept connections tcp on %s", addrs(lns[:plain]))
	} else {
		s.log.Logf("notice", "port 0: no plaintext port, TLS only")
	}
	if tlsPort != 0 {
		s.log.Logf("notice", "Ready to accept connections tls on %s", addrs(lns[plain:]))
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
// turns it away, the server is closing or at maxclients. In cluster mode
// a connection protected mode would turn away is let in to run the
// cluster link handshake only (Config.admitsLinks, conn.linkStep).
func (s *Server) admit(nc net.Conn) *conn {
	s.connsReceived.Add(1)
	s.cfgMu.RLock()
	maxClients, pass := s.cfg.MaxClients, s.cfg.RequirePass
	refused := s.cfg.refuses(nc.RemoteAddr())
	linkOnly := refused && s.cfg.admitsLinks()
	s.cfgMu.RUnlock()
	if refused && !linkOnly {
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
	var tlsState func() *tls.ConnectionState
	if tc, ok := nc.(*tls.Conn); ok {
		tlsState = func() *tls.ConnectionState { st := tc.ConnectionState(); return &st }
	}
	nc = rawconn.Wrap(nc)
	c := &conn{s: s, nc: nc, w: commands.NewWriter(nc), linkOnly: linkOnly}
	c.cl = s.table.NewClient(commands.ClientOptions{
		ID:         s.nextID.Add(1),
		Addr:       nc.RemoteAddr().String(),
		LocalAddr:  nc.LocalAddr().String(),
		Writer:     c.w,
		Close:      func() { nc.Close() },
		Flush:      func() bool { return c.flush(false) },
		Authorized: pass == "" && !linkOnly,
		Local:      isLocal(nc.RemoteAddr()),
		TLS:        tlsState,
		Pusher:     c.newPusher,
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
	c.cl.LeavePubSub()
	if c.push != nil { // its last replies (QUIT's) go out first, within lastWrite
		c.push.release()
	}
	c.nc.Close()
	c.s.eng.AddBufferMemory(-c.counted)
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
		close(s.stopping)
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
			s.closeReplication()
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

// Stopping is closed when a shutdown (Shutdown, Close or SHUTDOWN) begins.
func (s *Server) Stopping() <-chan struct{} { return s.stopping }

// Listening is closed once ListenAndServe listens on every address it
// was given: from then on the ports accept connections.
func (s *Server) Listening() <-chan struct{} { return s.listening }

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
