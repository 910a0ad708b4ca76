package grpcsvc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/rules"
)

// fakeChecker answers from a function and records the requests it got.
type fakeChecker struct {
	mu   sync.Mutex
	got  []rules.Request
	then func(rules.Request) (rules.Response, error)
}

func (f *fakeChecker) ShouldRateLimit(_ context.Context, req rules.Request) (rules.Response, error) {
	f.mu.Lock()
	f.got = append(f.got, req)
	f.mu.Unlock()
	if req.Domain == "" {
		return rules.Response{}, fmt.Errorf("rate limit domain must not be empty: %w", rules.ErrBadRequest)
	}
	if len(req.Descriptors) == 0 {
		return rules.Response{}, fmt.Errorf("rate limit descriptor list must not be empty: %w", rules.ErrBadRequest)
	}
	return f.then(req)
}

func (f *fakeChecker) last() rules.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got[len(f.got)-1]
}

// limited answers every descriptor with a limit of 10 per minute, 3
// left, 42.5 s to reset, except a descriptor whose first entry's value
// is "over" (over its limit, 0 left) or "none" (no rule: OK, no limit).
func limited(req rules.Request) (rules.Response, error) {
	out := rules.Response{OverallCode: rules.CodeOK}
	for _, d := range req.Descriptors {
		st := rules.Status{Code: rules.CodeOK, CurrentLimit: &rules.RateLimit{Name: "ten", RequestsPerUnit: 10, Unit: rules.UnitMinute},
			LimitRemaining: 3, DurationUntilReset: 42500 * time.Millisecond}
		switch d.Entries[0].Value {
		case "over":
			st.Code, st.LimitRemaining, out.OverallCode = rules.CodeOverLimit, 0, rules.CodeOverLimit
		case "none":
			st = rules.Status{Code: rules.CodeOK}
		}
		out.Statuses = append(out.Statuses, st)
	}
	return out, nil
}

// serve starts a Service with cfg over checker on loopback and returns its
// address.
func serve(t *testing.T, checker rules.Checker, cfg Config) (*Service, string) {
	t.Helper()
	s, err := New(checker, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln := testkit.Listen(t)
	testkit.Serve(t, s, ln, ErrServerClosed)
	return s, ln.Addr().String()
}

// dial returns a client connection to addr with creds (nil: plaintext).
func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), testkit.IOTimeout)
	t.Cleanup(cancel)
	return c
}

func desc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// A real gRPC client built from go-control-plane's types gets the
// checker's answer in Envoy's shape, and the checker gets the request's
// domain, entries and hits_addend (the request's and a descriptor's own).
func TestShouldRateLimitOverGRPC(t *testing.T) {
	fc := &fakeChecker{then: limited}
	_, addr := serve(t, fc, Config{})
	c := pb.NewRateLimitServiceClient(dial(t, addr, nil))

	d2 := desc("user", "over")
	d2.HitsAddend = wrapperspb.UInt64(0)
	resp, err := c.ShouldRateLimit(ctx(t), &pb.RateLimitRequest{Domain: "rl", HitsAddend: 5,
		Descriptors: []*rlv3.RateLimitDescriptor{desc("user", "42", "path", "/a"), d2, desc("user", "none")}})
	if err != nil {
		t.Fatal(err)
	}
	zero := uint64(0)
	want := rules.Request{Domain: "rl", HitsAddend: 5, Descriptors: []rules.Descriptor{
		{Entries: []rules.Entry{{Key: "user", Value: "42"}, {Key: "path", Value: "/a"}}},
		{Entries: []rules.Entry{{Key: "user", Value: "over"}}, HitsAddend: &zero},
		{Entries: []rules.Entry{{Key: "user", Value: "none"}}},
	}}
	if got := fc.last(); !reflect.DeepEqual(got, want) {
		t.Errorf("checker got %+v, want %+v", got, want)
	}
	lim := &pb.RateLimitResponse_RateLimit{Name: "ten", RequestsPerUnit: 10, Unit: pb.RateLimitResponse_RateLimit_MINUTE}
	reset := durationpb.New(42500 * time.Millisecond)
	wantResp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OVER_LIMIT, Statuses: []*pb.RateLimitResponse_DescriptorStatus{
		{Code: pb.RateLimitResponse_OK, CurrentLimit: lim, LimitRemaining: 3, DurationUntilReset: reset},
		{Code: pb.RateLimitResponse_OVER_LIMIT, CurrentLimit: lim, LimitRemaining: 0, DurationUntilReset: reset},
		{Code: pb.RateLimitResponse_OK},
	}}
	if !proto.Equal(resp, wantResp) {
		t.Errorf("response\n%v\nwant\n%v", resp, wantResp)
	}
}

// A request the checker refuses, or that a Go caller sends with a nil
// descriptor or entry, is answered InvalidArgument with the reason; the
// server goes on serving.
func TestMalformedRequestIsInvalidArgument(t *testing.T) {
	fc := &fakeChecker{then: limited}
	s, addr := serve(t, fc, Config{})
	c := pb.NewRateLimitServiceClient(dial(t, addr, nil))
	for _, tc := range []struct {
		req  *pb.RateLimitRequest
		want string
	}{
		{&pb.RateLimitRequest{Descriptors: []*rlv3.RateLimitDescriptor{desc("a", "b")}}, "domain must not be empty"},
		{&pb.RateLimitRequest{Domain: "rl"}, "descriptor list must not be empty"},
	} {
		_, err := c.ShouldRateLimit(ctx(t), tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ShouldRateLimit(%v) = %v, want InvalidArgument %q", tc.req, err, tc.want)
		}
	}
	// Over the wire a nil element cannot be sent; in process it can.
	for _, req := range []*pb.RateLimitRequest{
		nil,
		{Domain: "rl", Descriptors: []*rlv3.RateLimitDescriptor{nil}},
		{Domain: "rl", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{nil}}}},
	} {
		if _, err := s.ShouldRateLimit(ctx(t), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ShouldRateLimit(%v) = %v, want InvalidArgument", req, err)
		}
	}
	// Bytes that are no RateLimitRequest are the client's error too
	// (grpc's own handler would answer Internal).
	cc := dial(t, addr, nil)
	err := cc.Invoke(ctx(t), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &wrapperspb.BytesValue{Value: []byte{0xff, 0xff, 0xff}}, &pb.RateLimitResponse{})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "no RateLimitRequest") {
		t.Errorf("garbage request: %v, want InvalidArgument", err)
	}
	if _, err := c.ShouldRateLimit(ctx(t), &pb.RateLimitRequest{Domain: "rl", Descriptors: []*rlv3.RateLimitDescriptor{desc("a", "b")}}); err != nil {
		t.Errorf("after the bad requests: %v", err)
	}
}

// A request over MaxRecvMsgSize is refused with ResourceExhausted.
func TestMaxRecvMsgSize(t *testing.T) {
	_, addr := serve(t, &fakeChecker{then: limited}, Config{MaxRecvMsgSize: 1024})
	c := pb.NewRateLimitServiceClient(dial(t, addr, nil))
	_, err := c.ShouldRateLimit(ctx(t), &pb.RateLimitRequest{Domain: "rl", Descriptors: []*rlv3.RateLimitDescriptor{desc("k", strings.Repeat("v", 2048))}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 2 KiB request with a 1 KiB limit: %v, want ResourceExhausted", err)
	}
}

// A checker's other errors are Unavailable (retryable: in cluster mode,
// the owner is unreachable), and a panic under a call is Internal, not a
// crash.
func TestCheckerErrorsAndPanics(t *testing.T) {
	fc := &fakeChecker{then: func(req rules.Request) (rules.Response, error) {
		if req.Domain == "panic" {
			panic("boom")
		}
		return rules.Response{}, errors.New("cluster: owner unreachable")
	}}
	var logged testkit.SyncBuffer
	_, addr := serve(t, fc, Config{Logf: func(level, format string, args ...any) { fmt.Fprintf(&logged, format+"\n", args...) }})
	c := pb.NewRateLimitServiceClient(dial(t, addr, nil))
	one := []*rlv3.RateLimitDescriptor{desc("a", "b")}
	if _, err := c.ShouldRateLimit(ctx(t), &pb.RateLimitRequest{Domain: "rl", Descriptors: one}); status.Code(err) != codes.Unavailable {
		t.Errorf("checker error: %v, want Unavailable", err)
	}
	if _, err := c.ShouldRateLimit(ctx(t), &pb.RateLimitRequest{Domain: "panic", Descriptors: one}); status.Code(err) != codes.Internal {
		t.Errorf("checker panic: %v, want Internal", err)
	}
	if !strings.Contains(logged.String(), "panicked: boom") {
		t.Errorf("log %q does not tell of the panic", logged.String())
	}
}

// With ResponseHeaders, the answer carries RateLimit-Limit, -Remaining and
// -Reset of the descriptor envoyproxy/ratelimit picks: an over-limit one
// if any, else the one with a limit and the least remaining; none when no
// descriptor has a limit. Without it, no header.
func TestResponseHeaders(t *testing.T) {
	stat := func(code rules.Code, perUnit, remaining uint32, reset time.Duration) rules.Status {
		return rules.Status{Code: code, CurrentLimit: &rules.RateLimit{RequestsPerUnit: perUnit, Unit: rules.UnitSecond},
			LimitRemaining: remaining, DurationUntilReset: reset}
	}
	ok, over := rules.CodeOK, rules.CodeOverLimit
	for _, tc := range []struct {
		name string
		sts  []rules.Status
		want string
	}{
		{"least remaining", []rules.Status{stat(ok, 10, 7, time.Second), stat(ok, 20, 2, 30*time.Second), stat(ok, 5, 2, time.Hour)}, "RateLimit-Limit=20 RateLimit-Remaining=2 RateLimit-Reset=30"},
		{"over limit wins", []rules.Status{stat(ok, 10, 0, time.Second), stat(over, 20, 0, 1500*time.Millisecond), stat(ok, 5, 1, time.Hour)}, "RateLimit-Limit=20 RateLimit-Remaining=0 RateLimit-Reset=2"},
		{"no limit", []rules.Status{{Code: ok}, {Code: ok, LimitRemaining: ^uint32(0)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeChecker{then: func(req rules.Request) (rules.Response, error) {
				return rules.Response{OverallCode: ok, Statuses: tc.sts}, nil
			}}
			req := &pb.RateLimitRequest{Domain: "rl"}
			for range tc.sts {
				req.Descriptors = append(req.Descriptors, desc("k", "v"))
			}
			for _, headers := range []bool{false, true} {
				s, err := New(fc, Config{ResponseHeaders: headers})
				if err != nil {
					t.Fatal(err)
				}
				resp, err := s.ShouldRateLimit(ctx(t), req)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, h := range resp.GetResponseHeadersToAdd() {
					got = append(got, h.GetKey()+"="+h.GetValue())
				}
				want := tc.want
				if !headers {
					want = ""
				}
				if strings.Join(got, " ") != want {
					t.Errorf("headers %v: %q, want %q", headers, strings.Join(got, " "), want)
				}
			}
		})
	}
}

// testPKI makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA.
func testPKI(t *testing.T) (pool *x509.CertPool, server, client tls.Certificate) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "grpcsvc test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage) tls.Certificate {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return pool, leaf(2, x509.ExtKeyUsageServerAuth), leaf(3, x509.ExtKeyUsageClientAuth)
}

// Over TLS: with client certificates required, a client with one is
// answered and one without is refused at the handshake; with them
// optional (or not asked), a client without one is answered. A plaintext
// client is refused by a TLS service.
func TestTLS(t *testing.T) {
	pool, srvCert, cliCert := testPKI(t)
	for _, tc := range []struct {
		name       string
		auth       tls.ClientAuthType
		withCert   bool
		wantServed bool
	}{
		{"required, given", tls.RequireAndVerifyClientCert, true, true},
		{"required, missing", tls.RequireAndVerifyClientCert, false, false},
		{"optional, missing", tls.VerifyClientCertIfGiven, false, true},
		{"optional, given", tls.VerifyClientCertIfGiven, true, true},
		{"not asked", tls.NoClientCert, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool, ClientAuth: tc.auth, MinVersion: tls.VersionTLS12}
			_, addr := serve(t, &fakeChecker{then: limited}, Config{TLS: cfg})
			ccfg := &tls.Config{RootCAs: pool}
			if tc.withCert {
				ccfg.Certificates = []tls.Certificate{cliCert}
			}
			cc := dial(t, addr, credentials.NewTLS(ccfg))
			resp, err := pb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx(t), &pb.RateLimitRequest{Domain: "rl", Descriptors: []*rlv3.RateLimitDescriptor{desc("user", "1")}})
			if tc.wantServed && (err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK) {
				t.Errorf("served: %v %v, want OK", resp, err)
			}
			if !tc.wantServed && status.Code(err) != codes.Unavailable {
				t.Errorf("want the handshake refused (Unavailable), got %v %v", resp, err)
			}
			if tc.name == "not asked" {
				// A plaintext client gets no answer from a TLS port.
				c := pb.NewRateLimitServiceClient(dial(t, addr, nil))
				short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				if _, err := c.ShouldRateLimit(short, &pb.RateLimitRequest{Domain: "rl", Descriptors: []*rlv3.RateLimitDescriptor{desc("user", "1")}}); err == nil {
					t.Errorf("a plaintext client was answered by a TLS service")
				}
			}
		})
	}
}

// Health checks answer NOT_SERVING until SetServing(true), then SERVING
// for "", the service's full name and envoyproxy/ratelimit's "ratelimit";
// an unknown name is NotFound; after Shutdown begins, NOT_SERVING.
func TestHealth(t *testing.T) {
	s, err := New(&fakeChecker{then: limited}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln := testkit.Listen(t)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	h := healthpb.NewHealthClient(dial(t, ln.Addr().String(), nil))
	check := func(name string) string {
		t.Helper()
		resp, err := h.Check(ctx(t), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			return status.Code(err).String()
		}
		return resp.GetStatus().String()
	}
	for _, name := range []string{"", ServiceName, HealthName} {
		if got := check(name); got != "NOT_SERVING" {
			t.Errorf("before SetServing: %q is %s", name, got)
		}
	}
	s.SetServing(true)
	for _, name := range []string{"", ServiceName, HealthName} {
		if got := check(name); got != "SERVING" {
			t.Errorf("after SetServing(true): %q is %s", name, got)
		}
	}
	if got := check("nope"); got != "NotFound" {
		t.Errorf("unknown service: %s, want NotFound", got)
	}
	// A watcher sees the shutdown.
	w, err := h.Watch(ctx(t), &healthpb.HealthCheckRequest{Service: ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch: %v %v", m, err)
	}
	go func() {
		c, cancel := context.WithTimeout(context.Background(), testkit.IOTimeout)
		defer cancel()
		_ = s.Shutdown(c)
	}()
	if m, err := w.Recv(); err == nil && m.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("watch after Shutdown: %v, want NOT_SERVING or the end of the stream", m)
	}
	select {
	case err := <-served:
		if !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(testkit.IOTimeout):
		t.Fatal("Serve did not return after Shutdown")
	}
	if err := s.Serve(testkit.Listen(t)); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Shutdown: %v", err)
	}
}

// MaxConns bounds the connections of every listener together: past it, a
// client waits (its call does not complete) until a connection closes.
func TestMaxConns(t *testing.T) {
	s, err := New(&fakeChecker{then: limited}, Config{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln1, ln2 := testkit.Listen(t), testkit.Listen(t)
	testkit.Serve(t, s, ln1, ErrServerClosed)
	go func() { _ = s.Serve(ln2) }()
	req := &pb.RateLimitRequest{Domain: "rl", Descriptors: []*rlv3.RateLimitDescriptor{desc("user", "1")}}
	first := dial(t, ln1.Addr().String(), nil)
	if _, err := pb.NewRateLimitServiceClient(first).ShouldRateLimit(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	second := dial(t, ln2.Addr().String(), nil)
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := pb.NewRateLimitServiceClient(second).ShouldRateLimit(short, req); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a second connection past MaxConns 1: %v, want it to wait", err)
	}
	_ = first.Close()
	if _, err := pb.NewRateLimitServiceClient(second).ShouldRateLimit(ctx(t), req); err != nil {
		t.Errorf("once the first connection closed: %v", err)
	}
}
