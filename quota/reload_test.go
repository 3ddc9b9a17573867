package quota_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/quota"
)

// counted is a test stream that keeps the actions it receives and counts
// the responses, so that a test knows when it has all the server sent.
type counted struct {
	st        grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	responses atomic.Int64
	mu        sync.Mutex
	actions   []*rlqsv3.RateLimitQuotaResponse_BucketAction
}

func connectCounted(t *testing.T, cc *grpc.ClientConn) *counted {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	require.NoError(t, err)
	c := &counted{st: st}
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.actions = append(c.actions, r.GetBucketAction()...)
			c.mu.Unlock()
			c.responses.Add(1)
		}
	}()
	return c
}

// take returns the actions received since the last take.
func (c *counted) take() []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.actions
	c.actions = nil
	return out
}

// settle waits until srv has handled reports reports, sent all it posted,
// and cs have received every response it sent.
func settle(t *testing.T, srv *quota.Server, reports int64, cs ...*counted) {
	t.Helper()
	require.Eventually(t, func() bool {
		s := srv.Stats()
		got := int64(0)
		for _, c := range cs {
			got += c.responses.Load()
		}
		return s.Reports >= reports && s.Pending == 0 && got == s.Responses
	}, 10*time.Second, time.Millisecond)
}

// reloadYAML is a domain with a rule for {name: api} (100 a second) and
// one for {name: other}; the tests edit it.
const reloadYAML = `domain: edge
rate_limit_quota:
  default_action: deny_all
  buckets:
    - name: api
      match: {name: api}
      rate_limit: {unit: second, requests_per_unit: 100}
    - name: other
      match: {name: other}
      rate_limit: {unit: second, requests_per_unit: 7}
`

// TestServerReload: a new configuration reaches the buckets of the
// streams open at their next report. Two Envoys report 1 000 a second each
// on one bucket and hold 50 each; the configuration changes; a second
// later each reports again, and each must then have received, since the
// change, exactly what the case says (nothing for a rule left as it was).
func TestServerReload(t *testing.T) {
	type want struct {
		rate float64 // an assignment of this rate; 0: a blanket rule or abandon
		ttl  time.Duration
		deny bool // a DENY_ALL blanket rule
		gone bool // the abandon action
		unit bool // requests_per_time_unit, not a token bucket
	}
	for _, tc := range []struct {
		name   string
		id     string // the bucket's name
		before string // the configuration of the first reports (reloadYAML if empty)
		after  string
		want   []want // the actions each Envoy gets after the change, in order; none: nothing sent
	}{
		{name: "the limit changed", id: "api", after: strings.Replace(reloadYAML, "requests_per_unit: 100}", "requests_per_unit: 40}", 1),
			want: []want{{rate: 20, ttl: 3 * time.Second}}},
		{name: "the limit changed within the hysteresis", id: "api", after: strings.Replace(reloadYAML, "requests_per_unit: 100}", "requests_per_unit: 102}", 1),
			want: []want{{rate: 51, ttl: 3 * time.Second}}},
		{name: "the TTL changed, the shares not", id: "api", after: strings.Replace(reloadYAML, "requests_per_unit: 100}", "requests_per_unit: 100}\n      ttl: 5s", 1),
			want: []want{{rate: 50, ttl: 5 * time.Second}}},
		{name: "the algorithm changed", id: "api", after: strings.Replace(reloadYAML, "requests_per_unit: 100}", "requests_per_unit: 100}\n      algorithm: fixed_window", 1),
			want: []want{{rate: 50, ttl: 3 * time.Second, unit: true}}},
		{name: "another rule changed", id: "api", after: strings.Replace(reloadYAML, "requests_per_unit: 7}", "requests_per_unit: 8}", 1)},
		{name: "the rule renamed, the same", id: "api", after: strings.Replace(reloadYAML, "name: api\n", "name: api2\n", 1)},
		{name: "the rule gone, default deny_all", id: "api", after: strings.Replace(reloadYAML, "match: {name: api}", "match: {name: api, x: y}", 1),
			want: []want{{deny: true}}},
		{name: "the rule gone, default abandon", id: "api", after: strings.Replace(strings.Replace(reloadYAML, "match: {name: api}", "match: {name: api, x: y}", 1), "deny_all", "abandon", 1),
			want: []want{{gone: true}}},
		{name: "a rule for a bucket of the default", id: "new", after: strings.Replace(reloadYAML, "match: {name: other}", "match: {name: new}", 1),
			// the first alone gets the whole limit, then half with the second
			want: []want{{rate: 7, ttl: 3 * time.Second}, {rate: 3.5, ttl: 3 * time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testkit.NewClock(t0)
			before := tc.before
			if before == "" {
				before = reloadYAML
			}
			cfg, err := quota.Parse(map[string][]byte{"edge.yaml": []byte(before)})
			require.NoError(t, err)
			srv := quota.New(cfg, quota.Options{Clock: clock.Now})
			cc := serve(t, srv)
			a, b := connectCounted(t, cc), connectCounted(t, cc)
			id := map[string]string{"name": tc.id}
			reports := int64(0)
			send := func(c *counted, domain string) {
				t.Helper()
				require.NoError(t, c.st.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
					BucketId: &rlqsv3.BucketId{Bucket: id}, TimeElapsed: durationpb.New(time.Second), NumRequestsAllowed: 1000}}}))
				reports++
				settle(t, srv, reports, a, b)
			}
			send(a, "edge")
			send(b, "edge")
			clock.Advance(time.Second) // within the refresh (TTL/2): no action due but for the change
			send(a, "")
			send(b, "")
			a.take()
			b.take()
			sent := srv.Stats().Responses

			next, err := quota.Parse(map[string][]byte{"edge.yaml": []byte(tc.after)})
			require.NoError(t, err)
			srv.SetConfig(next)
			clock.Advance(time.Second / 4)
			send(a, "")
			send(b, "")
			if len(tc.want) == 0 {
				assert.Equal(t, sent, srv.Stats().Responses, "nothing sent")
				return
			}
			for _, c := range []*counted{a, b} {
				got := c.take()
				require.NotEmpty(t, got, "an action after the change")
				last := got[len(got)-1]
				w := tc.want[len(tc.want)-1]
				if c == a && len(tc.want) > 1 {
					require.Len(t, got, len(tc.want))
				}
				assert.Equal(t, id, last.GetBucketId().GetBucket())
				switch st := last.GetQuotaAssignmentAction().GetRateLimitStrategy(); {
				case w.gone:
					assert.NotNil(t, last.GetAbandonAction(), "abandoned: %v", last)
				case w.deny:
					assert.Equal(t, typev3.RateLimitStrategy_DENY_ALL, st.GetBlanketRule(), "%v", last)
				default:
					assert.InDelta(t, w.rate, rate(t, last), 0.01)
					assert.Equal(t, w.ttl, last.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration())
					assert.Equal(t, w.unit, st.GetRequestsPerTimeUnit() != nil, "requests_per_time_unit: %v", st)
				}
			}
		})
	}
}
