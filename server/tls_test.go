package server

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
)

// TestTLSHandshakeFailureLogged: a client that speaks plain RESP to the
// TLS port is logged with its address and crypto/tls's reason, at most
// one line a second; a TLS client is served as before.
func TestTLSHandshakeFailureLogged(t *testing.T) {
	var out testkit.SyncBuffer
	cfg := DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.LogOutput = testkit.FreePort(t), "notice", &out
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tc := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(tls.NewListener(ln, tc)) }()
	addr := ln.Addr().String()

	var locals []string
	start := time.Now()
	for range 2 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		locals = append(locals, nc.LocalAddr().String())
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = nc.Write([]byte("PING\r\n"))
		_, _ = io.ReadAll(nc) // until the server closes it
		nc.Close()
	}
	want := "TLS handshake failed from " + locals[0] + ": tls: first record does not look like a TLS handshake"
	testkit.WaitFor(t, "the failure's log line", func() bool { return strings.Contains(out.String(), want) })
	if time.Since(start) < 900*time.Millisecond && strings.Contains(out.String(), locals[1]) {
		t.Errorf("a second line within a second:\n%s", out.String())
	}

	pool := x509.NewCertPool()
	cert, _ := x509.ParseCertificate(tc.Certificates[0].Certificate[0])
	pool.AddCert(cert)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "+PONG\r\n" {
		t.Fatalf("PING over TLS: %q %v", buf, err)
	}
}
