package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/cluster"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// nodePKI writes a CA and a certificate for 127.0.0.1 signed by it, good
// for servers and clients (a node is both on its links), as PEM files;
// it returns their paths and the CA's pool.
func nodePKI(t *testing.T) (ca, cert, key string, pool *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := newKey(), newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cluster test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "cellserver node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return write("ca.crt", "CERTIFICATE", caDER), write("node.crt", "CERTIFICATE", der), write("node.key", "EC PRIVATE KEY", kb), pool
}

// With tls-cluster, a node's links to its peers are TLS connections to
// their TLS ports, client certificates required: a joining node gets its
// keys over one, and no link comes to the plain port.
func TestClusterLinksOverTLS(t *testing.T) {
	ca, cert, key, pool := nodePKI(t)
	type node struct {
		port, tlsPort int
		rdb           *redis.Client
	}
	start2 := func(join string) node {
		n := node{port: testkit.FreePair(t, cluster.BusPortOffset), tlsPort: testkit.FreePort(t)}
		cfg := clusterConfig(n.port)
		cfg.TLSPort, cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCACertFile, cfg.TLSCluster = n.tlsPort, cert, key, ca, true
		if join != "" {
			cfg.ClusterJoin = []string{join}
		}
		start(t, cfg)
		n.rdb = redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)), MaxRetries: -1})
		t.Cleanup(func() { _ = n.rdb.Close() })
		testkit.WaitFor(t, "a node", func() bool { return n.rdb.Ping(ctx).Err() == nil })
		return n
	}
	a := start2("")
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
		if err := a.rdb.Do(ctx, "FW.INCR", keys[i], "1", "600").Err(); err != nil {
			t.Fatal(err)
		}
	}
	b := start2(net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port)))
	testkit.Until(t, 15*time.Second, "node B to take its keys", func() error {
		if n, err := b.rdb.DBSize(ctx).Result(); err != nil || n == 0 {
			return fmt.Errorf("B holds %d keys (%v)", n, err)
		}
		return nil
	})
	// The link from A is a client of B's TLS port, and none of its plain one.
	list, err := b.rdb.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	tlsAddr, plainAddr := "laddr=127.0.0.1:"+strconv.Itoa(b.tlsPort), "laddr=127.0.0.1:"+strconv.Itoa(b.port)
	links := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "cmd=cluster") {
			if !strings.Contains(line, tlsAddr) {
				t.Errorf("a link not on B's TLS port: %s", line)
			}
			links++
		} else if line != "" && !strings.Contains(line, plainAddr) {
			t.Errorf("a client on neither of B's ports: %s", line)
		}
	}
	if links == 0 {
		t.Errorf("no link on B's TLS port; CLIENT LIST:\n%s", list)
	}
	// A connection to the TLS port without a certificate is refused.
	c, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(b.tlsPort)), &tls.Config{RootCAs: pool})
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(testkit.IOTimeout))
		_, err = c.Write([]byte("PING\r\n"))
		if err == nil {
			_, err = c.Read(make([]byte, 16))
		}
		c.Close()
	}
	if err == nil {
		t.Errorf("a TLS client without a certificate was served")
	}
}

// With tls-cluster and no tls-ca-cert-file (and tls-auth-clients no, as
// no client certificate could be checked), no certificate is checked on
// the links, and they still work: the handshake, bound to each TLS
// session, authenticates the peers (cluster's TestLinkOverTLSRefusesRelay
// shows a relay failing).
func TestClusterLinksOverTLSWithoutCA(t *testing.T) {
	_, cert, key, _ := nodePKI(t)
	start2 := func(join string) (*redis.Client, int) {
		port := testkit.FreePair(t, cluster.BusPortOffset)
		cfg := clusterConfig(port)
		cfg.TLSPort, cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCluster, cfg.TLSAuthClients = testkit.FreePort(t), cert, key, true, "no"
		if join != "" {
			cfg.ClusterJoin = []string{join}
		}
		start(t, cfg)
		c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		testkit.WaitFor(t, "a node", func() bool { return c.Ping(ctx).Err() == nil })
		return c, port
	}
	a, pa := start2("")
	for i := range 100 {
		if err := a.Do(ctx, "FW.INCR", "user:"+strconv.Itoa(i), "1", "600").Err(); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := start2(net.JoinHostPort("127.0.0.1", strconv.Itoa(pa)))
	testkit.Until(t, 15*time.Second, "node B to take its keys", func() error {
		if n, err := b.DBSize(ctx).Result(); err != nil || n == 0 {
			return fmt.Errorf("B holds %d keys (%v)", n, err)
		}
		return nil
	})
}
