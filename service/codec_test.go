package service_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/service"
)

// rawBytes is a client codec that sends a message's bytes as they are.
type rawBytes struct{}

func (rawBytes) Name() string { return "proto" }
func (rawBytes) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawBytes) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// TestCodec: on a real gRPC server, a request past a bound or that is not
// a RateLimitRequest is answered InvalidArgument with the scan's message
// (not Internal, not the message of an empty request), counted as invalid;
// a request within the bounds and the health service are served.
func TestCodec(t *testing.T) {
	lim, err := actorlimit.Start()
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	reg := prometheus.NewRegistry()
	m, err := service.NewMetrics(reg, 0)
	require.NoError(t, err)
	srv, err := service.New(nil, service.Options{Limiter: lim, Metrics: m, Bounds: service.Bounds{Descriptors: 2}})
	require.NoError(t, err)
	codec := service.NewCodec(srv)
	gs := grpc.NewServer(grpc.ForceServerCodecV2(codec), grpc.ChainUnaryInterceptor(codec.Interceptor))
	rlsv3.RegisterRateLimitServiceServer(gs, srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	c := rlsv3.NewRateLimitServiceClient(conn)

	_, err = c.ShouldRateLimit(t.Context(), request("d", desc("a", "1"), desc("a", "2")))
	require.NoError(t, err, "within the bounds")
	_, err = c.ShouldRateLimit(t.Context(), request("d", desc("a", "1"), desc("a", "2"), desc("a", "3")))
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "3 descriptors, over the bound of 2 descriptors per request")
	garbage := []byte{0x12, 0x09, 0x0a}
	var out []byte
	err = conn.Invoke(t.Context(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &garbage, &out, grpc.ForceCodecV2(rawBytes{}))
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "not a RateLimitRequest")
	notUTF8 := []byte{0x0a, 0x01, 0xff, 0x12, 0x00}
	err = conn.Invoke(t.Context(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", &notUTF8, &out, grpc.ForceCodecV2(rawBytes{}))
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Contains(t, err.Error(), "not a RateLimitRequest", "the decoder's refusal")

	hc, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "the health service, through the standard codec")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, hc.Status)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	invalid := -1.0
	for _, mf := range mfs {
		if mf.GetName() != "actorlimitd_requests_total" {
			continue
		}
		for _, mm := range mf.GetMetric() {
			for _, lp := range mm.GetLabel() {
				if lp.GetName() == "code" && lp.GetValue() == "invalid" {
					invalid = mm.GetCounter().GetValue()
				}
			}
		}
	}
	assert.Equal(t, 3.0, invalid, "refused requests counted as invalid")
}

// TestJSONHandlerScan: a POST /json body of a million empty descriptors
// is refused by the scan, naming the bound, without being decoded: the
// handler allocates a few times the body, not the hundreds of MB of a
// million descriptors.
func TestJSONHandlerScan(t *testing.T) {
	lim, err := actorlimit.Start()
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	srv, err := service.New(nil, service.Options{Limiter: lim, Bounds: service.Bounds{Descriptors: 2}})
	require.NoError(t, err)
	h := service.JSONHandlerBounded(srv, 4<<20)
	body := `{"domain":"d","descriptors":[{}` + strings.Repeat(`,{}`, 1<<20) + `]}`
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(body)))
	runtime.ReadMemStats(&after)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "more than 2 descriptors, over the bound of 2 descriptors per request")
	allocated := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, allocated, uint64(8*len(body)), "bytes allocated for a %d-byte body", len(body))

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(`{"domain":"d","descriptors":[{},{}]}`)))
	assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}
