package service_test

import (
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit/service"
)

// BenchmarkScan is the cost of the bounds' check before decoding, a
// request of 1 and 3 descriptors: decoding alone (what a request cost
// before the scan), and the scan followed by the decoding, as the gRPC
// codec and POST /json do them, and the scan alone.
func BenchmarkScan(b *testing.B) {
	reqs := map[string]*rlsv3.RateLimitRequest{
		"1desc": request("edge", desc("remote_address", "203.0.113.7")),
		"3desc": request("edge", desc("remote_address", "203.0.113.7"), desc("path", "/api/v1/users/12345/orders"),
			desc("tenant", "acme", "api_key", "k_3f9a0c51e2d84b7f")),
	}
	var bounds service.Bounds
	for _, name := range []string{"1desc", "3desc"} {
		wire, err := proto.Marshal(reqs[name])
		require.NoError(b, err)
		js, err := protojson.Marshal(reqs[name])
		require.NoError(b, err)
		b.Run(name+"/proto/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r rlsv3.RateLimitRequest
				if err := proto.Unmarshal(wire, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/proto/scan", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bounds.ScanRequest(wire); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/proto/scan+decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bounds.ScanRequest(wire); err != nil {
					b.Fatal(err)
				}
				var r rlsv3.RateLimitRequest
				if err := proto.Unmarshal(wire, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/json/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r rlsv3.RateLimitRequest
				if err := protojson.Unmarshal(js, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/json/scan", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bounds.ScanJSON(js); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/json/scan+decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bounds.ScanJSON(js); err != nil {
					b.Fatal(err)
				}
				var r rlsv3.RateLimitRequest
				if err := protojson.Unmarshal(js, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
