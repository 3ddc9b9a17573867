package service_test

import (
	"context"
	"strconv"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/service"
)

// BenchmarkShouldRateLimit is the cost of a decision in the process, on
// the embedded table, without gRPC: 1 and 3 descriptors a request, over
// 10 000 users, serial and from parallel callers.
func BenchmarkShouldRateLimit(b *testing.B) {
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
	require.NoError(b, err)
	lim, err := actorlimit.Start()
	require.NoError(b, err)
	defer lim.Close()
	m, err := service.NewMetrics(nil, 0)
	require.NoError(b, err)
	srv, err := service.New(cfg, service.Options{Limiter: lim, Metrics: m})
	require.NoError(b, err)
	const users = 10_000
	reqs := func(n int) []*rlsv3.RateLimitRequest {
		out := make([]*rlsv3.RateLimitRequest, users)
		for i := range out {
			u := strconv.Itoa(i)
			ds := []*ratelimitv3.RateLimitDescriptor{desc("user", u), desc("path", "/api/"+u), desc("tenant", u, "plan", "free")}
			out[i] = &rlsv3.RateLimitRequest{Domain: "b", Descriptors: ds[:n]}
		}
		return out
	}
	for _, n := range []int{1, 3} {
		rs := reqs(n)
		require.NotEmpty(b, rs)
		b.Run("descriptors="+strconv.Itoa(n)+"/callers=1", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := srv.ShouldRateLimit(context.Background(), rs[i%users]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run("descriptors="+strconv.Itoa(n)+"/callers=parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := srv.ShouldRateLimit(context.Background(), rs[i%users]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}
