package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// span is what a test checks of an exported span.
type span struct {
	name, trace, id, parent string
	kind                    tracepb.Span_SpanKind
	service, namespace      string
}

// receiver is an OTLP trace receiver in the test: it keeps the spans of
// every export, and counts the exports.
type receiver struct {
	mu      sync.Mutex
	exports int
	spans   []span
	coltracepb.UnimplementedTraceServiceServer
}

func (r *receiver) keep(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exports++
	for _, rs := range req.GetResourceSpans() {
		attrs := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, span{name: s.GetName(), trace: hex.EncodeToString(s.GetTraceId()),
					id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId()), kind: s.GetKind(),
					service: attrs["service.name"], namespace: attrs["service.namespace"]})
			}
		}
	}
}

// Export is OTLP/gRPC's.
func (r *receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.keep(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is OTLP/HTTP's POST /v1/traces, in protobuf.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var msg coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &msg)
	}
	if req.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, fmt.Sprintf("not an OTLP export to /v1/traces: %s %v", req.URL.Path, err), http.StatusBadRequest)
		return
	}
	r.keep(&msg)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *receiver) got() (int, []span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exports, append([]span(nil), r.spans...)
}

// httpReceiver starts an OTLP/HTTP receiver and returns its endpoint.
func httpReceiver(t *testing.T) (*receiver, string) {
	r := &receiver{}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// grpcReceiver starts an OTLP/gRPC receiver and returns its endpoint.
func grpcReceiver(t *testing.T) (*receiver, string) {
	r := &receiver{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, r)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	return r, "http://" + l.Addr().String()
}

// traced is one request a test sends with a caller's trace context.
type traced struct {
	how          string // traceparent, b3 multi, b3 single over gRPC; json with traceparent
	trace, span  string // the caller's trace and span ids (hex)
	user         string // the descriptor's value, one per request
	wantRootKind tracepb.Span_SpanKind
}

// tracedRequests are one request of each kind, with their own ids.
func tracedRequests(tag byte) []traced {
	id := func(n int, i byte) string {
		return strings.Repeat(fmt.Sprintf("%02x", tag), n/2-1) + fmt.Sprintf("%02x", i)
	}
	var out []traced
	for i, how := range []string{"traceparent", "b3 multi", "b3 single", "json"} {
		out = append(out, traced{how: how, trace: id(32, byte(i+1)), span: id(16, byte(i+1)), user: fmt.Sprintf("u%d-%d", tag, i),
			wantRootKind: tracepb.Span_SPAN_KIND_SERVER})
	}
	return out
}

// send sends r to d with its trace context.
func (r traced) send(t *testing.T, d *daemon) {
	t.Helper()
	req := request("web", desc("user", r.user))
	var md []string
	switch r.how {
	case "traceparent":
		md = []string{"traceparent", "00-" + r.trace + "-" + r.span + "-01"}
	case "b3 multi":
		md = []string{"x-b3-traceid", r.trace, "x-b3-spanid", r.span, "x-b3-sampled", "1"}
	case "b3 single":
		md = []string{"b3", r.trace + "-" + r.span + "-1"}
	case "json":
		hr, err := http.NewRequest(http.MethodPost, "http://"+d.http+"/json", strings.NewReader(`{"domain":"web","descriptors":[{"entries":[{"key":"user","value":"`+r.user+`"}]}]}`))
		require.NoError(t, err)
		hr.Header.Set("traceparent", "00-"+r.trace+"-"+r.span+"-01")
		resp, err := http.DefaultClient.Do(hr)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return
	}
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 10*time.Second)
	defer cancel()
	_, err := d.client().ShouldRateLimit(ctx, req)
	require.NoError(t, err)
}

// childOf returns the spans named name whose parent is parent.
func childOf(spans []span, parent span, name string) []span {
	var out []span
	for _, s := range spans {
		if s.parent == parent.id && s.trace == parent.trace && s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestTracing drives actorlimitd with -tracing, once exporting by
// OTLP/HTTP on Redis and once by OTLP/gRPC on the embedded table, to OTLP
// receivers in the test: each request, sent with a W3C traceparent or B3
// headers (multi or single) in its gRPC metadata, or a traceparent header
// on POST /json, has a server span in the caller's trace whose parent is
// the caller's span, a ShouldRateLimit span inside it, and inside that the
// limiter's call (on Redis, its round trip); the resource names the
// service as the flags say.
func TestTracing(t *testing.T) {
	rs := redistest.Start(t)
	for i, tc := range []struct {
		protocol string
		backend  []string
	}{
		{"http", []string{"-redis", rs.Addr, "-secret-key-file", secretKeyFile(t)}},
		{"grpc", nil},
	} {
		t.Run("protocol="+tc.protocol, func(t *testing.T) {
			recv, endpoint := httpReceiver(t)
			if tc.protocol == "grpc" {
				recv, endpoint = grpcReceiver(t)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			args := append([]string{"-tracing", "-tracing-protocol", tc.protocol, "-tracing-service-namespace", "edge"}, tc.backend...)
			d := startWithConfig(t, serveConfig, args...)
			reqs := tracedRequests(byte(0xa0 + i))
			for _, r := range reqs {
				r.send(t, d)
			}
			d.signal(syscall.SIGTERM) // the spans still buffered are exported before exit
			require.Equal(t, 0, d.wait(30*time.Second))

			_, spans := recv.got()
			for _, r := range reqs {
				caller := span{trace: r.trace, id: r.span}
				roots := childOf(spans, caller, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
				if r.how == "json" {
					roots = childOf(spans, caller, "POST /json")
				}
				if !assert.Len(t, roots, 1, "%s: the request's span, in the caller's trace, child of the caller's span; got %v", r.how, spans) {
					continue
				}
				assert.Equal(t, r.wantRootKind, roots[0].kind, r.how)
				assert.Equal(t, "RateLimit", roots[0].service, r.how)
				assert.Equal(t, "edge", roots[0].namespace, r.how)
				decide := childOf(spans, roots[0], "ShouldRateLimit")
				if assert.Len(t, decide, 1, "%s: the decision's span", r.how) {
					assert.Len(t, childOf(spans, decide[0], "actorlimit.HitMany"), 1, "%s: the limiter's call", r.how)
				}
			}
		})
	}
}

// TestTracingOff: without -tracing, with OTEL_EXPORTER_OTLP_ENDPOINT set,
// actorlimitd exports nothing, by either protocol, through its requests
// and its exit.
func TestTracingOff(t *testing.T) {
	for _, protocol := range []string{"http", "grpc"} {
		t.Run("protocol="+protocol, func(t *testing.T) {
			recv, endpoint := httpReceiver(t)
			if protocol == "grpc" {
				recv, endpoint = grpcReceiver(t)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			d := startWithConfig(t, serveConfig, "-tracing-protocol", protocol)
			for _, r := range tracedRequests(0xb0) {
				r.send(t, d)
			}
			d.signal(syscall.SIGTERM)
			require.Equal(t, 0, d.wait(30*time.Second))
			exports, spans := recv.got()
			assert.Zero(t, exports, "exports")
			assert.Empty(t, spans)
		})
	}
}
