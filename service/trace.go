package service

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/status"

	"github.com/actorlimit/actorlimit"
)

// The names of the spans a Server starts with Options.Tracer: one for each
// request, and, inside it, one for each call of the limiter (on Redis, the
// round trip that decides it; on a cluster, the owner's).
const (
	SpanShouldRateLimit = "ShouldRateLimit"
	SpanHitMany         = "actorlimit.HitMany"
	SpanPeek            = "actorlimit.Peek"
)

// The attributes of those spans. Descriptor values are never recorded:
// some are secrets.
const (
	AttrDomain      = attribute.Key("ratelimit.domain")       // the request's domain, when within the key length bound
	AttrDescriptors = attribute.Key("ratelimit.descriptors")  // the request's number of descriptors
	AttrOverallCode = attribute.Key("ratelimit.overall_code") // OK or OVER_LIMIT
	AttrChecks      = attribute.Key("actorlimit.checks")      // the checks of one HitMany
)

// traced is ShouldRateLimit inside a span of s.o.Tracer, a child of the
// span ctx holds (the one the gRPC or HTTP server continued from the
// caller's trace context).
func (s *Server) traced(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, span := s.o.Tracer.Start(ctx, SpanShouldRateLimit)
	defer span.End()
	resp, err := s.shouldRateLimit(ctx, req)
	if !span.IsRecording() {
		return resp, err
	}
	span.SetAttributes(AttrDescriptors.Int(len(req.GetDescriptors())))
	if d := req.GetDomain(); len(d) <= s.bounds.KeyLength {
		span.SetAttributes(AttrDomain.String(d))
	}
	if err != nil {
		span.SetStatus(otelcodes.Error, status.Code(err).String())
		span.RecordError(err)
		return resp, err
	}
	span.SetAttributes(AttrOverallCode.String(resp.GetOverallCode().String()))
	return resp, err
}

// hitMany is Limiter.HitMany, inside a span when the Server traces.
func (s *Server) hitMany(ctx context.Context, hits []actorlimit.HitRequest, results []actorlimit.Result) error {
	if s.o.Tracer == nil {
		return s.o.Limiter.HitMany(ctx, hits, results)
	}
	ctx, span := s.o.Tracer.Start(ctx, SpanHitMany)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(AttrChecks.Int(len(hits)))
	}
	err := s.o.Limiter.HitMany(ctx, hits, results)
	failed(span, err)
	return err
}

// peek is Limiter.Peek, inside a span when the Server traces.
func (s *Server) peek(ctx context.Context, id string, p actorlimit.Policy) (actorlimit.Result, error) {
	if s.o.Tracer == nil {
		return s.o.Limiter.Peek(ctx, id, p)
	}
	ctx, span := s.o.Tracer.Start(ctx, SpanPeek)
	defer span.End()
	res, err := s.o.Limiter.Peek(ctx, id, p)
	failed(span, err)
	return res, err
}

// failed marks span as failed with err, if err is not nil.
func failed(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(otelcodes.Error, err.Error())
		span.RecordError(err)
	}
}
