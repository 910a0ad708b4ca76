package grpcsvc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/grpcsvc"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/limiter"
	"github.com/cellserver/cellserver/rules"
	"github.com/cellserver/cellserver/rules/rulestest"
)

// engineStore charges counters on an engine, as the daemon's Store does
// for the slots a node serves.
type engineStore struct{ v *engine.View }

func (s engineStore) Apply(_ context.Context, c *rules.Charge) (limiter.Result, error) {
	return s.v.Apply(c.Key, &c.Request, nil)
}

// wireFront asks a rules.Service through the gRPC service, over a real
// gRPC connection (json false) or the /json handler over real HTTP (json
// true), and turns the answer back into a rules.Response, so that the
// rules' transcripts, which RL.CHECK and the Service itself pass, run
// unchanged through the wire.
type wireFront struct {
	svc    *rules.Service
	clock  *engine.ManualClock
	json   bool
	client pb.RateLimitServiceClient
	url    string
}

func newWireFront(json bool) func(t *testing.T) rulestest.Front {
	return func(t *testing.T) rulestest.Front {
		clock := engine.NewManualClock(rulestest.T0)
		eng, err := engine.New(engine.Config{Shards: 4, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = eng.Close() })
		f := &wireFront{svc: rules.NewService(rules.Config{Store: engineStore{eng.NewView()}, Now: clock.Now}), clock: clock, json: json}
		gs, err := grpcsvc.New(f.svc, grpcsvc.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if json {
			hs := httptest.NewServer(gs.JSONHandler())
			t.Cleanup(hs.Close)
			f.url = hs.URL + grpcsvc.JSONPath
			return f
		}
		ln := testkit.Listen(t)
		testkit.Serve(t, gs, ln, grpcsvc.ErrServerClosed)
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		f.client = pb.NewRateLimitServiceClient(cc)
		return f
	}
}

func (f *wireFront) SetRules(t *testing.T, text string) error {
	d, err := rules.Parse("test.yaml", []byte(text))
	if err != nil {
		return err
	}
	f.svc.SetRules(rules.NewSet(time.Unix(0, f.clock.Now()), append(f.svc.Rules().Domains(), d)...))
	return nil
}

func (f *wireFront) SetClock(t *testing.T, ns int64) { f.clock.Set(ns) }

func (f *wireFront) Stats(t *testing.T, key string) string {
	st := f.svc.StatsOf(key)
	if st == nil {
		return "none"
	}
	return rulestest.FormatStats(st)
}

func (f *wireFront) Check(t *testing.T, req rules.Request) (rules.Response, error) {
	in := toPB(req)
	if !f.json {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.IOTimeout)
		defer cancel()
		resp, err := f.client.ShouldRateLimit(ctx, in)
		if err != nil {
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("ShouldRateLimit: %v, want an answer or InvalidArgument", err)
			}
			return rules.Response{}, errors.New(st.Message()) // the checker's own text
		}
		return fromPB(resp), nil
	}
	body, err := protojson.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	hr, err := http.Post(f.url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	out, _ := io.ReadAll(hr.Body)
	if hr.StatusCode == http.StatusBadRequest {
		// /json answers a refusal with "Bad Request" alone, as
		// envoyproxy/ratelimit's: check the checker refuses the same
		// request (a refusal charges nothing) and report its reason.
		_, err := f.svc.ShouldRateLimit(context.Background(), req)
		if !errors.Is(err, rules.ErrBadRequest) {
			t.Fatalf("/json answered 400 %q to a request the checker answers (%v)", out, err)
		}
		return rules.Response{}, err
	}
	var resp pb.RateLimitResponse
	if err := protojson.Unmarshal(out, &resp); err != nil {
		t.Fatalf("/json answered %d %q: %v", hr.StatusCode, out, err)
	}
	want := http.StatusOK
	if resp.GetOverallCode() == pb.RateLimitResponse_OVER_LIMIT {
		want = http.StatusTooManyRequests
	}
	if hr.StatusCode != want {
		t.Errorf("/json: status %d for overall %s, want %d", hr.StatusCode, resp.GetOverallCode(), want)
	}
	return fromPB(&resp), nil
}

func toPB(req rules.Request) *pb.RateLimitRequest {
	out := &pb.RateLimitRequest{Domain: req.Domain, HitsAddend: uint32(req.HitsAddend)}
	for _, d := range req.Descriptors {
		pd := &rlv3.RateLimitDescriptor{}
		for _, e := range d.Entries {
			pd.Entries = append(pd.Entries, &rlv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
		}
		if d.HitsAddend != nil {
			pd.HitsAddend = wrapperspb.UInt64(*d.HitsAddend)
		}
		out.Descriptors = append(out.Descriptors, pd)
	}
	return out
}

func fromPB(in *pb.RateLimitResponse) rules.Response {
	out := rules.Response{OverallCode: rules.Code(in.GetOverallCode())}
	for _, st := range in.GetStatuses() {
		s := rules.Status{Code: rules.Code(st.GetCode()), LimitRemaining: st.GetLimitRemaining(), DurationUntilReset: st.GetDurationUntilReset().AsDuration()}
		if l := st.GetCurrentLimit(); l != nil {
			s.CurrentLimit = &rules.RateLimit{Name: l.GetName(), RequestsPerUnit: l.GetRequestsPerUnit(), Unit: rules.Unit(l.GetUnit())}
		}
		out.Statuses = append(out.Statuses, s)
	}
	return out
}

// TestTranscriptsOverGRPC runs the rules' transcripts (envoyproxy/ratelimit's
// eleven README examples, its corners, the extensions), whose answers
// RL.CHECK and the rules.Service give, through ShouldRateLimit over gRPC:
// the same requests get the same answers.
func TestTranscriptsOverGRPC(t *testing.T) {
	rulestest.Run(t, "../rules/testdata", newWireFront(false))
}

// TestTranscriptsOverJSON runs them through the /json endpoint.
func TestTranscriptsOverJSON(t *testing.T) {
	rulestest.Run(t, "../rules/testdata", newWireFront(true))
}

func testTime() time.Time { return time.Unix(0, rulestest.T0) }
