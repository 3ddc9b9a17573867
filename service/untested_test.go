package service_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/service"
)

// ruleOf is a domain "swap" whose rule for key k is rule.
func ruleOf(rule string) string {
	return "domain: swap\ndescriptors:\n  - key: k\n    rate_limit: " + rule + "\n"
}

// TestSetConfigUnderTraffic: configurations that change a rule's limit,
// algorithm and period are put in force while 8 goroutines ask about the
// rule (run with -race): every answer is whole, under one of the
// configurations, never an error.
func TestSetConfigUnderTraffic(t *testing.T) {
	rules := []string{
		"{unit: minute, requests_per_unit: 5}",
		"{unit: minute, requests_per_unit: 7}",
		"{algorithm: gcra, unit: minute, requests_per_unit: 11}",
		"{algorithm: sliding_window, period: 90s, requests_per_unit: 13}",
	}
	limits := map[uint32]bool{5: true, 7: true, 11: true, 13: true}
	cfgs := make([]*service.Config, len(rules))
	for i, r := range rules {
		c, err := service.Parse(map[string][]byte{"c.yaml": []byte(ruleOf(r))})
		require.NoError(t, err)
		cfgs[i] = c
	}
	f := newFixture(t, ruleOf(rules[0]), service.Options{})
	var (
		stop  atomic.Bool
		asked atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		bad   []string
	)
	for g := range 8 {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				resp, err := f.srv.ShouldRateLimit(context.Background(), request("swap", desc("k", strconv.Itoa(g))))
				asked.Add(1)
				var why string
				switch {
				case err != nil:
					why = err.Error()
				case len(resp.Statuses) != 1 || resp.Statuses[0].CurrentLimit == nil:
					why = fmt.Sprintf("no limit in %v", resp)
				case !limits[resp.Statuses[0].CurrentLimit.RequestsPerUnit]:
					why = fmt.Sprintf("limit %d in no configuration", resp.Statuses[0].CurrentLimit.RequestsPerUnit)
				}
				if why != "" {
					mu.Lock()
					bad = append(bad, why)
					mu.Unlock()
				}
			}
		})
	}
	// Swap until the askers have made 2000 requests among them, so that
	// the swaps overlap the requests however the goroutines are scheduled.
	for i := 0; asked.Load() < 2000; i++ {
		f.srv.SetConfig(cfgs[i%len(cfgs)])
		if i%50 == 0 {
			f.clock.Advance(time.Second)
		}
	}
	stop.Store(true)
	wg.Wait()
	assert.Empty(t, bad)
}

// TestRuleChangeStartsAfresh: as docs/service.md says, a key's counter is
// kept per (algorithm, period): a rule whose algorithm or period changes
// starts from nothing, one whose requests_per_unit changes keeps its count.
func TestRuleChangeStartsAfresh(t *testing.T) {
	f := newFixture(t, ruleOf("{unit: minute, requests_per_unit: 3}"), service.Options{})
	set := func(rule string) {
		c, err := service.Parse(map[string][]byte{"c.yaml": []byte(ruleOf(rule))})
		require.NoError(t, err)
		f.srv.SetConfig(c)
	}
	ask := func() (bool, uint32) {
		resp, err := f.srv.ShouldRateLimit(context.Background(), request("swap", desc("k", "x")))
		require.NoError(t, err)
		return resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT, resp.Statuses[0].LimitRemaining
	}
	steps := []struct {
		name string
		rule string // "" keeps the one in force
		over bool
		left uint32
	}{
		{"first", "", false, 2},
		{"second", "", false, 1},
		{"third", "", false, 0},
		{"over", "", true, 0},
		{"a higher limit keeps the count", "{unit: minute, requests_per_unit: 6}", false, 1},
		{"another algorithm starts afresh", "{algorithm: sliding_window, unit: minute, requests_per_unit: 6}", false, 5},
		{"its count then goes on", "", false, 4},
		{"another period starts afresh", "{algorithm: sliding_window, period: 2m, requests_per_unit: 6}", false, 5},
	}
	for i, s := range steps {
		if s.rule != "" {
			set(s.rule)
		}
		over, left := ask()
		assert.Equal(t, s.over, over, "step %d %s: over", i, s.name)
		assert.Equal(t, s.left, left, "step %d %s: remaining", i, s.name)
	}
}

// TestDeadlineExceeded: a request whose deadline has passed is answered
// DeadlineExceeded, as gRPC names it, not Unavailable.
func TestDeadlineExceeded(t *testing.T) {
	f := newFixture(t, decisions, service.Options{})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := f.srv.ShouldRateLimit(ctx, request("web", desc("user", "a")))
	require.Error(t, err)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
}

// TestLimitOverrideSeriesBounded: a limit override's metric label holds the
// request's keys, so it is a detailed series: past NewMetrics' bound (3 in
// the fixture), an override with new keys takes the place of the lightest
// series (counted in detailed_series_dropped_total), so the series stay
// within the bound.
func TestLimitOverrideSeriesBounded(t *testing.T) {
	f := newFixture(t, decisions, service.Options{})
	const n = 8
	for i := range n {
		d := desc(fmt.Sprintf("key%d", i), "v")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 10, Unit: typev3.RateLimitUnit_MINUTE}
		_, err := f.srv.ShouldRateLimit(context.Background(), request("web", d))
		require.NoError(t, err)
	}
	mfs, err := f.reg.Gather()
	require.NoError(t, err)
	series, hits := 0, 0.0
	for _, mf := range mfs {
		if mf.GetName() != "actorlimitd_hits_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "descriptor" && strings.HasPrefix(l.GetValue(), "limit_override") {
					series++
					hits += m.GetCounter().GetValue()
				}
			}
		}
	}
	assert.Equal(t, 3, series, "the bound's 3 detailed series")
	assert.Equal(t, float64(series), hits, "one hit in each series kept")
	assert.Equal(t, float64(n-3), counterValue(t, f, "actorlimitd_detailed_series_dropped_total"))
}

// counterValue returns the value of the unlabelled counter name.
func counterValue(t *testing.T, f *fixture, name string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// modelSeed is the seed of TestExtensionsAgainstModel: random each run,
// or ACTORLIMIT_MODEL_SEED's to replay a failure.
func modelSeed(t *testing.T) uint64 {
	if s := os.Getenv("ACTORLIMIT_MODEL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "ACTORLIMIT_MODEL_SEED")
		return v
	}
	return rand.Uint64()
}

// TestExtensionsAgainstModel: every algorithm through the service answers
// what Limiter.HitMany (and Peek, for hits_addend 0) answers on a limiter of
// its own on the same clock, over a random stream of hits and clock moves.
// A failure prints the seed; ACTORLIMIT_MODEL_SEED replays it.
func TestExtensionsAgainstModel(t *testing.T) {
	rules := []struct {
		key, yaml string
		policy    actorlimit.Policy
	}{
		{"fw", "{algorithm: fixed_window, period: 10s, requests_per_unit: 5}", actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 5, Period: 10 * time.Second}},
		{"sw", "{algorithm: sliding_window, period: 10s, requests_per_unit: 5}", actorlimit.Policy{Algorithm: actorlimit.SlidingWindow, Limit: 5, Period: 10 * time.Second}},
		{"sl", "{algorithm: sliding_log, period: 10s, requests_per_unit: 5}", actorlimit.Policy{Algorithm: actorlimit.SlidingLog, Limit: 5, Period: 10 * time.Second}},
		{"gcra", "{algorithm: gcra, period: 10s, requests_per_unit: 5, burst: 3}", actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 5, Period: 10 * time.Second, Burst: 3}},
		{"tb", "{algorithm: token_bucket, period: 10s, requests_per_unit: 5, burst: 7}", actorlimit.Policy{Algorithm: actorlimit.TokenBucket, Limit: 5, Period: 10 * time.Second, Burst: 7}},
		{"lb", "{algorithm: leaky_bucket, period: 10s, requests_per_unit: 5, burst: 2}", actorlimit.Policy{Algorithm: actorlimit.LeakyBucket, Limit: 5, Period: 10 * time.Second, Burst: 2}},
	}
	var yaml strings.Builder
	yaml.WriteString("domain: m\ndescriptors:\n")
	for _, r := range rules {
		fmt.Fprintf(&yaml, "  - key: %s\n    rate_limit: %s\n", r.key, r.yaml)
	}
	f := newFixture(t, yaml.String(), service.Options{})
	mclock := testkit.NewClock(start)
	model, err := actorlimit.Start(actorlimit.WithClock(mclock), actorlimit.WithJanitor(0, 0))
	require.NoError(t, err)
	t.Cleanup(func() { model.Close() })

	seed := modelSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ctx := context.Background()
	for i := range 3000 {
		if t.Failed() {
			break
		}
		step := time.Duration(rng.IntN(1500)) * time.Millisecond
		f.clock.Advance(step)
		mclock.Advance(step)
		r := rules[rng.IntN(len(rules))]
		value := strconv.Itoa(rng.IntN(3))
		hits := uint64(rng.IntN(4)) // 0: checked, not counted
		resp, err := f.srv.ShouldRateLimit(ctx, request("m", withHits(desc(r.key, value), hits)))
		require.NoError(t, err)
		var res actorlimit.Result
		if hits == 0 {
			res, err = model.Peek(ctx, r.key+"/"+value, r.policy)
		} else {
			out := []actorlimit.Result{{}}
			err = model.HitMany(ctx, []actorlimit.HitRequest{{ID: r.key + "/" + value, Policy: r.policy, N: int64(hits)}}, out)
			res = out[0]
		}
		require.NoError(t, err)
		var over bool
		var left int64
		if r.policy.Algorithm == actorlimit.FixedWindow {
			// envoy ratelimit's arithmetic: the window's count against the limit.
			over, left = res.Count > r.policy.Limit, max(0, r.policy.Limit-res.Count)
		} else {
			over, left = hits > 0 && !res.Allowed, res.Remaining
		}
		if over {
			left = 0
		}
		s := resp.Statuses[0]
		what := fmt.Sprintf("step %d (%s %s, %d hits, +%v): seed %d (ACTORLIMIT_MODEL_SEED=%d replays it)", i, r.key, value, hits, step, seed, seed)
		assert.Equal(t, over, s.Code == rlsv3.RateLimitResponse_OVER_LIMIT, "over: %s", what)
		assert.Equal(t, uint32(left), s.LimitRemaining, "remaining: %s", what)
		assert.Equal(t, res.ResetAfter, s.DurationUntilReset.AsDuration(), "reset: %s", what)
	}
}
