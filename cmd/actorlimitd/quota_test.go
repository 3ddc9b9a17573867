package main

import (
	"context"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
)

const quotaConfig = serveConfig + `
rate_limit_quota:
  default_action: abandon
  buckets:
    - name: checkout
      match: {name: checkout}
      rate_limit: {unit: minute, requests_per_unit: 600}
`

// TestServeQuota: actorlimitd serves RLQS beside RLS on its gRPC listener,
// from the rate_limit_quota section of its configuration, with metrics;
// the RLS rules of the same file still apply.
func TestServeQuota(t *testing.T) {
	d := startWithConfig(t, quotaConfig)
	resp, err := d.ask(request("web", desc("user", "u1")))
	require.NoError(t, err)
	assert.Equal(t, uint32(2), resp.Statuses[0].LimitRemaining, "the RLS rules are read as before")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(d.conn).StreamRateLimitQuotas(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "web", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
		{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"name": "checkout"}}, TimeElapsed: durationpb.New(0), NumRequestsAllowed: 1},
		{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"name": "other"}}, TimeElapsed: durationpb.New(0), NumRequestsAllowed: 1},
	}}))
	got := map[string]*rlqsv3.RateLimitQuotaResponse_BucketAction{}
	for len(got) < 2 {
		r, err := st.Recv()
		require.NoError(t, err)
		for _, a := range r.GetBucketAction() {
			got[a.GetBucketId().GetBucket()["name"]] = a
		}
	}
	tb := got["checkout"].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	require.NotNil(t, tb, "%v", got["checkout"])
	assert.InDelta(t, 10, float64(tb.GetTokensPerFill().GetValue())/tb.GetFillInterval().AsDuration().Seconds(), 0.01, "alone: the whole 600 a minute")
	assert.NotNil(t, got["other"].GetAbandonAction())

	code, body := d.get("/metrics")
	require.Equal(t, 200, code)
	assert.Contains(t, body, `actorlimitd_quota_envoys{domain="web",rule="checkout"} 1`)
	assert.True(t, strings.Contains(body, "actorlimitd_quota_streams 1"), "streams gauge")
}
