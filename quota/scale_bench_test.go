package quota_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/quota"
)

// BenchmarkReportFleet measures one usage report handled by the server,
// without gRPC, in the scale run's fleet (bench/cmd/rlqsscale): envoys
// streams, buckets buckets with each stream reporting perReport of them in
// every report (each bucket then has envoys × perReport / buckets
// Envoys), demands 1.5 times the limit moving at random within ±30% from
// one report to the next, the streams reporting in turn and the clock
// moving on so that each reports once a second.
func BenchmarkReportFleet(b *testing.B) {
	for _, tc := range []struct{ envoys, buckets, perReport int }{{1000, 100, 10}, {1000, 100, 1}, {100, 10, 10}} {
		b.Run(fmt.Sprintf("envoys=%d/buckets=%d/per-report=%d", tc.envoys, tc.buckets, tc.perReport), func(b *testing.B) {
			clock := testkit.NewClock(t0)
			cfg, err := quota.Parse(map[string][]byte{"b.yaml": []byte(`domain: d
rate_limit_quota:
  buckets:
    - match: {name: "*"}
      rate_limit: {unit: minute, requests_per_unit: 60000}
`)})
			require.NoError(b, err)
			srv := quota.New(cfg, quota.Options{Clock: clock.Now})
			groups := tc.buckets / tc.perReport
			perBucket := float64(tc.envoys) / float64(groups)
			mean := 1000 / perBucket * 1.5 // requests a second of each Envoy on each bucket
			const variants = 8
			rng := rand.New(rand.NewPCG(1, 2))
			streams := make([]*quota.TestStream, tc.envoys)
			msgs := make([][]*rlqsv3.RateLimitQuotaUsageReports, tc.envoys)
			for i := range streams {
				streams[i] = srv.NewTestStream()
				for range variants {
					m := &rlqsv3.RateLimitQuotaUsageReports{Domain: "d"}
					for k := i % groups; k < tc.buckets; k += groups {
						m.BucketQuotaUsages = append(m.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
							BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"name": fmt.Sprintf("b%03d", k)}}, TimeElapsed: durationpb.New(time.Second),
							NumRequestsAllowed: uint64(mean * (0.7 + 0.6*rng.Float64()))})
					}
					msgs[i] = append(msgs[i], m)
				}
				require.NotEmpty(b, msgs[i][0].BucketQuotaUsages)
				require.NoError(b, streams[i].Report(msgs[i][0]))
			}
			step := time.Second / time.Duration(tc.envoys)
			drain := func() {
				for _, s := range streams {
					s.Drain()
				}
			}
			drain()
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				i := n % tc.envoys
				clock.Advance(step)
				if err := streams[i].Report(msgs[i][(n/tc.envoys+i)%variants]); err != nil {
					b.Fatal(err)
				}
				if i == tc.envoys-1 {
					b.StopTimer()
					drain()
					b.StartTimer()
				}
			}
		})
	}
}
