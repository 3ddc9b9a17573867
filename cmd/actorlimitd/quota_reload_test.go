package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestServeQuotaWatch: -watch reloads the rate_limit_quota sections with
// the rate limit rules, on a stream that stays open throughout: a changed
// limit is in the bucket's next assignment, a bad file changes neither
// the quota rules nor the rate limit rules (logged and counted as a bad
// configuration), and a rule gone leaves the bucket to the default action.
func TestServeQuotaWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, quotaConfig)
	d := startDaemon(t, "-config", path, "-watch-every", "50ms")
	d.client()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(d.conn).StreamRateLimitQuotas(ctx)
	require.NoError(t, err)
	domain := "web"
	// report reports 1 000 requests a second on the checkout bucket, and
	// returns the first action received after it that done accepts.
	report := func(what string, done func(*rlqsv3.RateLimitQuotaResponse_BucketAction) bool) {
		t.Helper()
		require.NoError(t, st.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			{BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"name": "checkout"}}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 1000},
		}}))
		domain = ""
		for {
			r, err := st.Recv()
			require.NoError(t, err, what)
			for _, a := range r.GetBucketAction() {
				if done(a) {
					return
				}
				t.Logf("%s: %v, waiting for another", what, a)
			}
		}
	}
	rateIs := func(want float64) func(*rlqsv3.RateLimitQuotaResponse_BucketAction) bool {
		return func(a *rlqsv3.RateLimitQuotaResponse_BucketAction) bool {
			tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
			return tb != nil && float64(tb.GetTokensPerFill().GetValue())/tb.GetFillInterval().AsDuration().Seconds() == want
		}
	}
	userLimit := func() uint32 {
		resp, err := d.ask(request("web", &ratelimitv3.RateLimitDescriptor{Entries: desc("user", "u1").Entries, HitsAddend: wrapperspb.UInt64(0)}))
		require.NoError(t, err)
		return resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	reloads := func() int { return strings.Count(d.logs.String(), "quota rules reloaded") }

	report("600 a minute", rateIs(10))

	writeFile(t, path, strings.Replace(quotaConfig, "requests_per_unit: 600}", "requests_per_unit: 1200}", 1))
	eventually(t, seenWithin, "the watcher's reload", func() bool { return reloads() == 1 })
	report("1 200 a minute after the watcher's reload", rateIs(20))

	bad := strings.Replace(strings.Replace(quotaConfig, "requests_per_unit: 600}", "requests_per_unit: 6000}\n      bogus: 1", 1),
		"requests_per_unit: 3, name: per_user", "requests_per_unit: 30, name: per_user", 1)
	writeFile(t, path, bad)
	eventually(t, seenWithin, "the bad file's error logged", func() bool {
		return strings.Contains(d.logs.String(), `unknown field \"bogus\" in a bucket rule`)
	})
	assert.Equal(t, 1, reloads(), "no quota reload from the bad file")
	assert.Equal(t, uint32(3), userLimit(), "the rate limit rules of the bad file are not in force either")
	_, body := d.getDebug("/metrics")
	assert.Contains(t, body, `actorlimitd_config_loads_total{result="error"} 1`)
	assert.Contains(t, body, `actorlimitd_quota_limit_per_second{domain="web",rule="checkout"} 20`, "the quota rule in force stays")

	writeFile(t, path, strings.Replace(quotaConfig, "match: {name: checkout}", "match: {name: checkout, tenant: \"*\"}", 1))
	eventually(t, seenWithin, "the reload of the rule gone", func() bool { return reloads() == 2 })
	report("the default action once the rule is gone", func(a *rlqsv3.RateLimitQuotaResponse_BucketAction) bool { return a.GetAbandonAction() != nil })
}
