package daemon

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
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
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/server"
)

// setRules puts one domain's YAML in force in d's rules, as RULES SET
// does.
func setRules(t *testing.T, d *Daemon, domain, yaml string) {
	t.Helper()
	if err := d.rules.SetDomain(domain, []byte(yaml)); err != nil {
		t.Fatal(err)
	}
}

func grpcDial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
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

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testkit.IOTimeout)
	t.Cleanup(cancel)
	return ctx
}

const twoPerMinute = `domain: rl
descriptors:
  - key: user
    rate_limit:
      name: two
      unit: minute
      requests_per_unit: 2
`

func userReq(v string) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: "rl", Descriptors: []*rlv3.RateLimitDescriptor{
		{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: v}}}}}
}

// With grpc-port set, the daemon serves ShouldRateLimit from its rules,
// health checks SERVING once ready, and /json on the HTTP port (through
// its connection limiter, which reads /json's body); the gRPC answers and
// /json's charge the same counters.
func TestDaemonServesGRPCAndJSON(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr, cfg.GRPCPort = testkit.FreePort(t), "warning", freeAddr(t), testkit.FreePort(t)
	cfg.GRPCResponseHeaders = true
	d := startHTTP(t, cfg, defaultHTTPConfig())
	setRules(t, d, "rl", twoPerMinute)

	cc := grpcDial(t, "127.0.0.1:"+strconv.Itoa(cfg.GRPCPort), nil)
	hs, err := healthpb.NewHealthClient(cc).Check(callCtx(t), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil || hs.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health once ready: %v %v", hs, err)
	}
	c := pb.NewRateLimitServiceClient(cc)
	resp, err := c.ShouldRateLimit(callCtx(t), userReq("42"))
	if err != nil {
		t.Fatal(err)
	}
	st := resp.GetStatuses()[0]
	if resp.GetOverallCode() != pb.RateLimitResponse_OK || st.GetCurrentLimit().GetName() != "two" || st.GetLimitRemaining() != 1 {
		t.Errorf("first call: %v", resp)
	}
	var hdrs []string
	for _, h := range resp.GetResponseHeadersToAdd() {
		hdrs = append(hdrs, h.GetKey()+"="+h.GetValue())
	}
	if got := strings.Join(hdrs[:2], " "); got != "RateLimit-Limit=2 RateLimit-Remaining=1" {
		t.Errorf("headers %v", hdrs)
	}

	post := func(body string) (int, string) {
		t.Helper()
		r, err := oneShot.Post("http://"+cfg.MetricsAddr+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	body := `{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"42"}]}]}`
	decode := func(out string) *pb.RateLimitResponse {
		t.Helper()
		var r pb.RateLimitResponse
		if err := protojson.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("/json answered %q: %v", out, err)
		}
		return &r
	}
	if code, out := post(body); code != http.StatusOK || decode(out).GetStatuses()[0].GetCurrentLimit().GetName() != "two" {
		t.Errorf("/json second hit: %d %s", code, out)
	}
	if code, out := post(body); code != http.StatusTooManyRequests || decode(out).GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("/json third hit: %d %s, want 429", code, out)
	}
	if code, _ := post(`{"domain":"rl"}`); code != http.StatusBadRequest {
		t.Errorf("/json without descriptors: %d, want 400", code)
	}
	resp, err = c.ShouldRateLimit(callCtx(t), userReq("42"))
	if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("gRPC after /json's hits: %v %v, want OVER_LIMIT", resp, err)
	}
	if _, err := c.ShouldRateLimit(callCtx(t), &pb.RateLimitRequest{Domain: "rl"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no descriptors: %v", err)
	}
}

// With tls-grpc, the gRPC port speaks TLS with the TLS port's certificate
// and its client certificate policy: with tls-auth-clients yes, a client
// with a certificate is served and one without is refused.
func TestDaemonGRPCOverTLS(t *testing.T) {
	ca, cert, key, pool := nodePKI(t)
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.GRPCPort = testkit.FreePort(t), "warning", testkit.FreePort(t)
	cfg.TLSPort, cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCACertFile, cfg.TLSAuthClients = testkit.FreePort(t), cert, key, ca, "yes"
	cfg.TLSGRPC = true
	d := startHTTP(t, cfg, defaultHTTPConfig())
	setRules(t, d, "rl", twoPerMinute)
	addr := "127.0.0.1:" + strconv.Itoa(cfg.GRPCPort)

	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	with := pb.NewRateLimitServiceClient(grpcDial(t, addr, credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}})))
	if resp, err := with.ShouldRateLimit(callCtx(t), userReq("1")); err != nil || resp.GetStatuses()[0].GetLimitRemaining() != 1 {
		t.Errorf("with a client certificate: %v %v", resp, err)
	}
	without := pb.NewRateLimitServiceClient(grpcDial(t, addr, credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if _, err := without.ShouldRateLimit(callCtx(t), userReq("1")); status.Code(err) != codes.Unavailable {
		t.Errorf("without a client certificate: %v, want the handshake refused", err)
	}
	plain := pb.NewRateLimitServiceClient(grpcDial(t, addr, nil))
	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := plain.ShouldRateLimit(short, userReq("1")); err == nil {
		t.Errorf("a plaintext client was answered on a TLS gRPC port")
	}
}

// tls-grpc needs tls-port; a busy grpc-port stops Run with its error.
func TestGRPCSettingsChecked(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.GRPCPort, cfg.TLSGRPC = 1, true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "tls-grpc: needs tls-port") {
		t.Errorf("tls-grpc without tls-port: %v", err)
	}
	busy := testkit.Listen(t)
	cfg = server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.GRPCPort = testkit.FreePort(t), "warning", testkit.Port(busy)
	d, err := New(Config{Server: cfg})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- d.Run() }()
	err = testkit.Recv(t, errc, "Run to fail")
	if err == nil || !strings.Contains(err.Error(), "grpc-port") {
		t.Errorf("Run on a busy grpc-port: %v", err)
	}
}
