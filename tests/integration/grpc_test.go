package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/rules"
	"github.com/cellserver/cellserver/rules/rulestest"
)

// binaryGRPCFront asks a cellserver binary started with --grpc-port and
// --metrics-addr: RULES SET and DEBUG CLOCK over RESP, the checks over
// gRPC (ShouldRateLimit) or /json, so that the transcripts RL.CHECK
// passes run, unchanged, through the binary's Envoy front ends.
type binaryGRPCFront struct {
	rdb    *redis.Client
	client pb.RateLimitServiceClient
	json   string // /json's URL; "" asks over gRPC
}

func newBinaryGRPCFront(json bool) func(t *testing.T) rulestest.Front {
	bin := ""
	return func(t *testing.T) rulestest.Front {
		if bin == "" {
			bin = testkit.Build(t, testkit.Cellserver)
		}
		grpcPort, httpPort := testkit.FreePort(t), testkit.FreePort(t)
		p := startBinary(t, rulestest.T0, bin, "--grpc-port", strconv.Itoa(grpcPort),
			"--metrics-addr", "127.0.0.1:"+strconv.Itoa(httpPort), "--loglevel", "warning")
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		cc, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		// The service answers health checks SERVING once the server serves.
		testkit.WaitFor(t, "gRPC health SERVING", func() bool {
			r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
			return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
		})
		f := &binaryGRPCFront{rdb: rdb, client: pb.NewRateLimitServiceClient(cc)}
		if json {
			f.json = "http://127.0.0.1:" + strconv.Itoa(httpPort) + "/json"
		}
		return f
	}
}

func (f *binaryGRPCFront) SetRules(t *testing.T, text string) error {
	// As the RESP front: a text that does not parse names no domain of
	// its own; RULES SET refuses it with the same reason.
	name := "bad"
	if d, err := rules.Parse("local", []byte(text)); err == nil {
		name = d.Name
	} else if m := strings.SplitN(text, "domain:", 2); len(m) == 2 {
		if w := strings.Fields(m[1]); len(w) > 0 {
			name = w[0]
		}
	}
	return f.rdb.Do(ctx, "RULES", "SET", name, text).Err()
}

func (f *binaryGRPCFront) SetClock(t *testing.T, ns int64) { setClock(t, f.rdb, ns) }

func (f *binaryGRPCFront) Stats(t *testing.T, key string) string { return "" }

func (f *binaryGRPCFront) Check(t *testing.T, req rules.Request) (rules.Response, error) {
	in := &pb.RateLimitRequest{Domain: req.Domain, HitsAddend: uint32(req.HitsAddend)}
	for _, d := range req.Descriptors {
		pd := &rlv3.RateLimitDescriptor{}
		for _, e := range d.Entries {
			pd.Entries = append(pd.Entries, &rlv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
		}
		if d.HitsAddend != nil {
			pd.HitsAddend = wrapperspb.UInt64(*d.HitsAddend)
		}
		in.Descriptors = append(in.Descriptors, pd)
	}
	var resp *pb.RateLimitResponse
	if f.json == "" {
		var err error
		if resp, err = f.client.ShouldRateLimit(ctx, in); err != nil {
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("ShouldRateLimit: %v", err)
			}
			return rules.Response{}, errors.New(st.Message())
		}
	} else {
		body, _ := protojson.Marshal(in)
		hr, err := http.Post(f.json, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer hr.Body.Close()
		out, _ := io.ReadAll(hr.Body)
		if hr.StatusCode == http.StatusBadRequest {
			// /json says only "Bad Request": the same request over gRPC
			// gives the reason (a refusal charges nothing).
			_, err := f.client.ShouldRateLimit(ctx, in)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("/json answered 400 %q to a request gRPC answers (%v)", out, err)
			}
			return rules.Response{}, errors.New(status.Convert(err).Message())
		}
		resp = &pb.RateLimitResponse{}
		if err := protojson.Unmarshal(out, resp); err != nil {
			t.Fatalf("/json answered %d %q: %v", hr.StatusCode, out, err)
		}
		if over := resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT; over != (hr.StatusCode == http.StatusTooManyRequests) {
			t.Errorf("/json: status %d for %s", hr.StatusCode, resp.GetOverallCode())
		}
	}
	out := rules.Response{OverallCode: rules.Code(resp.GetOverallCode())}
	for _, st := range resp.GetStatuses() {
		s := rules.Status{Code: rules.Code(st.GetCode()), LimitRemaining: st.GetLimitRemaining(), DurationUntilReset: st.GetDurationUntilReset().AsDuration()}
		if l := st.GetCurrentLimit(); l != nil {
			s.CurrentLimit = &rules.RateLimit{Name: l.GetName(), RequestsPerUnit: l.GetRequestsPerUnit(), Unit: rules.Unit(l.GetUnit())}
		}
		out.Statuses = append(out.Statuses, s)
	}
	return out, nil
}

// TestRulesTranscriptsOverGRPCBinary runs the rules' transcripts
// (envoyproxy/ratelimit's eleven README examples, its corners, the
// extensions) through a cellserver binary's gRPC port: the same answers
// as RL.CHECK over RESP (TestRulesTranscriptsOverRESP) and as the rules'
// Service.
func TestRulesTranscriptsOverGRPCBinary(t *testing.T) {
	rulestest.Run(t, "../../rules/testdata", newBinaryGRPCFront(false))
}

// TestRulesTranscriptsOverJSONBinary runs them through the binary's /json.
func TestRulesTranscriptsOverJSONBinary(t *testing.T) {
	rulestest.Run(t, "../../rules/testdata", newBinaryGRPCFront(true))
}

// TestGRPCOverTLSBinary: a binary with --tls-grpc serves the gRPC port
// over TLS with the TLS port's certificate and client certificate policy
// (tls-auth-clients yes: a client without a certificate is refused), and
// a certificate renewed on disk is served to the next connection, as the
// TLS port's is.
func TestGRPCOverTLSBinary(t *testing.T) {
	pki := newTestPKI(t)
	grpcPort := testkit.FreePort(t)
	p := testkit.StartProcess(t, testkit.Build(t, testkit.Cellserver), 0, "--loglevel", "warning",
		"--tls-port", strconv.Itoa(testkit.FreePort(t)), "--tls-cert-file", pki.certFile, "--tls-key-file", pki.keyFile,
		"--tls-ca-cert-file", pki.caFile, "--tls-auth-clients", "yes", "--tls-grpc", "yes", "--grpc-port", strconv.Itoa(grpcPort))
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer rdb.Close()
	if err := rdb.Do(ctx, "RULES", "SET", "rl", "domain: rl\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 5\n").Err(); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(grpcPort)
	req := &pb.RateLimitRequest{Domain: "rl", Descriptors: []*rlv3.RateLimitDescriptor{{
		Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: "1"}}}}}
	// call makes one call on a new connection and returns the serial of
	// the certificate the server presented.
	call := func(withCert bool) (int64, error) {
		t.Helper()
		cfg := &tls.Config{RootCAs: pki.caPool}
		if withCert {
			cfg.Certificates = []tls.Certificate{pki.client}
		}
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		var pr peer.Peer
		c, cancel := context.WithTimeout(ctx, testkit.IOTimeout)
		defer cancel()
		resp, err := pb.NewRateLimitServiceClient(cc).ShouldRateLimit(c, req, grpc.Peer(&pr))
		if err != nil {
			return 0, err
		}
		if resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() != 5 {
			t.Errorf("answer %v", resp)
		}
		return pr.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber.Int64(), nil
	}
	if serial, err := call(true); err != nil || serial != 2 {
		t.Fatalf("with a client certificate: serial %d, %v; want 2", serial, err)
	}
	if _, err := call(false); status.Code(err) != codes.Unavailable {
		t.Fatalf("without a client certificate: %v, want the handshake refused", err)
	}
	cert, _ := os.ReadFile(pki.renewedCert)
	key, _ := os.ReadFile(pki.renewedKey)
	later := time.Now().Add(time.Minute)
	for path, b := range map[string][]byte{pki.certFile: cert, pki.keyFile: key} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if serial, err := call(true); err != nil || serial != 4 {
		t.Fatalf("after renewal: serial %d, %v; want 4", serial, err)
	}
}
