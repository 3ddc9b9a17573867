package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
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
// the RLS rules of the same file still apply. The RLQS stream shares the
// connection of an RLS call made first, as Envoy's filters share a
// cluster's: with -grpc-transport direct that connection is the direct
// transport's, which proxies the stream to grpc-go.
func TestServeQuota(t *testing.T) { forTransports(t, testServeQuota) }

func testServeQuota(t *testing.T, transport string) {
	d := startWithConfig(t, quotaConfig, "-grpc-transport", transport)
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

	code, body := d.getDebug("/metrics")
	require.Equal(t, 200, code)
	assert.Contains(t, body, `actorlimitd_quota_envoys{domain="web",rule="checkout"} 1`)
	assert.True(t, strings.Contains(body, "actorlimitd_quota_streams 1"), "streams gauge")
}

// TestServeQuotaReload: SIGHUP reads the rate_limit_quota sections again,
// and a bucket's next report gets the new limit.
func TestServeQuotaReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, quotaConfig)
	d := startDaemon(t, "-config", path)
	d.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(d.conn).StreamRateLimitQuotas(ctx)
	require.NoError(t, err)
	report := func(domain string) float64 {
		t.Helper()
		require.NoError(t, st.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"name": "checkout"}}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 1000},
		}}))
		r, err := st.Recv()
		require.NoError(t, err)
		tb := r.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
		require.NotNil(t, tb, "%v", r)
		return float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
	}
	assert.InDelta(t, 10, report("web"), 0.01, "600 a minute")
	writeFile(t, path, strings.Replace(quotaConfig, "requests_per_unit: 600}", "requests_per_unit: 1200}", 1))
	d.signal(syscall.SIGHUP)
	eventually(t, 30*time.Second, "the reload", func() bool { return strings.Contains(d.logs.String(), "quota rules reloaded") })
	assert.InDelta(t, 20, report(""), 0.01, "1 200 a minute after SIGHUP")
}
