package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// selfSigned returns a TLS configuration serving a certificate for
// 127.0.0.1 made up for the test, asking no client certificate.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// listenAndServe runs s.ListenAndServe until the test ends and returns
// its addresses once it listens.
func listenAndServe(t *testing.T, s *Server, want int) []net.Addr {
	t.Helper()
	served := make(chan error, 1)
	go func() { served <- s.ListenAndServe() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.IOTimeout)
		defer cancel()
		_ = s.Shutdown(ctx)
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("ListenAndServe: %v", err)
		}
	})
	testkit.WaitFor(t, "the listeners", func() bool { return len(s.Addrs()) == want })
	return s.Addrs()
}

// port 0 serves no plaintext port, as Redis's TLS-only idiom: with a
// tls-port only TLS is served (and the log says so); without one the
// configuration is refused, naming what to set.
func TestPortZeroIsTLSOnly(t *testing.T) {
	var log testkit.SyncBuffer
	cfg := DefaultConfig()
	cfg.Port, cfg.TLSPort, cfg.TLSConfig = 0, testkit.FreePort(t), selfSigned(t)
	cfg.LogLevel, cfg.LogOutput = "notice", &log
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addrs := listenAndServe(t, s, 1)
	if got := addrs[0].(*net.TCPAddr).Port; got != cfg.TLSPort {
		t.Fatalf("listening on %v, want only the TLS port %d", addrs, cfg.TLSPort)
	}
	conn, err := tls.Dial("tcp", addrs[0].String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := testkit.NewConn(t, conn)
	c.WantDo("+PONG\r\n", "PING")
	testkit.WaitFor(t, "the log", func() bool { return strings.Contains(log.String(), "port 0: no plaintext port, TLS only") })
	if strings.Contains(log.String(), "tcp on") {
		t.Errorf("a plaintext port in the log:\n%s", log.String())
	}

	cfg = DefaultConfig()
	cfg.Port = 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "port: 0 serves no plaintext port, and tls-port is not set") {
		t.Fatalf("port 0 alone: %v", err)
	}
}

// A bind address with Redis's "-" is optional: one the machine does not
// have is skipped with a log line, the others served; "*" and "::*" are
// the wildcard addresses.
func TestBindOptionalAddress(t *testing.T) {
	var log testkit.SyncBuffer
	cfg := DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.LogOutput = testkit.FreePort(t), "notice", &log
	if err := cfg.Set("bind", "127.0.0.1 -192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addrs := listenAndServe(t, s, 1)
	if addrs[0].String() != "127.0.0.1:"+strconv.Itoa(cfg.Port) {
		t.Fatalf("listening on %v", addrs)
	}
	testkit.WaitFor(t, "the log", func() bool { return strings.Contains(log.String(), "Skipping optional bind address 192.0.2.1") })
	if got := s.ConfigGet("bind"); got[0][1] != "127.0.0.1 -192.0.2.1" {
		t.Errorf("CONFIG GET bind = %q", got)
	}

	cfg.Bind = []string{"192.0.2.1"} // not optional: an error
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.ListenAndServe(); err == nil || !strings.Contains(err.Error(), "listen on 192.0.2.1") {
		t.Errorf("a required address the machine lacks: %v", err)
	}
	for word, want := range map[string]string{"*": "0.0.0.0", "-::*": "::", "-::1": "::1", "host": "host"} {
		if host, optional := BindHost(word); host != want || optional != strings.HasPrefix(word, "-") {
			t.Errorf("BindHost(%q) = %q, %v", word, host, optional)
		}
	}
}
