package daemon

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
)

// When TLS is configured (tls-port with its files), the HTTP port speaks
// both: a connection whose first byte is a TLS handshake record (0x16)
// is served over TLS with the server's certificate, any other as plain
// HTTP, so that /metrics, /healthz and /readyz keep answering the
// scrapers and probes that use http://, while the console, which carries
// the password, is served over TLS only (consoleOverTLS). The first byte
// is read by the connection's own goroutine, at its first read, under
// the header timeout the HTTP server sets: Accept never waits for it.
// net/http cannot do this itself (http.Server serves one or the other
// per listener), so the few lines are here.

// tlsSniffer is a listener whose connections decide at their first read
// whether they are TLS.
type tlsSniffer struct {
	net.Listener
	cfg *tls.Config
}

func (l tlsSniffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, cfg: l.cfg}, nil
}

// sniffConn is a connection of a tlsSniffer.
type sniffConn struct {
	net.Conn // the raw connection: deadlines and Close go to it
	cfg      *tls.Config
	once     sync.Once
	rw       net.Conn // after the first read: the TLS server, or the raw connection with its first byte
	err      error    // the first read's error, when it read nothing
	tls      bool
}

func (s *sniffConn) sniff() {
	s.once.Do(func() {
		var b [1]byte
		n, err := s.Conn.Read(b[:])
		if n == 0 {
			s.err = err
			return
		}
		pc := &prefixedConn{Conn: s.Conn, first: b[0], pending: true}
		if b[0] == 0x16 { // a TLS handshake record
			s.rw, s.tls = tls.Server(pc, s.cfg), true
		} else {
			s.rw = pc
		}
	})
}

func (s *sniffConn) Read(p []byte) (int, error) {
	s.sniff()
	if s.rw == nil {
		return 0, s.err
	}
	return s.rw.Read(p)
}

func (s *sniffConn) Write(p []byte) (int, error) {
	s.sniff() // done already: the HTTP server writes only after it read
	if s.rw == nil {
		return 0, s.err
	}
	return s.rw.Write(p)
}

// isTLS reports whether the connection turned out to be TLS.
func (s *sniffConn) isTLS() bool {
	s.sniff()
	return s.tls
}

// prefixedConn gives back the byte a sniffConn read before its other
// bytes.
type prefixedConn struct {
	net.Conn
	first   byte
	pending bool
}

func (p *prefixedConn) Read(b []byte) (int, error) {
	if p.pending && len(b) > 0 {
		p.pending = false
		b[0] = p.first
		return 1, nil
	}
	return p.Conn.Read(b)
}

// httpTLSConfig is the HTTP port's TLS configuration: the server's (its
// certificates, reloaded as the TLS port's are), asking a client
// certificate but not requiring one, since browsers and scrapers rarely
// have one; one presented must chain to tls-ca-cert-file.
func httpTLSConfig(c *tls.Config) *tls.Config {
	cfg := c.Clone()
	if cfg.ClientAuth == tls.RequireAndVerifyClientCert {
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if cfg.ClientAuth == tls.RequireAnyClientCert {
		cfg.ClientAuth = tls.RequestClientCert
	}
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}

// sniffKey is the request context's key to its *sniffConn.
type sniffKey struct{}

// withSniffConn chains to hs's ConnContext one that keeps the request's
// sniffConn (under a connLimiter's limitedConn, if any) in its context.
func withSniffConn(hs *http.Server) {
	prev := hs.ConnContext
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		if lc, ok := c.(*limitedConn); ok {
			c = lc.Conn
		}
		if sc, ok := c.(*sniffConn); ok {
			ctx = context.WithValue(ctx, sniffKey{}, sc)
		}
		return ctx
	}
}

// consoleOverTLS serves h only to requests that came over TLS, and tells
// the others where to go: with TLS configured, the console's password
// does not cross the network in clear.
func consoleOverTLS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sc, ok := r.Context().Value(sniffKey{}).(*sniffConn); ok && !sc.isTLS() {
			http.Error(w, "TLS is configured: the console is served over TLS only, on this port: https://"+r.Host+r.URL.Path, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
