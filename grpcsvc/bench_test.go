package grpcsvc_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/grpcsvc"
	"github.com/cellserver/cellserver/internal/testkit"
	"github.com/cellserver/cellserver/rules"
)

// BenchmarkShouldRateLimit: one descriptor per call, over a loopback gRPC
// connection, through a rules.Service on an engine: the service's cost per
// decision, client included.
func BenchmarkShouldRateLimit(b *testing.B) {
	eng, err := engine.New(engine.Config{Shards: 64})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Close() })
	svc := rules.NewService(rules.Config{Store: engineStore{eng.NewView()}})
	dom, err := rules.Parse("bench.yaml", []byte("domain: bench\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n"))
	if err != nil {
		b.Fatal(err)
	}
	svc.SetRules(rules.NewSet(testTime(), dom))
	gs, err := grpcsvc.New(svc, grpcsvc.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ln := testkit.Listen(b)
	testkit.Serve(b, gs, ln, grpcsvc.ErrServerClosed)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	c := pb.NewRateLimitServiceClient(cc)
	reqs := make([]*pb.RateLimitRequest, 10000)
	for i := range reqs {
		reqs[i] = &pb.RateLimitRequest{Domain: "bench", Descriptors: []*rlv3.RateLimitDescriptor{{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: "value" + strconv.Itoa(i)}}}}}
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := c.ShouldRateLimit(context.Background(), reqs[i%int64(len(reqs))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
