package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/tidwall/redcon"
)

// selfSigned is a TLS certificate for 127.0.0.1 signed by its own key.
func selfSigned(t *testing.T, name string) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// tlsLinkServer serves CLUSTER LINK for s over TLS with cert, as a node's
// TLS port does, handing Link the connection's TLS state; it returns its
// address and a count of the connections it took for links.
func tlsLinkServer(t *testing.T, s *Node, cert tls.Certificate) (string, *atomic.Int32) {
	t.Helper()
	linked := new(atomic.Int32)
	ln := tls.NewListener(testkit.Listen(t), &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert})
	srv := redcon.NewServer("", func(conn redcon.Conn, cmd redcon.Command) {
		lc, _ := conn.Context().(*linkConn)
		if lc == nil {
			lc = &linkConn{}
			conn.SetContext(lc)
		}
		if len(cmd.Args) < 2 || !strings.EqualFold(string(cmd.Args[1]), "link") {
			conn.WriteError("ERR unknown command")
			return
		}
		st := conn.NetConn().(*tls.Conn).ConnectionState()
		reply, next, ok, err := s.Link(lc.state, cmd.Args[2:], &st)
		lc.state = next
		switch {
		case err != nil:
			conn.WriteError("ERR " + err.Error())
		case ok:
			linked.Add(1)
			conn.WriteString("OK")
		default:
			conn.WriteArray(len(reply))
			for _, r := range reply {
				conn.WriteBulkString(r)
			}
		}
	}, nil, nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), linked
}

// tlsRelay is a man in the middle: it ends TLS from the dialer with a
// certificate of its own, opens TLS to target as a client, and copies
// the bytes between the two, unchanged.
func tlsRelay(t *testing.T, target string) string {
	t.Helper()
	ln := tls.NewListener(testkit.Listen(t), &tls.Config{Certificates: []tls.Certificate{selfSigned(t, "relay")}})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := tls.Dial("tcp", target, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the relay trusts anyone
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

// tlsLinkNode is linkNode with links over TLS that check no certificate
// (tls-cluster without tls-ca-cert-file).
func tlsLinkNode(t *testing.T, secret string) *Node {
	t.Helper()
	cfg := DefaultConfig()
	cfg.IP, cfg.Port, cfg.Secret = "127.0.0.1", 7000, secret
	cfg.TLS, cfg.TLSPort = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, 7001 //nolint:gosec // as linkTLS without a CA
	cfg.HandoffTimeout = testkit.IOTimeout
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Over TLS, the handshake's MACs are bound to the TLS session: a link
// straight to the peer is made, while a man in the middle who ends TLS on
// both sides and relays every byte unchanged gets no link, though neither
// end checks a certificate, and the peer counts no link either.
func TestLinkOverTLSRefusesRelay(t *testing.T) {
	s, d := tlsLinkNode(t, "s3cret"), tlsLinkNode(t, "s3cret")
	addr, linked := tlsLinkServer(t, s, selfSigned(t, "node"))

	fc, err := d.openLink(addr)
	if err != nil {
		t.Fatalf("a direct link over TLS: %v", err)
	}
	fc.c.Close()
	if linked.Load() != 1 {
		t.Fatalf("the peer took %d links, want 1", linked.Load())
	}

	fc, err = d.openLink(tlsRelay(t, addr))
	if err == nil {
		fc.c.Close()
		t.Fatal("a link relayed by a man in the middle was made")
	}
	if !errors.Is(err, ErrLinkAuth) {
		t.Fatalf("relayed: %v, want %v", err, ErrLinkAuth)
	}
	if linked.Load() != 1 {
		t.Fatalf("the peer took %d links, want 1 (the direct one)", linked.Load())
	}
}
