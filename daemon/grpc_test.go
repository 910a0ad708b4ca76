package daemon

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redis/go-redis/v9"

	"github.com/cellserver/cellserver/cluster"
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
	// Health turns SERVING once the daemon is ready (set by a goroutine
	// that waits for Ready, so just after it).
	testkit.WaitFor(t, "health SERVING once ready", func() bool {
		hs, err := healthpb.NewHealthClient(cc).Check(callCtx(t), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
		return err == nil && hs.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
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

// grpcLimit reads, without charging (the descriptor's hits_addend 0), the
// limit and remaining ShouldRateLimit reports for key=value in domain
// "load".
func grpcLimit(c pb.RateLimitServiceClient, key, value string) (uint32, uint32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testkit.IOTimeout)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "load", Descriptors: []*rlv3.RateLimitDescriptor{{
		Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}, HitsAddend: wrapperspb.UInt64(0)}}})
	if err != nil {
		return 0, 0, err
	}
	st := resp.GetStatuses()[0]
	return st.GetCurrentLimit().GetRequestsPerUnit(), st.GetLimitRemaining(), nil
}

// Reload under load, over gRPC: ShouldRateLimit is stormed from four
// connections (four callers each) while rules-file is rewritten 50 times,
// every tenth time with a broken file between. No call gets an error;
// each new limit is in force within a second of its write; a broken file
// leaves the rules in force; and the unchanged rule's counter is never
// reset: at the end it has charged exactly the storm's calls.
func TestGRPCReloadUnderLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeRules(t, path, loadRules(100))
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.RulesFile, cfg.GRPCPort = testkit.FreePort(t), "nothing", path, testkit.FreePort(t)
	cfg.EnableDebugCommand = true
	cfg.DebugClockStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() // one hour window throughout
	d := startRules(t, cfg, 50*time.Millisecond)
	testkit.Recv(t, d.Ready(), "the daemon to be ready")
	addr := "127.0.0.1:" + strconv.Itoa(cfg.GRPCPort)
	check := pb.NewRateLimitServiceClient(grpcDial(t, addr, nil))

	stop := make(chan struct{})
	var calls atomic.Int64
	var stormErr atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		c := pb.NewRateLimitServiceClient(grpcDial(t, addr, nil))
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := &pb.RateLimitRequest{Domain: "load", Descriptors: []*rlv3.RateLimitDescriptor{{
					Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "stable", Value: "s"}}}}}
				for i := 0; i < 100000; i++ {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), testkit.IOTimeout)
					resp, err := c.ShouldRateLimit(ctx, req)
					cancel()
					if err != nil {
						stormErr.Store(err)
						return
					}
					if resp.GetOverallCode() != pb.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit() == nil {
						stormErr.Store(fmt.Errorf("answer %v", resp))
						return
					}
					calls.Add(1)
				}
			}()
		}
	}
	for i := 1; i <= 50; i++ {
		if i%10 == 0 {
			failures := d.rules.Info().Failures
			writeRules(t, path, "domain: load\ndescriptors:\n  - key: changing\n    rate_limit:\n      unit: fortnight\n")
			testkit.Until(t, time.Second, "the broken file seen", func() error {
				if d.rules.Info().Failures == failures {
					return fmt.Errorf("not yet")
				}
				return nil
			})
			if lim, _, err := grpcLimit(check, "changing", "c"); err != nil || lim != uint32(100+i-1) {
				t.Fatalf("after a broken file: limit %d, %v; want %d in force", lim, err, 100+i-1)
			}
		}
		want := uint32(100 + i)
		writeRules(t, path, loadRules(100+i))
		testkit.Until(t, time.Second, fmt.Sprintf("limit %d in force", want), func() error {
			if lim, _, err := grpcLimit(check, "changing", "c"); err != nil || lim != want {
				return fmt.Errorf("limit %d, %v", lim, err)
			}
			return nil
		})
	}
	close(stop)
	wg.Wait()
	if err := stormErr.Load(); err != nil {
		t.Fatalf("storm: %v", err)
	}
	_, remaining, err := grpcLimit(check, "stable", "s")
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n == 0 || int64(remaining) != 1000000-n {
		t.Fatalf("stable rule: remaining %d after %d calls: its counter was reset", remaining, n)
	}
}

// In cluster mode any node answers ShouldRateLimit: a descriptor's
// counter lives on its key's slot, and a node that does not serve it
// charges it on the owner, so calls alternating between the nodes count
// on one counter (limit 2: the third call, whichever node takes it, is
// over).
func TestGRPCInCluster(t *testing.T) {
	pa, pb2 := testkit.FreePair(t, cluster.BusPortOffset), testkit.FreePair(t, cluster.BusPortOffset)
	ca, cb := clusterConfig(pa), clusterConfig(pb2)
	ca.GRPCPort, cb.GRPCPort = testkit.FreePort(t), testkit.FreePort(t)
	cb.ClusterJoin = []string{fmt.Sprintf("127.0.0.1:%d", pa)}
	start(t, ca)
	start(t, cb)
	ctx := context.Background()
	a := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", pa)})
	defer a.Close()
	testkit.Until(t, 30*time.Second, "both nodes to serve slots", func() error {
		s, err := a.Do(ctx, "CLUSTER", "SHARDS").Slice()
		if err != nil || len(s) != 2 {
			return fmt.Errorf("shards %v, %v", len(s), err)
		}
		return nil
	})
	yaml := "domain: c\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n"
	testkit.Until(t, 10*time.Second, "RULES SET on a", func() error { return a.Do(ctx, "RULES", "SET", "c", yaml).Err() })
	ga := pb.NewRateLimitServiceClient(grpcDial(t, "127.0.0.1:"+strconv.Itoa(ca.GRPCPort), nil))
	gb := pb.NewRateLimitServiceClient(grpcDial(t, "127.0.0.1:"+strconv.Itoa(cb.GRPCPort), nil))
	req := func(user string) *pb.RateLimitRequest {
		return &pb.RateLimitRequest{Domain: "c", Descriptors: []*rlv3.RateLimitDescriptor{{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}}}}}
	}
	// Both nodes have the rules and every user's slot is served (just
	// after the cluster forms, a slot can still be on its way): read
	// without charging (hits_addend 0) until each answers.
	testkit.Until(t, 30*time.Second, "the rules on both nodes, every slot served", func() error {
		for i := range 20 {
			for _, c := range []pb.RateLimitServiceClient{ga, gb} {
				r := req(fmt.Sprintf("u%d", i))
				r.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
				resp, err := c.ShouldRateLimit(callCtx(t), r)
				if err != nil || resp.GetStatuses()[0].GetCurrentLimit() == nil {
					return fmt.Errorf("%v, %v", resp, err)
				}
			}
		}
		return nil
	})
	for i := range 20 { // users whose counters fall on both nodes' slots
		user := fmt.Sprintf("u%d", i)
		for j, c := range []pb.RateLimitServiceClient{ga, gb, ga} {
			resp, err := c.ShouldRateLimit(callCtx(t), req(user))
			if err != nil {
				t.Fatalf("%s, call %d: %v", user, j, err)
			}
			over := resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT
			if over != (j == 2) || resp.GetStatuses()[0].GetLimitRemaining() != uint32(max(0, 1-j)) {
				t.Fatalf("%s, call %d: %v", user, j, resp)
			}
		}
	}
}

// The HTTP port reads /json's body, declared and bounded, even when it
// arrives after the headers (its connection limiter answers other
// requests that carry a body without reading it).
func TestJSONBodyAfterHeaders(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Port, cfg.LogLevel, cfg.MetricsAddr = testkit.FreePort(t), "warning", freeAddr(t)
	d := startHTTP(t, cfg, defaultHTTPConfig())
	setRules(t, d, "rl", twoPerMinute)
	body := `{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"late"}]}]}`
	c, err := net.DialTimeout("tcp", cfg.MetricsAddr, testkit.IOTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(testkit.IOTimeout))
	if _, err := fmt.Fprintf(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the body in a segment of its own, after the handler has started
	if _, err := io.WriteString(c, body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), "two") {
		t.Errorf("/json with its body after the headers: %d %s", resp.StatusCode, out)
	}
}

// fakeServing records what followReadiness sets.
type fakeServing struct {
	mu  sync.Mutex
	got []bool
}

func (f *fakeServing) SetServing(b bool) {
	f.mu.Lock()
	f.got = append(f.got, b)
	f.mu.Unlock()
}

func (f *fakeServing) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprint(f.got)
}

// followReadiness sets the health status from the readiness at once, then
// again each time it changes, and returns when stopped.
func TestFollowReadiness(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	fs := &fakeServing{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		followReadiness(fs, func() (bool, string) { return ready.Load(), "" }, time.Millisecond, stop)
		close(done)
	}()
	testkit.WaitFor(t, "SERVING", func() bool { return fs.String() == "[true]" })
	ready.Store(false)
	testkit.WaitFor(t, "NOT_SERVING", func() bool { return fs.String() == "[true false]" })
	ready.Store(true)
	testkit.WaitFor(t, "SERVING again", func() bool { return fs.String() == "[true false true]" })
	close(stop)
	testkit.Recv(t, done, "followReadiness to return")
}
