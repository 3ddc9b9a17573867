package service_test

import (
	"context"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/service"
)

// TestDecodeRequestAsCodec: DecodeRequest, ShouldRateLimit and
// AppendResponse answer every input with the bytes and the status of the
// grpc-go path (Unmarshal, Interceptor, ShouldRateLimit, Marshal), and
// count it the same in the metrics.
func TestDecodeRequestAsCodec(t *testing.T) {
	newServer := func() (*service.Codec, *service.Server, *prometheus.Registry) {
		lim, err := actorlimit.Start()
		require.NoError(t, err)
		t.Cleanup(func() { lim.Close() })
		reg := prometheus.NewRegistry()
		m, err := service.NewMetrics(reg, 0)
		require.NoError(t, err)
		srv, err := service.New(nil, service.Options{Limiter: lim, Metrics: m, Bounds: service.Bounds{Descriptors: 2}})
		require.NoError(t, err)
		return service.NewCodec(srv), srv, reg
	}
	viaGRPC, gsrv, greg := newServer()
	direct, dsrv, dreg := newServer()
	valid, err := proto.Marshal(request("d", desc("a", "1"), desc("b", "2")))
	require.NoError(t, err)
	over, err := proto.Marshal(request("d", desc("a", "1"), desc("a", "2"), desc("a", "3")))
	require.NoError(t, err)
	inputs := map[string][]byte{
		"valid":          valid,
		"over the bound": over,
		"garbage":        {0x12, 0x09, 0x0a},
		"not UTF-8":      {0x0a, 0x01, 0xff, 0x12, 0x00},
		"unknown field":  protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), valid...), 77, protowire.VarintType), 1),
		"empty":          nil,
		"no domain":      {0x12, 0x00},
	}
	for name, wire := range inputs {
		// grpc-go's path.
		req := new(rlsv3.RateLimitRequest)
		require.NoError(t, viaGRPC.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, req))
		resp, gerr := viaGRPC.Interceptor(context.Background(), req, &grpc.UnaryServerInfo{}, func(ctx context.Context, r any) (any, error) {
			return gsrv.ShouldRateLimit(ctx, r.(*rlsv3.RateLimitRequest))
		})
		var gbytes []byte
		if gerr == nil {
			bs, err := viaGRPC.Marshal(resp)
			require.NoError(t, err)
			gbytes = bs.Materialize()
			bs.Free()
		}
		// The direct path.
		var dbytes []byte
		dreq, derr := direct.DecodeRequest(wire)
		if derr == nil {
			var dresp *rlsv3.RateLimitResponse
			if dresp, derr = dsrv.ShouldRateLimit(context.Background(), dreq); derr == nil {
				dbytes, derr = direct.AppendResponse(nil, dresp)
			}
		}
		assert.Equal(t, status.Convert(gerr).Proto().String(), status.Convert(derr).Proto().String(), name)
		assert.Equal(t, gbytes, dbytes, name)
	}
	gm, err := greg.Gather()
	require.NoError(t, err)
	dm, err := dreg.Gather()
	require.NoError(t, err)
	assert.Equal(t, counterValues(gm), counterValues(dm), "the metrics")
}

// counterValues are the counters of a registry's metrics, by name and
// labels.
func counterValues(mfs []*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				key := mf.GetName()
				for _, lp := range m.GetLabel() {
					key += "," + lp.GetName() + "=" + lp.GetValue()
				}
				out[key] = c.GetValue()
			}
		}
	}
	return out
}
