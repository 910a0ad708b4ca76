package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// TLSConfigFromFiles builds the TLS configuration c's tls-* settings
// describe: the server's certificate and key, and the CA certificates that
// client certificates are checked against as tls-auth-clients says. It
// reads the files; package daemon calls it.
//
// The certificate is read again at a handshake after either file's
// modification time has changed, so that a renewed certificate is served
// without a restart; while the new files do not load (half written), the
// previous certificate is served.
func TLSConfigFromFiles(c *Config) (*tls.Config, error) {
	r := &certReloader{certFile: c.TLSCertFile, keyFile: c.TLSKeyFile}
	if err := r.load(); err != nil {
		return nil, fmt.Errorf("tls-cert-file, tls-key-file: %w", err)
	}
	tc := &tls.Config{GetCertificate: r.get, MinVersion: tls.VersionTLS12}
	if c.TLSCACertFile != "" {
		pem, err := os.ReadFile(c.TLSCACertFile)
		if err != nil {
			return nil, fmt.Errorf("tls-ca-cert-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-ca-cert-file: no certificate in %s", c.TLSCACertFile)
		}
		tc.ClientCAs = pool
	}
	switch c.TLSAuthClients {
	case "yes":
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	case "optional":
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// certReloader serves a certificate from files, reading them again when
// they change.
type certReloader struct {
	certFile, keyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	certTime time.Time // the files' modification times when cert was read
	keyTime  time.Time
}

// modTimes returns the files' modification times.
func (r *certReloader) modTimes() (cert, key time.Time, err error) {
	ci, err := os.Stat(r.certFile)
	if err != nil {
		return cert, key, err
	}
	ki, err := os.Stat(r.keyFile)
	if err != nil {
		return cert, key, err
	}
	return ci.ModTime(), ki.ModTime(), nil
}

// load reads the certificate and its key.
func (r *certReloader) load() error {
	ct, kt, err := r.modTimes()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.cert, r.certTime, r.keyTime = &cert, ct, kt
	r.mu.Unlock()
	return nil
}

// get is tls.Config.GetCertificate: the certificate, read again first if
// the files have changed since.
func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	ct, kt, err := r.modTimes()
	r.mu.Lock()
	changed := err == nil && (!ct.Equal(r.certTime) || !kt.Equal(r.keyTime))
	r.mu.Unlock()
	if changed {
		_ = r.load() // a failure keeps the previous certificate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, nil
}

// A failed TLS handshake is logged, with the client's address and the
// reason crypto/tls gives ("tls: first record does not look like a TLS
// handshake", "tls: client didn't provide a certificate", …), at notice
// level and at most one line per tlsLogEvery for the whole server; a line
// counts the failures not logged since the line before it. A client that
// closes before sending anything (a port check) is logged at verbose
// level only.
const tlsLogEvery = time.Second

// handshake runs the TLS handshake of a connection on the TLS port before
// any request is read, and logs it if it fails. It reports whether the
// connection goes on: true for a plain connection, whose handshake there
// is none.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	err := tc.Handshake()
	if err == nil {
		return true
	}
	if c.cl.Killed() {
		return false // shutdown or CLIENT KILL closed it: no failure of the client's
	}
	level := "notice"
	if errors.Is(err, io.EOF) {
		level = "verbose"
	}
	if suppressed, ok := c.s.tlsFailures.Note(time.Now(), tlsLogEvery); ok {
		msg := fmt.Sprintf("TLS handshake failed from %s: %v", c.nc.RemoteAddr(), err)
		if suppressed > 0 {
			msg += fmt.Sprintf("; %d more failed TLS handshakes not logged since the last line", suppressed)
		}
		c.s.log.Logf(level, "%s", msg)
	}
	return false
}
