package service_test

import (
	"context"
	"strconv"
	"strings"
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

// BenchmarkHashing is the cost of hashing at the edge, serial, on the
// embedded table: 1 and 3 descriptors a request over 10 000 clients, with
// values kept as they are (plain), values of 2 000 bytes (long: counted
// under their HMAC) and values of secret keys (secret: kept as their HMAC
// under the operator's key).
func BenchmarkHashing(b *testing.B) {
	cfg, err := service.Parse(map[string][]byte{"b.yaml": []byte(`
domain: b
descriptors:
  - key: k1
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: k2
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: k3
    rate_limit: {unit: second, requests_per_unit: 1000000}
`)})
	require.NoError(b, err)
	const clients = 10_000
	for _, kind := range []string{"plain", "long", "secret"} {
		for _, n := range []int{1, 3} {
			b.Run("values="+kind+"/descriptors="+strconv.Itoa(n), func(b *testing.B) {
				lim, err := actorlimit.Start()
				require.NoError(b, err)
				defer lim.Close()
				m, err := service.NewMetrics(nil, 0)
				require.NoError(b, err)
				o := service.Options{Limiter: lim, Metrics: m, Secrets: service.Secrets{Key: []byte("0123456789abcdef"), Keys: []string{}}}
				if kind == "secret" {
					o.Secrets.Keys = []string{"k1", "k2", "k3"}
				}
				srv, err := service.New(cfg, o)
				require.NoError(b, err)
				rs := make([]*rlsv3.RateLimitRequest, clients)
				for i := range rs {
					v := "client-" + strconv.Itoa(i)
					if kind == "long" {
						v += strings.Repeat("x", 2000-len(v))
					}
					ds := []*ratelimitv3.RateLimitDescriptor{desc("k1", v), desc("k2", v), desc("k3", v)}
					rs[i] = &rlsv3.RateLimitRequest{Domain: "b", Descriptors: ds[:n]}
				}
				require.NotEmpty(b, rs)
				b.ReportAllocs()
				b.ResetTimer()
				i := 0
				for b.Loop() {
					if _, err := srv.ShouldRateLimit(context.Background(), rs[i%clients]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkID is the cost of a descriptor's counter id alone (matching
// included, no limiter): a plain value, a value of 2 000 bytes, a secret
// one.
func BenchmarkID(b *testing.B) {
	cfg, err := service.Parse(map[string][]byte{"b.yaml": []byte("domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10}\n")})
	require.NoError(b, err)
	lim, err := actorlimit.Start()
	require.NoError(b, err)
	defer lim.Close()
	for _, kind := range []string{"plain", "long", "secret"} {
		b.Run("values="+kind, func(b *testing.B) {
			o := service.Options{Limiter: lim, Secrets: service.Secrets{Key: []byte("0123456789abcdef"), Keys: []string{}}}
			v := "client-12345"
			switch kind {
			case "secret":
				o.Secrets.Keys = []string{"k"}
			case "long":
				v += strings.Repeat("x", 2000-len(v))
			}
			srv, err := service.New(cfg, o)
			require.NoError(b, err)
			d := desc("k", v)
			b.ReportAllocs()
			for b.Loop() {
				if id, _ := srv.IDOf("b", d); id == "" {
					b.Fatal("no id")
				}
			}
		})
	}
}
