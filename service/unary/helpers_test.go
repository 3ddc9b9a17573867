package unary_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit/service/unary"
)

const (
	rlsMethod   = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
	checkMethod = "/grpc.health.v1.Health/Check"
)

// echo answers a RateLimitRequest with its domain and first descriptor's
// first value as response headers, so that a caller can tell its answer
// from another's. A domain of "sleep" waits for the call's end; "fail"
// answers the status its value names.
func echo(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	v := ""
	if d := req.GetDescriptors(); len(d) > 0 && len(d[0].GetEntries()) > 0 {
		v = d[0].GetEntries()[0].GetValue()
	}
	switch req.GetDomain() {
	case "sleep":
		<-ctx.Done()
		return nil, ctx.Err()
	case "fail":
		return nil, status.Error(codes.FailedPrecondition, v)
	case "failbad": // a message that is not UTF-8
		return nil, status.Error(codes.FailedPrecondition, v+"\xff\xfe")
	case "plainerr": // not a status
		return nil, fmt.Errorf("plain error %s", v)
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
		ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: req.GetDomain(), Value: v}}}, nil
}

// echoServer is echo as a grpc-go service.
type echoServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (echoServer) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return echo(ctx, req)
}

// echoHandler is echo as a Handler.
func echoHandler(ctx context.Context, _ string, wire, dst []byte) ([]byte, error) {
	var req rlsv3.RateLimitRequest
	if err := proto.Unmarshal(wire, &req); err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
	}
	resp, err := echo(ctx, &req)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, resp)
}

// checkHandler answers the health service's Check from hs.
func checkHandler(hs *health.Server) unary.Handler {
	return func(ctx context.Context, _ string, wire, dst []byte) ([]byte, error) {
		var req healthpb.HealthCheckRequest
		if err := proto.Unmarshal(wire, &req); err != nil {
			return nil, status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
		}
		resp, err := hs.Check(ctx, &req)
		if err != nil {
			return nil, err
		}
		return proto.MarshalOptions{}.MarshalAppend(dst, resp)
	}
}

// served is a Server on a loopback port, with a grpc-go fallback that
// serves the same services.
type served struct {
	addr   string
	grpc   string // the fallback's own listener: grpc-go alone
	srv    *unary.Server
	gs     *grpc.Server
	health *health.Server
	served chan error
}

// serve starts a Server with cfg's settings (Handlers and Fallback set
// here), stopped at the test's end; register adds services to the
// fallback.
func serve(t testing.TB, cfg unary.Config, register ...func(*grpc.Server)) *served {
	t.Helper()
	return serveWith(t, cfg, nil, register...)
}

// serveWith is serve, the fallback made with opts.
func serveWith(t testing.TB, cfg unary.Config, opts []grpc.ServerOption, register ...func(*grpc.Server)) *served {
	t.Helper()
	hs := health.NewServer()
	if cfg.MaxRecvMsgSize == 0 {
		cfg.MaxRecvMsgSize = 4 << 20
	}
	gs := grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize)}, opts...)...)
	rlsv3.RegisterRateLimitServiceServer(gs, echoServer{})
	healthpb.RegisterHealthServer(gs, hs)
	for _, r := range register {
		r(gs)
	}
	cfg.Handlers = map[string]unary.Handler{rlsMethod: echoHandler, checkMethod: checkHandler(hs)}
	cfg.Fallback = gs
	srv, err := unary.New(cfg)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &served{addr: l.Addr().String(), grpc: gl.Addr().String(), srv: srv, gs: gs, health: hs, served: make(chan error, 1)}
	go func() { s.served <- srv.Serve(l) }()
	go func() { _ = gs.Serve(gl) }()
	t.Cleanup(func() {
		_ = srv.Close()
		gs.Stop()
	})
	return s
}

// stop closes ccs, then the Server and its fallback, and waits until the
// goroutines are back to at most base: no handler, proxied call or
// connection of theirs is left.
func (s *served) stop(t testing.TB, base int, ccs ...*grpc.ClientConn) {
	t.Helper()
	for _, cc := range ccs {
		require.NoError(t, cc.Close())
	}
	require.NoError(t, s.srv.Close())
	s.gs.Stop()
	settle(t, base)
}

// dial returns a grpc-go client of addr, closed at the test's end.
func dial(t testing.TB, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// request is a RateLimitRequest of domain with one descriptor of one
// entry, its value v.
func request(domain, v string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: v}}}}}
}

// settle waits until the goroutines are back to at most base (a few of the
// runtime's may come and go), failing the test after 5 s, and shows them.
func settle(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), base, filterStacks(string(buf[:n])))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// filterStacks keeps the goroutines of this package.
func filterStacks(s string) string {
	var out []string
	for _, g := range strings.Split(s, "\n\n") {
		if strings.Contains(g, "unary") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

var _ = tls.VersionTLS13
