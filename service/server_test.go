package service_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/service"
)

// start is 10 s into a minute (and into an hour, a day...).
var start = time.Unix(1_800_000_000-1_800_000_000%(365*86400)+10, 0)

type fixture struct {
	srv   *service.Server
	clock *testkit.Clock
	reg   *prometheus.Registry
}

func newFixture(t *testing.T, yaml string, o service.Options) *fixture {
	t.Helper()
	clock := testkit.NewClock(start) // the limiter's and the server's clock, moved by the test
	lim, err := actorlimit.Start(actorlimit.WithClock(clock), actorlimit.WithJanitor(0, 0))
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	reg := prometheus.NewRegistry()
	m, err := service.NewMetrics(reg, 3)
	require.NoError(t, err)
	cfg, err := service.Parse(map[string][]byte{"test.yaml": []byte(yaml)})
	require.NoError(t, err)
	m.ConfigLoaded(cfg, nil)
	o.Limiter, o.Clock, o.Metrics = lim, clock, m
	srv, err := service.New(cfg, o)
	require.NoError(t, err)
	return &fixture{srv, clock, reg}
}

// request makes a request of domain with descriptors.
func request(domain string, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds}
}

func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// st is a descriptor status in short: code, limit (0: none), remaining,
// reset in seconds (-1: none).
type st struct {
	over      bool
	limit     uint32
	remaining uint32
	reset     int64
}

func short(s *rlsv3.RateLimitResponse_DescriptorStatus) st {
	out := st{over: s.Code == rlsv3.RateLimitResponse_OVER_LIMIT, remaining: s.LimitRemaining, reset: -1}
	if s.CurrentLimit != nil {
		out.limit = s.CurrentLimit.RequestsPerUnit
	}
	if s.DurationUntilReset != nil {
		out.reset = s.DurationUntilReset.Seconds
	}
	return out
}

// step is one request and the answer expected.
type step struct {
	name    string
	advance time.Duration
	req     *rlsv3.RateLimitRequest
	over    bool
	want    []st
}

func run(t *testing.T, f *fixture, steps []step) {
	t.Helper()
	for i, s := range steps {
		f.clock.Advance(s.advance)
		resp, err := f.srv.ShouldRateLimit(context.Background(), s.req)
		require.NoError(t, err, "step %d %s", i, s.name)
		got := make([]st, len(resp.Statuses))
		for j, x := range resp.Statuses {
			got[j] = short(x)
		}
		assert.Equal(t, s.over, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT, "step %d %s: overall", i, s.name)
		assert.NotEqual(t, rlsv3.RateLimitResponse_UNKNOWN, resp.OverallCode, "step %d %s", i, s.name)
		assert.Equal(t, s.want, got, "step %d %s", i, s.name)
	}
}

const decisions = `
domain: web
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3, name: per_user}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: open
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: general
    rate_limit: {unit: minute, requests_per_unit: 1, name: general}
  - key: specific
    rate_limit: {unit: minute, requests_per_unit: 100, replaces: [{name: general}]}
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
`

func TestDecisions(t *testing.T) {
	u := func(v string) *ratelimitv3.RateLimitDescriptor { return desc("user", v) }
	tests := []struct {
		name  string
		steps []step
	}{
		{"a fixed window of a minute, reset at the minute", []step{
			{req: request("web", u("a")), want: []st{{false, 3, 2, 50}}},
			{req: request("web", u("a")), want: []st{{false, 3, 1, 50}}},
			{advance: 5 * time.Second, req: request("web", u("a")), want: []st{{false, 3, 0, 45}}},
			{req: request("web", u("a")), over: true, want: []st{{true, 3, 0, 45}}},
			{name: "another value, another counter", req: request("web", u("b")), want: []st{{false, 3, 2, 45}}},
			{name: "next minute", advance: 45 * time.Second, req: request("web", u("a")), want: []st{{false, 3, 2, 60}}},
		}},
		{"every descriptor is charged, in order, even when one denies", []step{
			{req: request("web", desc("path", "/x"), desc("path", "/x"), desc("path", "/x")), over: true,
				want: []st{{false, 2, 1, 3590}, {false, 2, 0, 3590}, {true, 2, 0, 3590}}},
			{req: request("web", desc("path", "/x")), over: true, want: []st{{true, 2, 0, 3590}}},
		}},
		{"hits_addend of the request, and a descriptor's own", []step{
			{req: &rlsv3.RateLimitRequest{Domain: "web", HitsAddend: 2, Descriptors: []*ratelimitv3.RateLimitDescriptor{u("h")}}, want: []st{{false, 3, 1, 50}}},
			{name: "0: checked, not counted", req: request("web", withHits(u("h"), 0)), want: []st{{false, 3, 1, 50}}},
			{name: "the descriptor's own wins", req: &rlsv3.RateLimitRequest{Domain: "web", HitsAddend: 5, Descriptors: []*ratelimitv3.RateLimitDescriptor{withHits(u("h"), 1)}}, want: []st{{false, 3, 0, 50}}},
			{name: "0 at the limit is not over", req: request("web", withHits(u("h"), 0)), want: []st{{false, 3, 0, 50}}},
			{req: request("web", withHits(u("h"), 2)), over: true, want: []st{{true, 3, 0, 50}}},
			{name: "0 past the limit is over", req: request("web", withHits(u("h"), 0)), over: true, want: []st{{true, 3, 0, 50}}},
		}},
		{"a check sees the hits before it in the request, not those after", []step{
			{req: request("web", withHits(u("c"), 1), withHits(u("c"), 0), withHits(u("c"), 1)), want: []st{{false, 3, 2, 50}, {false, 3, 2, 50}, {false, 3, 1, 50}}},
			{req: request("web", withHits(u("c"), 0), withHits(u("c"), 1)), want: []st{{false, 3, 1, 50}, {false, 3, 0, 50}}},
			{req: request("web", withHits(u("d"), 3), withHits(u("d"), 1), withHits(u("d"), 0)), over: true, want: []st{{false, 3, 0, 50}, {true, 3, 0, 50}, {true, 3, 0, 50}}},
			{name: "another unit is another counter", req: request("web", withHits(u("e"), 3), &ratelimitv3.RateLimitDescriptor{Entries: u("e").Entries, HitsAddend: wrapperspb.UInt64(0),
				Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_HOUR}}), want: []st{{false, 3, 0, 50}, {false, 3, 3, 3590}}},
		}},
		{"unknown domain, unmatched descriptor, unlimited", []step{
			{req: request("nope", u("a")), want: []st{{false, 0, 0, -1}}},
			{req: request("web", desc("other", "x"), desc("user", "a", "deeper", "x")), want: []st{{false, 0, 0, -1}, {false, 0, 0, -1}}},
			{req: request("web", desc("open", "x")), want: []st{{false, 0, math.MaxUint32, -1}}},
		}},
		{"shadow mode answers OK", []step{
			{req: request("web", desc("shadow", "x")), want: []st{{false, 1, 0, 50}}},
			{req: request("web", desc("shadow", "x")), want: []st{{false, 1, 0, 50}}},
		}},
		{"quota mode answers OK with the limit and no reset", []step{
			{req: request("web", desc("quota", "x")), want: []st{{false, 1, 0, 50}}},
			{req: request("web", desc("quota", "x")), want: []st{{false, 1, 0, -1}}},
		}},
		{"replaces", []step{
			{req: request("web", desc("general", "x"), desc("specific", "x")), want: []st{{false, 0, 0, -1}, {false, 100, 99, 50}}},
			{req: request("web", desc("general", "x")), want: []st{{false, 1, 0, 50}}},
			{req: request("web", desc("general", "x")), over: true, want: []st{{true, 1, 0, 50}}},
		}},
		{"requests_per_unit 0 denies", []step{
			{req: request("web", desc("zero", "x")), over: true, want: []st{{true, 0, 0, 1}}},
		}},
		{"the limit override", []step{
			{req: request("web", &ratelimitv3.RateLimitDescriptor{Entries: u("o").Entries,
				Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}}),
				want: []st{{false, 1, 0, 3590}}},
			{req: request("web", &ratelimitv3.RateLimitDescriptor{Entries: desc("no_rule", "o").Entries,
				Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}}),
				want: []st{{false, 1, 0, 3590}}},
			{name: "an unknown domain ignores it", req: request("nope", &ratelimitv3.RateLimitDescriptor{Entries: u("o").Entries,
				Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}}),
				want: []st{{false, 0, 0, -1}}},
			{name: "the rule's counter is another", req: request("web", u("o")), want: []st{{false, 3, 2, 50}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run(t, newFixture(t, decisions, service.Options{}), tt.steps)
		})
	}
}

func TestDecisionOptions(t *testing.T) {
	two := func() *rlsv3.RateLimitRequest { return request("web", desc("user", "a"), desc("path", "/p")) }
	t.Run("default charges every descriptor", func(t *testing.T) {
		f := newFixture(t, decisions, service.Options{})
		run(t, f, []step{
			{req: two(), want: []st{{false, 3, 2, 50}, {false, 2, 1, 3590}}},
			{req: two(), want: []st{{false, 3, 1, 50}, {false, 2, 0, 3590}}},
			{req: two(), over: true, want: []st{{false, 3, 0, 50}, {true, 2, 0, 3590}}},
			{req: request("web", desc("user", "a")), over: true, want: []st{{true, 3, 0, 50}}},
		})
	})
	t.Run("all or nothing", func(t *testing.T) {
		f := newFixture(t, decisions, service.Options{AllOrNothing: true})
		run(t, f, []step{
			{req: two(), want: []st{{false, 3, 2, 50}, {false, 2, 1, 3590}}},
			{req: two(), want: []st{{false, 3, 1, 50}, {false, 2, 0, 3590}}},
			{name: "path denies: user not charged", req: two(), over: true, want: []st{{false, 3, 1, 50}, {true, 2, 0, 3590}}},
			{req: request("web", desc("user", "a")), want: []st{{false, 3, 0, 50}}},
		})
	})
	t.Run("global shadow mode", func(t *testing.T) {
		f := newFixture(t, decisions, service.Options{ShadowMode: true})
		run(t, f, []step{
			{req: request("web", withHits(desc("user", "a"), 4)), want: []st{{true, 3, 0, 50}}},
		})
	})
	t.Run("denied hits not counted", func(t *testing.T) {
		f := newFixture(t, decisions, service.Options{DeniedNotCounted: true})
		run(t, f, []step{
			{req: request("web", withHits(desc("user", "a"), 3)), want: []st{{false, 3, 0, 50}}},
			{req: request("web", desc("user", "a")), over: true, want: []st{{true, 3, 0, 50}}},
			{name: "the denied hit was not counted", req: request("web", withHits(desc("user", "a"), 0)), want: []st{{false, 3, 0, 50}}},
		})
	})
}

func TestResponseHeaders(t *testing.T) {
	f := newFixture(t, decisions, service.Options{ResponseHeaders: true})
	headers := func(r *rlsv3.RateLimitRequest) map[string]string {
		resp, err := f.srv.ShouldRateLimit(context.Background(), r)
		require.NoError(t, err)
		out := map[string]string{}
		for _, h := range resp.ResponseHeadersToAdd {
			out[h.Key] = h.Value
		}
		return out
	}
	assert.Equal(t, map[string]string{"RateLimit-Limit": "2", "RateLimit-Remaining": "1", "RateLimit-Reset": "3590"},
		headers(request("web", desc("user", "a"), desc("path", "/p"))), "the least remaining")
	assert.Equal(t, map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "1", "RateLimit-Reset": "50"},
		headers(request("web", desc("user", "a"), desc("open", "x"))))
	assert.Empty(t, headers(request("web", desc("open", "x"))), "no limited descriptor, no headers")
}

func TestAlgorithmExtensions(t *testing.T) {
	f := newFixture(t, `
domain: ext
descriptors:
  - key: fixed15
    rate_limit: {period: 15s, requests_per_unit: 2}
  - key: sliding
    rate_limit: {algorithm: sliding_window, unit: minute, requests_per_unit: 2}
  - key: log
    rate_limit: {algorithm: sliding_log, unit: minute, requests_per_unit: 2}
  - key: gcra
    rate_limit: {algorithm: gcra, unit: minute, requests_per_unit: 60, burst: 2}
  - key: token
    rate_limit: {algorithm: token_bucket, period: 10s, requests_per_unit: 10, burst: 2}
  - key: leaky
    rate_limit: {algorithm: leaky_bucket, unit: second, requests_per_unit: 1, burst: 1}
`, service.Options{})
	for _, key := range []string{"fixed15", "sliding", "log", "gcra", "token", "leaky"} {
		t.Run(key, func(t *testing.T) {
			// Each allows two at once and denies the third; a denied hit
			// of these algorithms consumes nothing.
			var codes []bool
			var remaining []uint32
			for range 3 {
				resp, err := f.srv.ShouldRateLimit(context.Background(), request("ext", desc(key, "x")))
				require.NoError(t, err)
				codes = append(codes, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
				remaining = append(remaining, resp.Statuses[0].LimitRemaining)
				assert.NotNil(t, resp.Statuses[0].DurationUntilReset)
			}
			assert.Equal(t, []bool{false, false, true}, codes)
			assert.Equal(t, uint32(0), remaining[2])
		})
	}
	t.Run("fixed window of 15 s ends with its window", func(t *testing.T) {
		resp, err := f.srv.ShouldRateLimit(context.Background(), request("ext", desc("fixed15", "y")))
		require.NoError(t, err)
		// start is 10 s into a minute: 5 s left of the 15 s window.
		assert.Equal(t, 5*time.Second, resp.Statuses[0].DurationUntilReset.AsDuration())
		f.clock.Advance(5 * time.Second)
		resp, err = f.srv.ShouldRateLimit(context.Background(), request("ext", desc("fixed15", "x")))
		require.NoError(t, err)
		assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.OverallCode, "the next 15 s window")
	})
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t, decisions, service.Options{Bounds: service.Bounds{Descriptors: 2, Entries: 2, KeyLength: 8, ValueLength: 10}})
	many := func(n int) []*ratelimitv3.RateLimitDescriptor {
		var out []*ratelimitv3.RateLimitDescriptor
		for range n {
			out = append(out, desc("user", "a"))
		}
		return out
	}
	tests := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"empty domain", request("", desc("user", "a")), "domain must not be empty"},
		{"no descriptors", request("web"), "descriptor list must not be empty"},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "web", Descriptors: many(3)}, "over the bound of 2 descriptors per request"},
		{"too many entries", request("web", desc("user", "a"), desc("a", "1", "b", "2", "c", "3")), "descriptor 1 has 3 entries, over the bound of 2 entries per descriptor"},
		{"long key", request("web", desc("user", "a"), desc("keykeykey", "1")), "descriptor 1, entry 0: key is 9 bytes, over the bound of 8 bytes"},
		{"long domain", request(strings.Repeat("d", 9), desc("user", "a")), "domain is 9 bytes"},
		{"override's unit unknown", request("web", desc("user", "a"), &ratelimitv3.RateLimitDescriptor{Entries: desc("user", "a").Entries,
			Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}}), "limit override's unit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.srv.ShouldRateLimit(context.Background(), tt.req)
			require.Error(t, err)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
	// Nothing of the refused requests was counted.
	resp, err := f.srv.ShouldRateLimit(context.Background(), request("web", desc("user", "a")))
	require.NoError(t, err)
	assert.Equal(t, uint32(2), resp.Statuses[0].LimitRemaining)
}

func TestMetrics(t *testing.T) {
	f := newFixture(t, decisions+`
  - key: who
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
`, service.Options{})
	ask := func(r *rlsv3.RateLimitRequest) {
		_, err := f.srv.ShouldRateLimit(context.Background(), r)
		require.NoError(t, err)
	}
	for range 4 {
		ask(request("web", desc("user", "secret-value")))
	}
	ask(request("web", withHits(desc("shadow", "x"), 3)))
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		ask(request("web", desc("who", v)))
	}
	ask(request("nope", desc("user", "x")))
	c := func(name, path string) float64 {
		return testutil.ToFloat64(mustVec(t, f.reg, name, path))
	}
	assert.Equal(t, 4.0, c("actorlimitd_hits_total", "user"))
	assert.Equal(t, 1.0, c("actorlimitd_over_limit_total", "user"))
	assert.Equal(t, 3.0, c("actorlimitd_within_limit_total", "user"))
	assert.Equal(t, 1.0, c("actorlimitd_near_limit_total", "user"), "the 3rd hit of 3 is past 80%")
	assert.Equal(t, 2.0, c("actorlimitd_shadow_mode_total", "shadow"))
	assert.Equal(t, 1.0, c("actorlimitd_hits_total", "who_e"), "detailed")
	out, err := testutil.GatherAndCount(f.reg, "actorlimitd_hits_total")
	require.NoError(t, err)
	assert.Equal(t, 5, out, "user, shadow and 3 detailed series: d and e took the places of a and b")
	mfs, err := f.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.NotContains(t, l.GetValue(), "secret-value", "no client value in a label")
			}
		}
	}
}

// mustVec finds the counter name{domain="web",descriptor=path}.
func mustVec(t *testing.T, reg *prometheus.Registry, name, path string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var d string
			for _, l := range m.GetLabel() {
				if l.GetName() == "descriptor" {
					d = l.GetValue()
				}
			}
			if d == path {
				c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
				c.Add(m.GetCounter().GetValue())
				return c
			}
		}
	}
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
}

func TestSetConfigKeepsCounts(t *testing.T) {
	f := newFixture(t, decisions, service.Options{})
	run(t, f, []step{{req: request("web", desc("user", "a")), want: []st{{false, 3, 2, 50}}}})
	cfg, err := service.Parse(map[string][]byte{"new.yaml": []byte(strings.Replace(decisions, "requests_per_unit: 3,", "requests_per_unit: 5,", 1))})
	require.NoError(t, err)
	f.srv.SetConfig(cfg)
	run(t, f, []step{{req: request("web", desc("user", "a")), want: []st{{false, 5, 3, 50}}}})
}

func TestHugeHitsAddend(t *testing.T) {
	f := newFixture(t, decisions+`
  - key: bucket
    rate_limit: {algorithm: gcra, unit: minute, requests_per_unit: 5}
`, service.Options{})
	for _, key := range []string{"user", "bucket"} {
		resp, err := f.srv.ShouldRateLimit(context.Background(), request("web", withHits(desc(key, "x"), math.MaxUint64)))
		require.NoError(t, err, key)
		assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.OverallCode, key)
		assert.Equal(t, uint32(0), resp.Statuses[0].LimitRemaining, key)
	}
	resp, err := f.srv.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "web", HitsAddend: math.MaxUint32,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", "y")}})
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.OverallCode)
}

func TestCanceledRequest(t *testing.T) {
	f := newFixture(t, decisions, service.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.srv.ShouldRateLimit(ctx, request("web", desc("user", "a")))
	require.Error(t, err)
	assert.Equal(t, codes.Canceled, status.Code(err))
}
