package service_test

import (
	"context"
	"strconv"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/service"
)

// BenchmarkTracing is the cost of Options.Tracer on a decision (3
// descriptors, 10 000 users, the embedded table, no gRPC): off (no
// Tracer, the code path of a Server without tracing), and on with the
// OpenTelemetry SDK, its batching processor and an exporter that drops the
// spans, under a sampler that samples every request and under one that
// samples none.
func BenchmarkTracing(b *testing.B) {
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
	const users = 10_000
	reqs := make([]*rlsv3.RateLimitRequest, users)
	for i := range reqs {
		u := strconv.Itoa(i)
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "b", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			desc("user", u), desc("path", "/api/"+u), desc("tenant", u, "plan", "free")}}
	}
	require.NotEmpty(b, reqs)
	for _, tc := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: no Tracer
	}{
		{"off", nil},
		{"on/sampled=all", sdktrace.AlwaysSample()},
		{"on/sampled=none", sdktrace.NeverSample()},
	} {
		b.Run("tracing="+tc.name, func(b *testing.B) {
			lim, err := actorlimit.Start()
			require.NoError(b, err)
			defer lim.Close()
			m, err := service.NewMetrics(nil, 0)
			require.NoError(b, err)
			o := service.Options{Limiter: lim, Metrics: m}
			if tc.sampler != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				o.Tracer = tp.Tracer("bench")
			}
			srv, err := service.New(cfg, o)
			require.NoError(b, err)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, err := srv.ShouldRateLimit(context.Background(), reqs[i%users]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
