package grpcsvc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/cellserver/cellserver/rules"
)

// ServiceName is the rate-limit service's full gRPC name, which health
// checks may ask about besides "" (the whole server) and HealthName.
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// HealthName is the service name envoyproxy/ratelimit's health checks ask
// about; the service answers it too, so that an existing health check
// configuration works unchanged.
const HealthName = "ratelimit"

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("grpcsvc: server closed")

// Config configures a Service. The zero value is a valid configuration:
// every zero field takes its default (EnsureDefaults).
type Config struct {
	// TLS, when not nil, makes the service speak TLS only, with this
	// configuration (the server's certificate, reloaded as the TLS port's
	// is, and its client certificate policy). Default: nil, plaintext.
	TLS *tls.Config
	// ResponseHeaders adds the RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset headers to every answer that has a limit, as
	// envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED does.
	// Default: false.
	ResponseHeaders bool
	// MaxConns bounds the connections served at once, over every
	// listener Serve is given; past it, a new client waits, unanswered,
	// until one closes (each listener holds at most one such client
	// accepted, the others wait in its listen queue). Default: 1024.
	MaxConns int
	// MaxRecvMsgSize is the largest request accepted, in bytes; a larger
	// one is refused with ResourceExhausted. Default: 1 MiB (a request of
	// a few descriptors is well under a kilobyte).
	MaxRecvMsgSize int
	// MaxConcurrentStreams bounds the calls under way at once on one
	// connection. Default: 1024.
	MaxConcurrentStreams uint32
	// MaxConnectionIdle closes (with GOAWAY) a connection that has had no
	// call under way for that long. Default: 5 minutes.
	MaxConnectionIdle time.Duration
	// ConnectionTimeout bounds a new connection's handshakes (TLS, the
	// HTTP/2 preface). Default: 10 seconds.
	ConnectionTimeout time.Duration
	// Logf, when not nil, writes a log line at a level ("warning",
	// "notice", ...). Default: nil, no log.
	Logf func(level, format string, args ...any)
}

// EnsureDefaults sets every zero field of c to its default.
func (c *Config) EnsureDefaults() {
	if c.MaxConns == 0 {
		c.MaxConns = 1024
	}
	if c.MaxRecvMsgSize == 0 {
		c.MaxRecvMsgSize = 1 << 20
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = 1024
	}
	if c.MaxConnectionIdle == 0 {
		c.MaxConnectionIdle = 5 * time.Minute
	}
	if c.ConnectionTimeout == 0 {
		c.ConnectionTimeout = 10 * time.Second
	}
}

// Validate reports whether c's bounds make sense.
func (c *Config) Validate() error {
	switch {
	case c.MaxConns < 0:
		return errors.New("grpcsvc: MaxConns must not be negative")
	case c.MaxRecvMsgSize < 0:
		return errors.New("grpcsvc: MaxRecvMsgSize must not be negative")
	case c.MaxConnectionIdle < 0 || c.ConnectionTimeout < 0:
		return errors.New("grpcsvc: durations must not be negative")
	}
	return nil
}

// Service answers Envoy's ShouldRateLimit over gRPC (Serve) and as JSON
// over HTTP (JSONHandler) through a rules.Checker, and answers gRPC health
// checks. Its methods are safe for concurrent use.
type Service struct {
	pb.UnimplementedRateLimitServiceServer

	checker rules.Checker
	cfg     Config
	grpc    *grpc.Server
	health  *health.Server
	conns   chan struct{} // one token per open connection, over every listener
	stop    chan struct{} // closed when the service stops: health watches end

	mu     sync.Mutex
	closed bool
}

var _ pb.RateLimitServiceServer = (*Service)(nil)

// New returns a Service that answers through checker. Its health status
// is NOT_SERVING until SetServing(true).
func New(checker rules.Checker, cfg Config) (*Service, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{checker: checker, cfg: cfg, health: health.NewServer(),
		conns: make(chan struct{}, cfg.MaxConns), stop: make(chan struct{})}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
		grpc.ConnectionTimeout(cfg.ConnectionTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: cfg.MaxConnectionIdle}),
		// Envoy and other clients may ping to keep a quiet connection
		// open; grpc's default policy (one ping per 5 minutes, none
		// without a call) would close theirs with "too_many_pings".
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ChainUnaryInterceptor(s.recoverUnary),
		grpc.ForceServerCodecV2(newCodec()), // decode.go
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS.Clone())))
	}
	s.grpc = grpc.NewServer(opts...)
	s.grpc.RegisterService(&serviceDesc, s) // decode.go
	healthpb.RegisterHealthServer(s.grpc, healthServer{Server: s.health, stop: s.stop})
	s.SetServing(false)
	return s, nil
}

// SetServing sets the health status the service reports for "",
// ServiceName and HealthName: SERVING or NOT_SERVING. The daemon sets it
// to SERVING once it serves, and Shutdown to NOT_SERVING for good.
func (s *Service) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range []string{"", ServiceName, HealthName} {
		s.health.SetServingStatus(name, st)
	}
}

// Serve accepts connections on ln and serves them until Shutdown or
// Close, after which it returns ErrServerClosed. It may be called for
// several listeners; MaxConns bounds their connections together. It
// closes ln when it returns.
func (s *Service) Serve(ln net.Listener) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		_ = ln.Close()
		return ErrServerClosed
	}
	err := s.grpc.Serve(newLimitListener(ln, s.conns))
	if errors.Is(err, grpc.ErrServerStopped) || s.isClosed() {
		return ErrServerClosed
	}
	return err
}

func (s *Service) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Service) markClosed() {
	s.mu.Lock()
	was := s.closed
	s.closed = true
	s.mu.Unlock()
	if !was {
		s.health.Shutdown() // NOT_SERVING for every name, from now on
		close(s.stop)
	}
}

// healthServer is grpc's health service, but its Watch streams end when
// the service stops: grpc's keep a watcher (Envoy's active health checks,
// a Kubernetes probe) open after Shutdown, and GracefulStop would wait
// for them until its deadline.
type healthServer struct {
	*health.Server
	stop <-chan struct{}
}

func (h healthServer) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return h.Server.Watch(req, watchStream{Health_WatchServer: stream, ctx: ctx})
}

// watchStream is a Watch stream with the context healthServer ends.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w watchStream) Context() context.Context { return w.ctx }

// Shutdown stops the service gracefully: health checks answer
// NOT_SERVING, the listeners close, and the calls under way finish. If
// ctx ends first, the connections are closed and ctx's error returned.
func (s *Service) Shutdown(ctx context.Context) error {
	s.markClosed()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
		return ctx.Err()
	}
}

// Close stops the service at once: the listeners and connections close,
// and the calls under way are cancelled.
func (s *Service) Close() error {
	s.markClosed()
	s.grpc.Stop()
	return nil
}

// ShouldRateLimit is RateLimitService/ShouldRateLimit: it answers req
// through the checker. A request the checker refuses (no domain, no
// descriptors: rules.ErrBadRequest) is answered InvalidArgument; a
// checker that cannot answer now (in cluster mode, the key's owner is
// unreachable), Unavailable.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	return s.check(ctx, req)
}

// check answers req through the checker, for gRPC and JSON alike.
func (s *Service) check(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	in, err := toRequest(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	out, err := s.checker.ShouldRateLimit(ctx, in)
	if err != nil {
		return nil, checkerStatus(err)
	}
	if len(out.Statuses) != len(in.Descriptors) {
		return nil, status.Errorf(codes.Internal, "grpcsvc: the checker answered %d statuses for %d descriptors", len(out.Statuses), len(in.Descriptors))
	}
	return fromResponse(out, s.cfg.ResponseHeaders), nil
}

// checkerStatus turns a checker's error into a gRPC status.
func checkerStatus(err error) error {
	switch {
	case errors.Is(err, rules.ErrBadRequest):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	default:
		return status.Error(codes.Unavailable, err.Error())
	}
}

// recoverUnary turns a panic under a call into an Internal error and a
// log line, so that a bug shows as one failed call rather than a crashed
// server.
func (s *Service) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			if s.cfg.Logf != nil {
				s.cfg.Logf("warning", "grpc: %s panicked: %v\n%s", info.FullMethod, r, debug.Stack())
			}
			resp, err = nil, status.Error(codes.Internal, fmt.Sprintf("grpcsvc: internal error in %s", info.FullMethod))
		}
	}()
	return handler(ctx, req)
}

// limitListener is a listener whose connections, together with those of
// every other limitListener sharing sem, are at most cap(sem): a
// connection accepted past the bound waits, before it is handed on, for
// one to close. It accepts before it waits, so that one listener waiting
// for a place does not hold it while another has a client: past the
// bound, each listener holds at most one connection that waits.
type limitListener struct {
	net.Listener
	sem chan struct{}

	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

func newLimitListener(ln net.Listener, sem chan struct{}) *limitListener {
	return &limitListener{Listener: ln, sem: sem, done: make(chan struct{})}
}

// Accept accepts a connection, then waits until a place is free for it.
func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.sem <- struct{}{}:
		return &limitConn{Conn: c, sem: l.sem}, nil
	case <-l.done:
		_ = c.Close()
		return nil, net.ErrClosed
	}
}

// Close closes the listener and wakes an Accept waiting for a place.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn gives its place back when it closes, once.
type limitConn struct {
	net.Conn
	sem  chan struct{}
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.sem })
	return err
}
