package service_test

import (
	"context"
	"net"
	"strconv"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/service"
)

// benchConfig returns the benchmarks' configuration, and requests of n
// descriptors (user; path; tenant and plan) over 1 000 users.
func benchConfig(tb testing.TB) (*service.Config, func(n int) []*rlsv3.RateLimitRequest) {
	cfg, err := service.Parse(map[string][]byte{"b.yaml": []byte(`
domain: b
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 1000000}
  - key: tenant
    descriptors:
      - key: plan
        rate_limit: {unit: hour, requests_per_unit: 1000000}
`)})
	require.NoError(tb, err)
	reqs := func(n int) []*rlsv3.RateLimitRequest {
		out := make([]*rlsv3.RateLimitRequest, 1000)
		for i := range out {
			u := strconv.Itoa(i)
			ds := []*ratelimitv3.RateLimitDescriptor{desc("user", u), desc("path", "/api/"+u), desc("tenant", u, "plan", "free")}
			out[i] = &rlsv3.RateLimitRequest{Domain: "b", Descriptors: ds[:n]}
		}
		return out
	}
	return cfg, reqs
}

// benchServer returns a Server on the embedded table with metrics, and
// benchConfig's requests.
func benchServer(tb testing.TB) (*service.Server, func(n int) []*rlsv3.RateLimitRequest) {
	cfg, reqs := benchConfig(tb)
	lim, err := actorlimit.Start()
	require.NoError(tb, err)
	tb.Cleanup(func() { lim.Close() })
	m, err := service.NewMetrics(nil, 0)
	require.NoError(tb, err)
	srv, err := service.New(cfg, service.Options{Limiter: lim, Metrics: m})
	require.NoError(tb, err)
	return srv, reqs
}

// BenchmarkServe is a request's cost on the server past gRPC's transport:
// the codec decoding the request's wire bytes, the decision on the embedded
// table, and the codec encoding the answer (its buffers freed as gRPC
// frees them once written); the request is allocated as gRPC allocates it.
// 1 and 3 descriptors, serial.
func BenchmarkServe(b *testing.B) {
	srv, reqs := benchServer(b)
	benchServe(b, srv, reqs)
}

// BenchmarkGRPC is a whole request over gRPC on loopback, client and
// server in this process (allocs/op counts both): 1 and 3 descriptors,
// serial.
func BenchmarkGRPC(b *testing.B) {
	srv, reqs := benchServer(b)
	codec := service.NewCodec(srv)
	gs := grpc.NewServer(grpc.ForceServerCodecV2(codec), grpc.ChainUnaryInterceptor(codec.Interceptor))
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	go func() { _ = gs.Serve(l) }()
	b.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close() })
	client := rlsv3.NewRateLimitServiceClient(conn)
	for _, n := range []int{1, 3} {
		rs := reqs(n)
		require.NotEmpty(b, rs)
		b.Run("descriptors="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				resp, err := client.ShouldRateLimit(context.Background(), rs[i%len(rs)])
				if err != nil {
					b.Fatal(err)
				}
				if len(resp.GetStatuses()) != n {
					b.Fatalf("%d statuses, want %d", len(resp.GetStatuses()), n)
				}
				i++
			}
		})
	}
}

// TestServeAllocates: a request of 1 and 3 descriptors on the embedded
// table, decoded, decided and encoded by the codec, takes at most the
// allocations it was measured at (BenchmarkServe: 6 and 8, the request's
// own included; 14 and 36 with the standard codec and a status allocated
// at a time).
func TestServeAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	srv, reqs := benchServer(t)
	codec := service.NewCodec(srv)
	for _, tc := range []struct {
		descriptors int
		max         float64
	}{{1, 6}, {3, 8}} {
		t.Run("descriptors="+strconv.Itoa(tc.descriptors), func(t *testing.T) {
			w, err := proto.Marshal(reqs(tc.descriptors)[0])
			require.NoError(t, err)
			wire := mem.BufferSlice{mem.SliceBuffer(w)}
			allocs := testing.AllocsPerRun(500, func() {
				req := new(rlsv3.RateLimitRequest)
				require.NoError(t, codec.Unmarshal(wire, req))
				resp, err := srv.ShouldRateLimit(context.Background(), req)
				require.NoError(t, err)
				out, err := codec.Marshal(resp)
				require.NoError(t, err)
				out.Free()
			})
			assert.LessOrEqual(t, allocs, tc.max)
		})
	}
}

// benchServe runs BenchmarkServe's loop on srv: the codec decoding each
// request of reqs(n) from its wire bytes, srv deciding, the codec encoding
// the answer; 1 and 3 descriptors, serial.
func benchServe(b *testing.B, srv *service.Server, reqs func(int) []*rlsv3.RateLimitRequest) {
	codec := service.NewCodec(srv)
	for _, n := range []int{1, 3} {
		var wires []mem.BufferSlice
		for _, r := range reqs(n) {
			w, err := proto.Marshal(r)
			require.NoError(b, err)
			wires = append(wires, mem.BufferSlice{mem.SliceBuffer(w)})
		}
		require.NotEmpty(b, wires)
		b.Run("descriptors="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				req := new(rlsv3.RateLimitRequest)
				if err := codec.Unmarshal(wires[i%len(wires)], req); err != nil {
					b.Fatal(err)
				}
				resp, err := srv.ShouldRateLimit(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				out, err := codec.Marshal(resp)
				if err != nil {
					b.Fatal(err)
				}
				out.Free()
				i++
			}
		})
	}
}
