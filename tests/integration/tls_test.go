package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
)

// testPKI is a CA, two server certificates for 127.0.0.1 and a client
// certificate, generated for one test and written as PEM files.
type testPKI struct {
	dir                       string
	caFile, certFile, keyFile string // the CA; the server's certificate and key
	clientCert, clientKey     string // the client's
	renewedCert, renewedKey   string // a second server certificate (serial 4)
	caPool                    *x509.CertPool
	client                    tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cellserver test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca)
	p.caFile = p.write(t, "ca.crt", "CERTIFICATE", caDER)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	der, key := leaf(2, "cellserver", x509.ExtKeyUsageServerAuth)
	p.certFile = p.write(t, "server.crt", "CERTIFICATE", der)
	p.keyFile = p.write(t, "server.key", "EC PRIVATE KEY", marshalKey(t, key))
	der, key = leaf(4, "cellserver renewed", x509.ExtKeyUsageServerAuth)
	p.renewedCert = p.write(t, "renewed.crt", "CERTIFICATE", der)
	p.renewedKey = p.write(t, "renewed.key", "EC PRIVATE KEY", marshalKey(t, key))
	der, key = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	p.clientCert = p.write(t, "client.crt", "CERTIFICATE", der)
	p.clientKey = p.write(t, "client.key", "EC PRIVATE KEY", marshalKey(t, key))
	if p.client, err = tls.LoadX509KeyPair(p.clientCert, p.clientKey); err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func marshalKey(t *testing.T, k *ecdsa.PrivateKey) []byte {
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startTLSServer runs ListenAndServe with a plain port and a TLS port
// configured by Redis's setting names, as cmd/cellserver does.
func startTLSServer(t *testing.T, pki *testPKI, authClients string) (plainAddr, tlsAddr string) {
	t.Helper()
	cfg := server.DefaultConfig()
	port, tlsPort := testkit.FreePort(t), testkit.FreePort(t)
	for _, kv := range [][2]string{
		{"port", strconv.Itoa(port)}, {"tls-port", strconv.Itoa(tlsPort)},
		{"tls-cert-file", pki.certFile}, {"tls-key-file", pki.keyFile},
		{"tls-ca-cert-file", pki.caFile}, {"tls-auth-clients", authClients},
		{"enable-debug-command", "yes"}, {"loglevel", "nothing"},
	} {
		if err := cfg.Set(kv[0], kv[1]); err != nil {
			t.Fatalf("%s: %v", kv[0], err)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tc, err := server.TLSConfigFromFiles(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig = tc
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-served; !errors.Is(err, server.ErrServerClosed) {
			t.Errorf("ListenAndServe: %v", err)
		}
	})
	testkit.WaitFor(t, "both listeners", func() bool { return len(srv.Addrs()) == 2 })
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
}

// TestTLS: go-redis over TLS with a client certificate gets the exact
// replies the plain port gives; without one it is refused when
// tls-auth-clients is yes, and served when it is optional.
func TestTLS(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	plain, tlsAddr := startTLSServer(t, pki, "yes")
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		rdb := redis.NewClient(&redis.Options{Addr: tlsAddr, Protocol: proto, MaxRetries: -1,
			TLSConfig: &tls.Config{RootCAs: pki.caPool, Certificates: []tls.Certificate{pki.client}, ServerName: "127.0.0.1"}})
		t.Cleanup(func() { rdb.Close() })
		setClock(t, rdb, t0)
		key := "tls" + strconv.Itoa(proto)
		wantInts(t, rdb, ints(0, 16, 15, -1, 2), "CL.THROTTLE", key, "15", "30", "60")
		wantInts(t, rdb, ints(0, 16, 14, -1, 4), "CL.THROTTLE", key, "15", "30", "60")
	}
	// The plain port sees the same keys.
	plainClient := redis.NewClient(&redis.Options{Addr: plain, MaxRetries: -1})
	t.Cleanup(func() { plainClient.Close() })
	wantInts(t, plainClient, ints(0, 16, 13, -1, 6), "CL.THROTTLE", "tls2", "15", "30", "60")

	noCert := redis.NewClient(&redis.Options{Addr: tlsAddr, MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: pki.caPool, ServerName: "127.0.0.1"}})
	t.Cleanup(func() { noCert.Close() })
	if err := noCert.Ping(ctx).Err(); err == nil {
		t.Error("a client without a certificate was served with tls-auth-clients yes")
	}

	_, optional := startTLSServer(t, pki, "optional")
	opt := redis.NewClient(&redis.Options{Addr: optional, MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: pki.caPool, ServerName: "127.0.0.1"}})
	t.Cleanup(func() { opt.Close() })
	if got, err := opt.Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Errorf("tls-auth-clients optional, no certificate: %q %v", got, err)
	}
}

// TestTLSRedisCli: redis-cli --tls with the test's CA and client
// certificate.
func TestTLSRedisCli(t *testing.T) {
	t.Parallel()
	cli := testkit.LookTool(t, "redis-cli")
	pki := newTestPKI(t)
	_, tlsAddr := startTLSServer(t, pki, "yes")
	host, port, _ := net.SplitHostPort(tlsAddr)
	base := []string{"--tls", "--cacert", pki.caFile, "--cert", pki.clientCert, "--key", pki.clientKey, "-h", host, "-p", port}
	if out, errOut, err := runTool(t, cli, append(base, "DEBUG", "CLOCK", "SET", strconv.FormatInt(t0, 10))...); err != nil || out != "OK\n" {
		t.Fatalf("redis-cli --tls DEBUG CLOCK SET: %q %q %v", out, errOut, err)
	}
	out, errOut, err := runTool(t, cli, append(base, "CL.THROTTLE", "cli", "15", "30", "60")...)
	if err != nil || out != "0\n16\n15\n-1\n2\n" {
		t.Fatalf("redis-cli --tls CL.THROTTLE: %q %q %v", out, errOut, err)
	}
	// Without the client certificate the handshake fails.
	out, errOut, _ = runTool(t, cli, "--tls", "--cacert", pki.caFile, "-h", host, "-p", port, "PING")
	if strings.Contains(out, "PONG") {
		t.Fatalf("redis-cli --tls without a certificate: %q %q", out, errOut)
	}
}

// TestTLSCertificateReload: a certificate renewed on disk is served at the
// next handshake, without a restart.
func TestTLSCertificateReload(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	_, tlsAddr := startTLSServer(t, pki, "no")
	serial := func() int64 {
		t.Helper()
		conn, err := tls.Dial("tcp", tlsAddr, &tls.Config{RootCAs: pki.caPool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 2 {
		t.Fatalf("serial %d, want 2", got)
	}
	cert, _ := os.ReadFile(pki.renewedCert)
	key, _ := os.ReadFile(pki.renewedKey)
	later := time.Now().Add(time.Minute)
	for path, b := range map[string][]byte{pki.certFile: cert, pki.keyFile: key} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, later, later); err != nil { // a change even within the file system's time resolution
			t.Fatal(err)
		}
	}
	if got := serial(); got != 4 {
		t.Fatalf("after renewal: serial %d, want 4", got)
	}
}
