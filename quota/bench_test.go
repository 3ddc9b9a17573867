package quota_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/quota"
)

// BenchmarkReport measures one usage report of one bucket handled by the
// server (matching, the division's Assign, the actions posted), without
// gRPC: envoys streams report on buckets buckets, every stream on every
// bucket, each report from the next stream in turn with a demand that
// moves, and the clock a millisecond on per report.
func BenchmarkReport(b *testing.B) {
	for _, tc := range []struct{ envoys, buckets int }{{10, 1}, {10, 100}, {100, 1}, {1000, 1}} {
		b.Run(fmt.Sprintf("envoys=%d/buckets=%d", tc.envoys, tc.buckets), func(b *testing.B) {
			clock := testkit.NewClock(t0)
			cfg, err := quota.Parse(map[string][]byte{"b.yaml": []byte(`domain: d
rate_limit_quota:
  buckets:
    - match: {name: "*"}
      rate_limit: {unit: second, requests_per_unit: 100000}
`)})
			require.NoError(b, err)
			srv := quota.New(cfg, quota.Options{Clock: clock.Now, ReportsPerSecond: 1e12, ReportBurst: 1e12, MaxBucketsPerStream: tc.buckets})
			streams := make([]*quota.TestStream, tc.envoys)
			msgs := make([][]*rlqsv3.RateLimitQuotaUsageReports, tc.envoys)
			for i := range streams {
				streams[i] = srv.NewTestStream()
				for k := range tc.buckets {
					for _, allowed := range []uint64{uint64(50 + i%7), uint64(60 + i%5)} {
						msgs[i] = append(msgs[i], &rlqsv3.RateLimitQuotaUsageReports{Domain: "d", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
							BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"name": "b" + strconv.Itoa(k)}}, TimeElapsed: durationpb.New(time.Second),
							NumRequestsAllowed: allowed}}})
					}
					require.NoError(b, streams[i].Report(msgs[i][len(msgs[i])-1]))
				}
			}
			for _, s := range streams {
				s.Drain()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				i := n % tc.envoys
				m := msgs[i][(n/tc.envoys)%len(msgs[i])]
				clock.Advance(time.Millisecond)
				if err := streams[i].Report(m); err != nil {
					b.Fatal(err)
				}
				if n%tc.envoys == tc.envoys-1 {
					b.StopTimer()
					for _, s := range streams {
						s.Drain()
					}
					b.StartTimer()
				}
			}
		})
	}
}
