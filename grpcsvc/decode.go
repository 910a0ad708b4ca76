package grpcsvc

import (
	"context"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A ShouldRateLimit request whose bytes are no RateLimitRequest is a
// client's error, answered InvalidArgument; grpc's generated handler
// decodes before any code of ours runs and answers such a request
// Internal, as for a fault of the server's. So the service is registered
// with a handler of its own (serviceDesc), which has the codec (codec)
// hand it the request's bytes as they came (rawRequest) and decodes them
// itself. Every other message, the health service's and the answers,
// goes through grpc's protobuf codec unchanged.

// rawRequest is a request's bytes, undecoded.
type rawRequest struct{ b []byte }

// codec is grpc's protobuf codec, but for a *rawRequest, whose bytes it
// copies out (grpc frees the buffers once Unmarshal returns).
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2(grpcproto.Name)} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawRequest); ok {
		r.b = data.Materialize()
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

func (codec) Name() string { return grpcproto.Name }

// serviceDesc is RateLimitService's description with shouldRateLimit as
// its method's handler.
var serviceDesc = func() grpc.ServiceDesc {
	d := pb.RateLimitService_ServiceDesc
	d.Methods = []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimit}}
	return d
}()

// shouldRateLimit is the generated handler's work, with the request
// decoded here: bytes that do not decode are InvalidArgument.
func shouldRateLimit(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	var raw rawRequest
	if err := dec(&raw); err != nil {
		return nil, err
	}
	in := new(pb.RateLimitRequest)
	if err := proto.Unmarshal(raw.b, in); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "grpcsvc: the request is no RateLimitRequest: %v", err)
	}
	s := srv.(pb.RateLimitServiceServer)
	if interceptor == nil {
		return s.ShouldRateLimit(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: pb.RateLimitService_ShouldRateLimit_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return s.ShouldRateLimit(ctx, req.(*pb.RateLimitRequest))
	})
}
