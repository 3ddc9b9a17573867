package quota_test

import (
	"strconv"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/quota"
)

// TestServerOneResponseAReport: the actions one report causes for an
// Envoy go in one response, however many buckets it names: its first
// assignments, and later its refreshes, which come due together at its own
// report.
func TestServerOneResponseAReport(t *testing.T) {
	const buckets = 1000
	clock := testkit.NewClock(t0)
	cfg, err := quota.Parse(map[string][]byte{"edge.yaml": []byte("domain: edge\nrate_limit_quota:\n  buckets:\n    - match: {name: \"*\"}\n      rate_limit: {unit: second, requests_per_unit: 100}\n")})
	require.NoError(t, err)
	srv := quota.New(cfg, quota.Options{Clock: clock.Now})
	e := connectCounted(t, serve(t, srv))
	msg := &rlqsv3.RateLimitQuotaUsageReports{Domain: "edge"}
	for i := range buckets {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"name": strconv.Itoa(i)}}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 10})
	}
	for step, at := range []time.Duration{0, time.Second, 2 * time.Second} {
		clock.Set(t0.Add(at))
		require.NoError(t, e.st.Send(msg))
		settle(t, srv, int64(step+1), e)
		want := []int{1, 0, 1}[step] // first assignments, nothing, refreshes at 2 s (TTL 3 s)
		assert.Equal(t, int64(want), e.responses.Load()-int64([]int{0, 1, 1}[step]), "responses at %v", at)
		assert.Len(t, e.take(), buckets*want, "actions at %v", at)
	}
}
