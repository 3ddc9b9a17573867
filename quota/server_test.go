package quota_test

import (
	"context"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/quota"
)

const serverYAML = `domain: edge
rate_limit_quota:
  default_action: deny_all
  reporting_interval: 1s
  buckets:
    - name: api
      match: {name: api}
      rate_limit: {unit: second, requests_per_unit: 100}
    - name: window
      match: {name: window}
      rate_limit: {unit: minute, requests_per_unit: 6000}
      algorithm: sliding_window
`

// serve starts srv on a loopback port and returns a connection to it.
func serve(t *testing.T, srv *quota.Server) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	rlqsv3.RegisterRateLimitQuotaServiceServer(gs, srv)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func newServer(t *testing.T, clock *testkit.Clock, opts quota.Options) *quota.Server {
	t.Helper()
	cfg, err := quota.Parse(map[string][]byte{"edge.yaml": []byte(serverYAML)})
	require.NoError(t, err)
	opts.Clock = clock.Now
	return quota.New(cfg, opts)
}

// envoy is one test stream: it sends reports and collects actions.
type envoy struct {
	st     grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	cancel context.CancelFunc
	got    chan *rlqsv3.RateLimitQuotaResponse_BucketAction
	err    chan error
}

func connect(t *testing.T, cc *grpc.ClientConn) *envoy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	require.NoError(t, err)
	e := &envoy{st: st, cancel: cancel, got: make(chan *rlqsv3.RateLimitQuotaResponse_BucketAction, 1000), err: make(chan error, 1)}
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				e.err <- err
				return
			}
			for _, a := range r.GetBucketAction() {
				e.got <- a
			}
		}
	}()
	return e
}

type usage struct {
	id              map[string]string
	allowed, denied uint64
	elapsed         time.Duration
}

func (e *envoy) report(t *testing.T, domain string, us ...usage) {
	t.Helper()
	msg := &rlqsv3.RateLimitQuotaUsageReports{Domain: domain}
	for _, u := range us {
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: &rlqsv3.BucketId{Bucket: u.id}, TimeElapsed: durationpb.New(u.elapsed),
			NumRequestsAllowed: u.allowed, NumRequestsDenied: u.denied})
	}
	require.NoError(t, e.st.Send(msg))
}

// next returns the next action received, or fails after a while.
func (e *envoy) next(t *testing.T) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	t.Helper()
	select {
	case a := <-e.got:
		return a
	case err := <-e.err:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no action received")
	}
	return nil
}

// streamErr waits for the stream's end and returns its status code.
func (e *envoy) streamErr(t *testing.T) error {
	t.Helper()
	for {
		select {
		case <-e.got:
		case err := <-e.err:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end")
		}
	}
}

// rate returns an assignment's requests per second.
func rate(t *testing.T, a *rlqsv3.RateLimitQuotaResponse_BucketAction) float64 {
	t.Helper()
	qa := a.GetQuotaAssignmentAction()
	require.NotNil(t, qa, "an assignment: %v", a)
	st := qa.GetRateLimitStrategy()
	if tb := st.GetTokenBucket(); tb != nil {
		require.GreaterOrEqual(t, tb.GetMaxTokens(), tb.GetTokensPerFill().GetValue())
		return float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
	}
	if rp := st.GetRequestsPerTimeUnit(); rp != nil {
		secs := map[typev3.RateLimitUnit]float64{typev3.RateLimitUnit_SECOND: 1, typev3.RateLimitUnit_MINUTE: 60, typev3.RateLimitUnit_HOUR: 3600, typev3.RateLimitUnit_DAY: 86400}
		return float64(rp.GetRequestsPerTimeUnit()) / secs[rp.GetTimeUnit()]
	}
	t.Fatalf("no rate in %v", st)
	return 0
}

// waitIdle waits until srv has handled n reports and sent all it posted.
func waitIdle(t *testing.T, srv *quota.Server, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		s := srv.Stats()
		return s.Reports >= n && s.Pending == 0
	}, 10*time.Second, time.Millisecond)
}

var api = map[string]string{"name": "api"}

// TestServerShares: two Envoys on one bucket get the reserve first, then
// max-min fair shares of its limit, as token buckets with the rule's TTL;
// a third reporting huge demand takes no more than an equal share.
func TestServerShares(t *testing.T) {
	clock := testkit.NewClock(t0)
	srv := newServer(t, clock, quota.Options{})
	cc := serve(t, srv)
	a, b := connect(t, cc), connect(t, cc)

	a.report(t, "edge", usage{id: api, allowed: 1})
	first := a.next(t)
	assert.InDelta(t, 100, rate(t, first), 0.5, "alone: the reserve and all no one asked for")
	assert.Equal(t, 3*time.Second, first.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration())
	assert.Equal(t, api, first.GetBucketId().GetBucket())

	clock.Advance(time.Second)
	a.report(t, "edge", usage{id: api, allowed: 20, elapsed: time.Second})
	waitIdle(t, srv, 2)
	b.report(t, "edge", usage{id: api, allowed: 1})
	assert.InDelta(t, 41.5, rate(t, b.next(t)), 0.5, "the newcomer: reserve 5 + half of what no one asked")
	assert.InDelta(t, 58.5, rate(t, a.next(t)), 0.5, "a: 20 and the 10% margin + half of what no one asked, a fall sent at once")

	clock.Advance(time.Second)
	b.report(t, "edge", usage{id: api, allowed: 70, denied: 30, elapsed: time.Second})
	assert.InDelta(t, 78, rate(t, b.next(t)), 0.5, "b asks 100: it gets all a does not ask")
	assert.InDelta(t, 22, rate(t, a.next(t)), 0.5, "a asks 20: it gets 20 and the margin")

	// A hostile client claims the whole limit and more.
	h := connect(t, cc)
	h.report(t, "edge", usage{id: api, allowed: 1 << 62, denied: 1 << 62, elapsed: time.Millisecond})
	waitIdle(t, srv, 5)
	clock.Advance(time.Second)
	h.report(t, "edge", usage{id: api, allowed: 1 << 62, denied: 1 << 62, elapsed: time.Millisecond})
	a.report(t, "edge", usage{id: api, allowed: 20, elapsed: time.Second})
	b.report(t, "edge", usage{id: api, allowed: 50, denied: 50, elapsed: time.Second})
	waitIdle(t, srv, 8)
	last := map[*envoy]float64{a: 22} // a's share does not change: nothing sent
	for _, e := range []*envoy{a, b, h} {
		for len(e.got) > 0 {
			last[e] = rate(t, <-e.got)
		}
	}
	assert.InDelta(t, 22, last[a], 0.5, "a keeps what it asks")
	assert.InDelta(t, 39, last[b], 0.5, "b keeps an equal share of the rest")
	assert.InDelta(t, 39, last[h], 0.5, "the hostile client gets no more than b")

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(srv))
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP actorlimitd_quota_envoys Envoys reporting on the rule's buckets (one per bucket and stream).
# TYPE actorlimitd_quota_envoys gauge
actorlimitd_quota_envoys{domain="edge",rule="api"} 3
# HELP actorlimitd_quota_assigned_per_second The shares in force on the rule's buckets (leavers' until their TTL), in requests per second.
# TYPE actorlimitd_quota_assigned_per_second gauge
actorlimitd_quota_assigned_per_second{domain="edge",rule="api"} 100
# HELP actorlimitd_quota_reported_denied_total Requests the Envoys reported denied on the rule's buckets.
# TYPE actorlimitd_quota_reported_denied_total counter
actorlimitd_quota_reported_denied_total{domain="edge",rule="api"} 9.223372036854776e+18
`), "actorlimitd_quota_envoys", "actorlimitd_quota_assigned_per_second", "actorlimitd_quota_reported_denied_total"))
}

// TestServerLeaver: a stream that breaks keeps its share counted until its
// TTL; the next report after that gives it to the others.
func TestServerLeaver(t *testing.T) {
	clock := testkit.NewClock(t0)
	srv := newServer(t, clock, quota.Options{})
	cc := serve(t, srv)
	a, b := connect(t, cc), connect(t, cc)
	a.report(t, "edge", usage{id: api, allowed: 100, elapsed: time.Second})
	b.report(t, "edge", usage{id: api, allowed: 100, elapsed: time.Second})
	waitIdle(t, srv, 2)
	for len(a.got) > 0 {
		<-a.got
	}
	b.cancel()
	require.Eventually(t, func() bool { return srv.Stats().Pending == 0 && testutil.ToFloat64(streamsGauge(srv)) == 1 }, 10*time.Second, time.Millisecond)
	for _, step := range []struct {
		after time.Duration
		want  float64 // a's share sent, 0 for none
	}{
		{time.Second, 0},
		{time.Second, 0}, // refresh at 1.5 s was due at 2 s: same share
		{999 * time.Millisecond, 0},
		{time.Millisecond, 100}, // b's assignment, sent at 0, expired at 3 s
	} {
		clock.Advance(step.after)
		n := srv.Stats().Reports
		a.report(t, "edge", usage{id: api, allowed: 100, elapsed: time.Second})
		waitIdle(t, srv, n+1)
		var got float64
		for len(a.got) > 0 {
			got = rate(t, <-a.got)
		}
		// The server's send returning does not mean a has received it:
		// wait for the share wanted (a refresh of 50 may come first).
		for step.want != 0 && math.Abs(got-step.want) > 0.5 {
			got = rate(t, a.next(t))
		}
		if step.want == 0 && got != 0 {
			assert.InDelta(t, 50, got, 0.5, "a refresh keeps 50 while b's share is held")
			continue
		}
		assert.InDelta(t, step.want, got, 0.5)
	}
}

// streamsGauge returns the server's streams gauge alone.
func streamsGauge(srv *quota.Server) prometheus.Collector {
	return prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		mc := make(chan prometheus.Metric, 100)
		go func() { srv.Collect(mc); close(mc) }()
		for m := range mc {
			if strings.Contains(m.Desc().String(), "actorlimitd_quota_streams") {
				ch <- m
			}
		}
	})
}

// TestServerDefaultsAndForms: a bucket no rule matches gets the default
// action; a windowed rule's share is requests_per_time_unit.
func TestServerDefaultsAndForms(t *testing.T) {
	clock := testkit.NewClock(t0)
	srv := newServer(t, clock, quota.Options{})
	cc := serve(t, srv)
	e := connect(t, cc)
	e.report(t, "edge", usage{id: map[string]string{"name": "other"}, allowed: 1})
	a := e.next(t)
	assert.Equal(t, typev3.RateLimitStrategy_DENY_ALL, a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetBlanketRule())
	assert.Equal(t, "other", a.GetBucketId().GetBucket()["name"])
	e.report(t, "", usage{id: map[string]string{"name": "window"}, allowed: 1})
	a = e.next(t)
	require.NotNil(t, a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetRequestsPerTimeUnit())
	assert.InDelta(t, 100, rate(t, a), 0.01)

	other := connect(t, cc)
	other.report(t, "nowhere", usage{id: api, allowed: 1})
	assert.NotNil(t, other.next(t).GetAbandonAction(), "a domain with no section: abandon")
}

// TestServerBounds: what a client controls is bounded, and each bound
// names itself.
func TestServerBounds(t *testing.T) {
	big := map[string]string{}
	for i := range 17 {
		big[string(rune('a'+i))] = "v"
	}
	for _, tc := range []struct {
		name string
		opts quota.Options
		send func(t *testing.T, e *envoy)
		code codes.Code
		msg  string
	}{
		{"no domain", quota.Options{}, func(t *testing.T, e *envoy) { e.report(t, "", usage{id: api}) }, codes.InvalidArgument, "domain"},
		{"domain changed", quota.Options{}, func(t *testing.T, e *envoy) {
			e.report(t, "edge", usage{id: api})
			e.report(t, "other", usage{id: api})
		}, codes.InvalidArgument, "domain"},
		{"id entries", quota.Options{}, func(t *testing.T, e *envoy) { e.report(t, "edge", usage{id: big}) }, codes.InvalidArgument, "17 entries"},
		{"id bytes", quota.Options{MaxBucketIDBytes: 10}, func(t *testing.T, e *envoy) {
			e.report(t, "edge", usage{id: map[string]string{"name": "abcdefghijk"}})
		}, codes.InvalidArgument, "15 bytes"},
		{"empty id", quota.Options{}, func(t *testing.T, e *envoy) { e.report(t, "edge", usage{}) }, codes.InvalidArgument, "no entry"},
		{"reports per second", quota.Options{ReportsPerSecond: 1, ReportBurst: 3}, func(t *testing.T, e *envoy) {
			for range 4 {
				e.report(t, "edge", usage{id: api})
			}
		}, codes.ResourceExhausted, "reports a second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, testkit.NewClock(t0), tc.opts)
			e := connect(t, serve(t, srv))
			tc.send(t, e)
			err := e.streamErr(t)
			assert.Equal(t, tc.code, status.Code(err), "%v", err)
			assert.Contains(t, status.Convert(err).Message(), tc.msg)
		})
	}

	t.Run("buckets per stream", func(t *testing.T) {
		srv := newServer(t, testkit.NewClock(t0), quota.Options{MaxBucketsPerStream: 2})
		e := connect(t, serve(t, srv))
		e.report(t, "edge", usage{id: api}, usage{id: map[string]string{"name": "window"}})
		e.report(t, "edge", usage{id: map[string]string{"name": "x"}})
		for range 3 {
			a := e.next(t)
			if a.GetBucketId().GetBucket()["name"] == "x" {
				assert.NotNil(t, a.GetAbandonAction(), "the third bucket is abandoned")
			} else {
				assert.NotNil(t, a.GetQuotaAssignmentAction())
			}
		}
	})
	t.Run("streams", func(t *testing.T) {
		srv := newServer(t, testkit.NewClock(t0), quota.Options{MaxStreams: 1})
		cc := serve(t, srv)
		e := connect(t, cc)
		e.report(t, "edge", usage{id: api})
		e.next(t)
		f := connect(t, cc)
		_ = f.st.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "edge"}) // the server may have closed it already
		assert.Equal(t, codes.ResourceExhausted, status.Code(f.streamErr(t)))
	})
}

// TestServerSetConfig: a new configuration's limit applies to a bucket
// already divided at its next report.
func TestServerSetConfig(t *testing.T) {
	clock := testkit.NewClock(t0)
	srv := newServer(t, clock, quota.Options{})
	e := connect(t, serve(t, srv))
	e.report(t, "edge", usage{id: api, allowed: 1000, elapsed: time.Second})
	assert.InDelta(t, 100, rate(t, e.next(t)), 0.5)
	cfg, err := quota.Parse(map[string][]byte{"edge.yaml": []byte(strings.Replace(serverYAML, "requests_per_unit: 100}", "requests_per_unit: 40}", 1))})
	require.NoError(t, err)
	srv.SetConfig(cfg)
	clock.Advance(time.Second)
	e.report(t, "", usage{id: api, allowed: 1000, elapsed: time.Second})
	assert.InDelta(t, 40, rate(t, e.next(t)), 0.5, "the new limit")
}
