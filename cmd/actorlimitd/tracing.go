package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// tracingFlags are the -tracing* flags, envoy ratelimit's TRACING_*
// settings with its defaults. Where a flag is not given, the standard
// OTEL_* variable of the same meaning applies (see check); the exporter's
// endpoint, headers, timeout and TLS come from OTEL_EXPORTER_OTLP_*, which
// the OTLP exporters read themselves.
type tracingFlags struct {
	on                 bool
	service, namespace string
	instance, protocol string
	samplingRate       float64
	samplerFromEnv     bool            // OTEL_TRACES_SAMPLER decides: -tracing-sampling-rate not given
	given              map[string]bool // the -tracing* flags given, set by check
	fs                 *flag.FlagSet   // where they were registered
}

// register adds the flags to fs.
func (t *tracingFlags) register(fs *flag.FlagSet) {
	t.fs = fs
	fs.BoolVar(&t.on, "tracing", false, "export OpenTelemetry spans of each request by OTLP, to OTEL_EXPORTER_OTLP_ENDPOINT (envoy ratelimit's TRACING_ENABLED; not given: on when OTEL_TRACES_EXPORTER is otlp)")
	fs.StringVar(&t.service, "tracing-service-name", "RateLimit", "with -tracing: the service.name of the spans (TRACING_SERVICE_NAME; not given: OTEL_SERVICE_NAME if set)")
	fs.StringVar(&t.namespace, "tracing-service-namespace", "", "with -tracing: their service.namespace (TRACING_SERVICE_NAMESPACE)")
	fs.StringVar(&t.instance, "tracing-instance-id", "", "with -tracing: their service.instance.id (TRACING_SERVICE_INSTANCE_ID; default: a random UUID)")
	fs.StringVar(&t.protocol, "tracing-protocol", "http", "with -tracing: OTLP over http or grpc (TRACING_EXPORTER_PROTOCOL; not given: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL if set)")
	fs.Float64Var(&t.samplingRate, "tracing-sampling-rate", 1, "with -tracing: the share of traces sampled where the caller's trace context does not decide, 0 to 1 (TRACING_SAMPLING_RATE; not given: OTEL_TRACES_SAMPLER if set)")
}

// check validates the flags once fs is parsed, and lets the standard
// OTEL_* variables (read with getenv) decide what no flag gave.
func (t *tracingFlags) check(getenv func(string) string) error {
	t.given = map[string]bool{}
	t.fs.Visit(func(f *flag.Flag) { t.given[f.Name] = true })
	if !t.given["tracing"] {
		switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
		case "", "none":
		case "otlp":
			t.on = !strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true")
		default:
			return fmt.Errorf("OTEL_TRACES_EXPORTER %q: actorlimitd exports traces by OTLP only: want otlp or none", exp)
		}
	}
	if !t.given["tracing-protocol"] {
		for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
			switch p := strings.TrimSpace(getenv(v)); p {
			case "":
				continue
			case "grpc":
				t.protocol = "grpc"
			case "http/protobuf":
				t.protocol = "http"
			default:
				return fmt.Errorf("%s %q: want grpc or http/protobuf", v, p)
			}
			break
		}
	}
	if t.protocol != "http" && t.protocol != "grpc" {
		return fmt.Errorf("-tracing-protocol %q: want http or grpc", t.protocol)
	}
	if math.IsNaN(t.samplingRate) {
		return errors.New("-tracing-sampling-rate is not a number: want 0 to 1")
	}
	t.samplerFromEnv = !t.given["tracing-sampling-rate"] && strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")) != ""
	return nil
}

// resource is what the spans come from: the flags given win over
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, which win over the
// flags' defaults.
func (t *tracingFlags) resource(ctx context.Context) (*resource.Resource, error) {
	var defaults, given []attribute.KeyValue
	add := func(name string, kv attribute.KeyValue) {
		if t.given[name] {
			given = append(given, kv)
		} else {
			defaults = append(defaults, kv)
		}
	}
	add("tracing-service-name", semconv.ServiceName(t.service))
	add("tracing-service-namespace", semconv.ServiceNamespace(t.namespace))
	instance := t.instance
	if instance == "" {
		instance = uuid.NewString() // envoy ratelimit's default
	}
	add("tracing-instance-id", semconv.ServiceInstanceID(instance))
	return resource.New(ctx, resource.WithSchemaURL(semconv.SchemaURL), resource.WithTelemetrySDK(),
		resource.WithAttributes(defaults...), resource.WithFromEnv(), resource.WithAttributes(given...))
}

// tracing is what serve needs to trace: nil when tracing is off, and then
// each method gives what costs nothing.
type tracing struct {
	provider   *sdktrace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

// tracerName names the tracer of actorlimitd's spans.
const tracerName = "github.com/actorlimit/actorlimit/cmd/actorlimitd"

// startTracing sets up the OTLP exporter the flags ask for, or returns nil
// when tracing is off. No connection is made here: the exporter connects
// when it first exports.
func startTracing(t tracingFlags, log *slog.Logger) (*tracing, error) {
	if !t.on {
		return nil, nil
	}
	ctx := context.Background()
	res, err := t.resource(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME: %w", err)
	}
	var exp sdktrace.SpanExporter
	if t.protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter (%s): %w", t.protocol, err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if !t.samplerFromEnv {
		// envoy ratelimit's: the caller's sampling decision when it sent
		// one, else this share of traces (1: all, 0: none).
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(t.samplingRate))))
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	tp := sdktrace.NewTracerProvider(opts...)
	log.Info("tracing", "protocol", t.protocol, "sampling_rate", t.samplingRate, "sampler_from_env", t.samplerFromEnv)
	return &tracing{
		provider: tp,
		tracer:   tp.Tracer(tracerName),
		// B3 first, so that W3C's traceparent, when a caller sends both, wins.
		propagator: propagation.NewCompositeTextMapPropagator(
			b3.New(b3.WithInjectEncoding(b3.B3MultipleHeader|b3.B3SingleHeader)),
			propagation.TraceContext{}, propagation.Baggage{}),
	}, nil
}

// serviceTracer is the tracer of service.Options.Tracer: nil when off.
func (tr *tracing) serviceTracer() trace.Tracer {
	if tr == nil {
		return nil
	}
	return tr.tracer
}

// grpcOptions trace the RateLimitService's calls (not the health
// service's), continuing the trace context of their metadata.
func (tr *tracing) grpcOptions() []grpc.ServerOption {
	if tr == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tr.provider), otelgrpc.WithPropagators(tr.propagator),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
			return strings.HasPrefix(info.FullMethodName, "/envoy.service.ratelimit.")
		})))}
}

// handler traces h's requests (POST /json), continuing the trace context
// of their headers.
func (tr *tracing) handler(route string, h http.Handler) http.Handler {
	if tr == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tr.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tr.tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.HTTPRoute(route)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(semconv.HTTPResponseStatusCode(sw.code))
		if sw.code >= 500 {
			span.SetStatus(otelcodes.Error, http.StatusText(sw.code))
		}
	})
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// shutdown exports the spans still buffered, waiting at most 5 s.
func (tr *tracing) shutdown(log *slog.Logger) {
	if tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.provider.Shutdown(ctx); err != nil {
		log.Warn("tracing: the last spans were not all exported", "err", err)
	}
}
