// Package grpcsvc is the gRPC rate-limit service: Envoy's global rate-limit
// protocol (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit)
// over gRPC, with gRPC health checking (grpc.health.v1), and the same
// answers as JSON on an HTTP handler (the /json endpoint of
// envoyproxy/ratelimit, for curl and callers without gRPC).
//
// It owns the wire: turning Envoy's messages into a rules.Request and a
// rules.Response back into Envoy's messages (and the optional RateLimit-*
// response headers), the gRPC server's bounds (message size, streams per
// connection, connections, keepalive) and its lifecycle (Serve, Shutdown,
// Close, as net/http's Server). Matching descriptors to limits and
// charging them, locally or on the key's owner in cluster mode, is the
// rules.Checker's: this package only calls it.
//
// The gRPC server, its health service and the message types are
// google.golang.org/grpc's and github.com/envoyproxy/go-control-plane's;
// the JSON handler uses protojson, as envoyproxy/ratelimit's does, so its
// bodies are the same. Three things are written by hand around them: the
// connection bound (limitListener), since golang.org/x/net/netutil's
// bounds one listener and the service listens on every bind address with
// one bound for all of them; the end of health Watch streams at shutdown
// (healthServer), which grpc's health server leaves open, so that a
// graceful stop would wait for every watcher until its deadline; and
// ShouldRateLimit's handler, which decodes the request itself
// (decode.go), since grpc's generated one answers bytes that do not
// decode with Internal, a server's fault, rather than InvalidArgument.
//
// It imports rules, grpc and go-control-plane; it must not import engine,
// commands, server or daemon: package daemon builds it from the settings
// and wires it.
package grpcsvc
