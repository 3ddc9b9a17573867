package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/metrics"
)

// fakeLimiter allows a group up to limit hits, then denies; err fails every
// call.
type fakeLimiter struct {
	mu     sync.Mutex
	counts map[string]int64
	err    error
}

func (f *fakeLimiter) HitMany(_ context.Context, hits []actorlimit.HitRequest, res []actorlimit.Result) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	for i, h := range hits {
		f.counts[h.ID]++
		c := f.counts[h.ID]
		res[i] = actorlimit.Result{Allowed: c <= h.Policy.Limit, Limit: h.Policy.Limit, Count: c, Remaining: max(0, h.Policy.Limit-c)}
	}
	return nil
}

type fakeStats struct {
	st  actorlimit.Stats
	err error
}

func (f *fakeStats) Stats(context.Context) (actorlimit.Stats, error) { return f.st, f.err }

func perHour(n int64) actorlimit.Policy {
	return actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: n, Period: time.Hour}
}

func TestCollectorExactText(t *testing.T) {
	c, err := metrics.New(metrics.Config{
		Clock:   testkit.NewSteppingClock(time.Unix(0, 0), 3*time.Microsecond),
		Buckets: []float64{1e-6, 1e-5},
	})
	require.NoError(t, err)
	lim := &fakeLimiter{counts: map[string]int64{}}
	m, err := httpadapter.New(c.Wrap(lim), httpadapter.Config{
		Rules: []httpadapter.Rule{
			{Name: "per-ip", GroupBy: []string{"ip"}, Policy: perHour(5)},
			{Name: "watch", Policy: perHour(2), Action: httpadapter.Action{Kind: httpadapter.Monitor}},
			{Name: "trap", When: []httpadapter.Condition{httpadapter.PathPrefix("/trap")}, Policy: perHour(1), Action: httpadapter.Action{Kind: httpadapter.Shadow}},
		},
		Observers: []httpadapter.Observer{c},
	})
	require.NoError(t, err)
	stats := &fakeStats{st: actorlimit.Stats{Entries: 3, Evictions: 7, Expired: 11, Restarts: 1, Sweeps: 4, SweepTime: 1500 * time.Millisecond, Queued: 2}}
	c.SetLimiter(stats)
	h := m.Handler(http200())
	for i := range 6 {
		path := "/"
		if i >= 4 {
			path = "/trap"
		}
		h.ServeHTTP(discard{}, request(path))
	}
	lim.mu.Lock()
	lim.err = errors.New("down")
	lim.mu.Unlock()
	h.ServeHTTP(discard{}, request("/"))

	// per-ip: 7 matched; hits 1..5 allowed, of them 4 and 5 near (>= 80%
	// of 5 used), the 6th denied, the 7th failed. watch: 1, 2 allowed (2 is
	// near), 3..6 monitored, 7 failed. trap: 1 allowed (near: all used),
	// 1 shadowed.
	const want = `
# HELP actorlimit_check_duration_seconds Duration of the checks made through the limiter wrapped by the collector (the middleware's and the application's own), in seconds.
# TYPE actorlimit_check_duration_seconds histogram
actorlimit_check_duration_seconds_bucket{le="1e-06"} 0
actorlimit_check_duration_seconds_bucket{le="1e-05"} 7
actorlimit_check_duration_seconds_bucket{le="+Inf"} 7
actorlimit_check_duration_seconds_sum 2.1000000000000002e-05
actorlimit_check_duration_seconds_count 7
# HELP actorlimit_check_errors_total Checks made through the wrapped limiter that failed.
# TYPE actorlimit_check_errors_total counter
actorlimit_check_errors_total 1
# HELP actorlimit_limiter_entries Keys the limiter holds.
# TYPE actorlimit_limiter_entries gauge
actorlimit_limiter_entries 3
# HELP actorlimit_limiter_evictions_total Entries evicted by the limiter's memory bound.
# TYPE actorlimit_limiter_evictions_total counter
actorlimit_limiter_evictions_total 7
# HELP actorlimit_limiter_expired_total Entries deleted by the limiter's sweeps.
# TYPE actorlimit_limiter_expired_total counter
actorlimit_limiter_expired_total 11
# HELP actorlimit_limiter_mailbox_queued Messages waiting in the limiter's mailbox when scraped.
# TYPE actorlimit_limiter_mailbox_queued gauge
actorlimit_limiter_mailbox_queued 2
# HELP actorlimit_limiter_restarts_total Restarts of the limiter actor.
# TYPE actorlimit_limiter_restarts_total counter
actorlimit_limiter_restarts_total 1
# HELP actorlimit_limiter_stats_errors_total Scrapes at which reading the limiter's statistics failed.
# TYPE actorlimit_limiter_stats_errors_total counter
actorlimit_limiter_stats_errors_total 0
# HELP actorlimit_limiter_sweep_seconds_total Time the sweeps took in all, in seconds, by the limiter's clock.
# TYPE actorlimit_limiter_sweep_seconds_total counter
actorlimit_limiter_sweep_seconds_total 1.5
# HELP actorlimit_limiter_sweeps_total Sweeps of expired entries finished.
# TYPE actorlimit_limiter_sweeps_total counter
actorlimit_limiter_sweeps_total 4
# HELP actorlimit_rule_allowed_total Requests within the rule's limit.
# TYPE actorlimit_rule_allowed_total counter
actorlimit_rule_allowed_total{action="block",rule="per-ip"} 5
actorlimit_rule_allowed_total{action="monitor",rule="watch"} 2
actorlimit_rule_allowed_total{action="shadow",rule="trap"} 1
# HELP actorlimit_rule_denied_total Requests over the limit of a block rule: denied.
# TYPE actorlimit_rule_denied_total counter
actorlimit_rule_denied_total{action="block",rule="per-ip"} 1
# HELP actorlimit_rule_errors_total Requests whose hit of the rule the limiter did not decide.
# TYPE actorlimit_rule_errors_total counter
actorlimit_rule_errors_total{action="block",rule="per-ip"} 1
actorlimit_rule_errors_total{action="monitor",rule="watch"} 1
actorlimit_rule_errors_total{action="shadow",rule="trap"} 0
# HELP actorlimit_rule_matched_total Requests the rule matched.
# TYPE actorlimit_rule_matched_total counter
actorlimit_rule_matched_total{action="block",rule="per-ip"} 7
actorlimit_rule_matched_total{action="monitor",rule="watch"} 7
actorlimit_rule_matched_total{action="shadow",rule="trap"} 2
# HELP actorlimit_rule_monitored_total Requests over the limit of a monitor rule: the rule would have denied them.
# TYPE actorlimit_rule_monitored_total counter
actorlimit_rule_monitored_total{action="monitor",rule="watch"} 4
# HELP actorlimit_rule_near_limit_total Allowed requests whose group had used at least the near-limit ratio of its limit.
# TYPE actorlimit_rule_near_limit_total counter
actorlimit_rule_near_limit_total{action="block",rule="per-ip"} 2
actorlimit_rule_near_limit_total{action="monitor",rule="watch"} 1
actorlimit_rule_near_limit_total{action="shadow",rule="trap"} 1
# HELP actorlimit_rule_shadowed_total Requests over the limit of a shadow rule: answered with a fake success.
# TYPE actorlimit_rule_shadowed_total counter
actorlimit_rule_shadowed_total{action="shadow",rule="trap"} 1
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want)))

	stats.err = errors.New("closed")
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP actorlimit_limiter_stats_errors_total Scrapes at which reading the limiter's statistics failed.
# TYPE actorlimit_limiter_stats_errors_total counter
actorlimit_limiter_stats_errors_total 1
`), "actorlimit_limiter_stats_errors_total", "actorlimit_limiter_entries"), "a failed read drops the limiter's values and is counted")
}

// TestEntriesUnknown proves that a store that cannot count its keys
// (Stats.Entries is actorlimit.EntriesUnknown) gives no entries sample, not
// a gauge at -1, while the limiter's other values are exported.
func TestEntriesUnknown(t *testing.T) {
	c, err := metrics.New(metrics.Config{})
	require.NoError(t, err)
	c.SetLimiter(&fakeStats{st: actorlimit.Stats{Entries: actorlimit.EntriesUnknown, Sweeps: 4}})
	n, err := testutil.GatherAndCount(registry(t, c), "actorlimit_limiter_entries")
	require.NoError(t, err)
	assert.Zero(t, n, "no entries sample")
	n, err = testutil.GatherAndCount(registry(t, c), "actorlimit_limiter_sweeps_total")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestCollectorStoreCounters(t *testing.T) {
	c, err := metrics.New(metrics.Config{})
	require.NoError(t, err)
	c.SetStore(metrics.StoreStatsFunc(func() metrics.StoreStats {
		return metrics.StoreStats{Errors: 2, Outages: 1, Fallbacks: 5, FailedOpen: 3, FailedClosed: 4, CheckErrors: 6, Cached: 7}
	}))
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP actorlimit_store_cached_denials_total Hits the networked store's over-limit cache answered denied without a round trip.
# TYPE actorlimit_store_cached_denials_total counter
actorlimit_store_cached_denials_total 7
# HELP actorlimit_store_check_errors_total Checks the networked store answered with an error of their own, decided alone by the outage mode.
# TYPE actorlimit_store_check_errors_total counter
actorlimit_store_check_errors_total 6
# HELP actorlimit_store_errors_total Round trips to the networked store that failed.
# TYPE actorlimit_store_errors_total counter
actorlimit_store_errors_total 2
# HELP actorlimit_store_failed_closed_total Checks denied because the networked store did not answer.
# TYPE actorlimit_store_failed_closed_total counter
actorlimit_store_failed_closed_total 4
# HELP actorlimit_store_failed_open_total Checks allowed because the networked store did not answer.
# TYPE actorlimit_store_failed_open_total counter
actorlimit_store_failed_open_total 3
# HELP actorlimit_store_fallbacks_total Checks decided by the local fallback table during outages.
# TYPE actorlimit_store_fallbacks_total counter
actorlimit_store_fallbacks_total 5
# HELP actorlimit_store_outages_total Times the networked store went from answering to not.
# TYPE actorlimit_store_outages_total counter
actorlimit_store_outages_total 1
`), "actorlimit_store_cached_denials_total", "actorlimit_store_check_errors_total", "actorlimit_store_errors_total", "actorlimit_store_failed_closed_total", "actorlimit_store_failed_open_total",
		"actorlimit_store_fallbacks_total", "actorlimit_store_outages_total"))
	c.SetStore(nil)
	n, err := testutil.GatherAndCount(registry(t, c), "actorlimit_store_errors_total")
	require.NoError(t, err)
	assert.Zero(t, n, "no store, no store metrics")
}

func TestCollectorClusterCounters(t *testing.T) {
	// Every field a different value, so a field wired to the wrong metric
	// shows.
	stats := metrics.ClusterStats{Fallbacks: 3, Rounds: 17, Requests: 29, Failures: 5,
		Outages: 2, Recoveries: 1, Rebuilds: 7, QueuedResets: 11,
		HandOffs: 13, Refusals: 19, TakeOvers: 23, Backups: 31, Rejected: 59,
		OwnerFallbacks: 37, Charged: 41, ChargesDropped: 43, Retries: 47, Deduplicated: 53,
		KeyMismatches: 61, RefusedResets: 67}
	tests := []struct {
		name, help string
		want       uint64
	}{
		{"cluster_fallbacks_total", "Hits the cluster member decided on its copy, within its share of the limit, while the owner could not be reached.", stats.Fallbacks},
		{"cluster_sync_rounds_total", "Sync rounds the cluster member ran.", stats.Rounds},
		{"cluster_sync_requests_total", "Sync requests the cluster member sent to owners.", stats.Requests},
		{"cluster_sync_failures_total", "Sync requests that failed; their hits are sent again.", stats.Failures},
		{"cluster_outages_total", "Times the cluster member went from reaching every owner to not reaching one.", stats.Outages},
		{"cluster_recoveries_total", "Times the cluster member went back to reaching every owner.", stats.Recoveries},
		{"cluster_rebuilds_total", "Times an owner was found to have started empty and was sent the member's part of the partition again.", stats.Rebuilds},
		{"cluster_queued_resets_total", "Resets kept for an owner that could not be reached, to be sent with a later sync.", stats.QueuedResets},
		{"cluster_hand_offs_total", "Partitions the cluster member took, with their state, from a live owner.", stats.HandOffs},
		{"cluster_refusals_total", "Requests the cluster member refused for a partition it did not hold.", stats.Refusals},
		{"cluster_take_overs_total", "Partitions the cluster member took from its backup of them after their owner died.", stats.TakeOvers},
		{"cluster_backups_total", "Partitions' states the cluster member sent to their backup member.", stats.Backups},
		{"cluster_rejected_total", "Messages from other members the cluster member rejected, changing nothing, because they failed its checks.", stats.Rejected},
		{"cluster_owner_fallbacks_total", "Owner-mode checks the cluster member decided on its share because their owner did not answer in time.", stats.OwnerFallbacks},
		{"cluster_owner_charged_total", "Owner-mode checks decided on the member's share that their owner has counted since.", stats.Charged},
		{"cluster_owner_charges_dropped_total", "Owner-mode checks decided on the member's share that were dropped, beyond the bound of those kept for owners.", stats.ChargesDropped},
		{"cluster_decide_retries_total", "Owner-mode requests the cluster member sent again, under the same id, for want of an answer.", stats.Retries},
		{"cluster_decide_deduplicated_total", "Owner-mode requests the cluster member, as an owner, answered from its first decision of them.", stats.Deduplicated},
		{"cluster_key_mismatches_total", "Requests the cluster member refused because their sender's partition key differs from its own.", stats.KeyMismatches},
		{"cluster_refused_resets_total", "Resets the cluster member refused because those kept for unreachable owners were at their bound.", stats.RefusedResets},
	}
	for _, ns := range []string{"", "app_rl"} {
		c, err := metrics.New(metrics.Config{Namespace: ns})
		require.NoError(t, err)
		if ns == "" {
			ns = metrics.DefaultNamespace
		}
		reg := registry(t, c)
		names := make([]string, len(tests))
		for i, tc := range tests {
			names[i] = ns + "_" + tc.name
		}
		n, err := testutil.GatherAndCount(reg, names...)
		require.NoError(t, err)
		require.Zero(t, n, "no cluster metrics before SetCluster")

		c.SetCluster(metrics.ClusterStatsFunc(func() metrics.ClusterStats { return stats }))
		for _, tc := range tests {
			t.Run(ns+"_"+tc.name, func(t *testing.T) {
				name := ns + "_" + tc.name
				want := fmt.Sprintf("# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, tc.help, name, name, tc.want)
				assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), name))
			})
		}
		problems, err := testutil.CollectAndLint(c)
		require.NoError(t, err)
		assert.Empty(t, problems)

		c.SetCluster(nil)
		n, err = testutil.GatherAndCount(reg, names...)
		require.NoError(t, err)
		assert.Zero(t, n, "no cluster, no cluster metrics")
	}
}

func registry(t *testing.T, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	return reg
}

// TestCollectorRegistersAndLints: every metric the collector can export
// (rules of each action, the limiter's, a store's, a cluster's) passes
// client_golang's lint, the checks of promtool check metrics: names,
// units, help texts, counter suffixes.
func TestCollectorRegistersAndLints(t *testing.T) {
	c, err := metrics.New(metrics.Config{Namespace: "app_rl"})
	require.NoError(t, err)
	for _, a := range []httpadapter.ActionKind{httpadapter.Block, httpadapter.Monitor, httpadapter.Shadow} {
		for _, o := range []httpadapter.Outcome{httpadapter.Within, httpadapter.Over, httpadapter.Failed} {
			c.Observe(httpadapter.Observation{Rule: "r", Action: a, Outcome: o, Result: actorlimit.Result{Allowed: o == httpadapter.Within, Limit: 10, Remaining: 1}})
		}
	}
	c.SetLimiter(&fakeStats{st: actorlimit.Stats{Entries: 1}})
	c.SetStore(metrics.StoreStatsFunc(func() metrics.StoreStats { return metrics.StoreStats{Errors: 1} }))
	c.SetCluster(metrics.ClusterStatsFunc(func() metrics.ClusterStats { return metrics.ClusterStats{Rounds: 1} }))
	lim := &fakeLimiter{counts: map[string]int64{}}
	require.NoError(t, c.Wrap(lim).HitMany(t.Context(), []actorlimit.HitRequest{{ID: "a", Policy: perHour(1)}}, make([]actorlimit.Result, 1)))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	assert.Empty(t, problems)
	n, err := testutil.GatherAndCount(reg, "app_rl_rule_matched_total", "app_rl_rule_near_limit_total",
		"app_rl_limiter_entries", "app_rl_store_errors_total", "app_rl_cluster_sync_rounds_total", "app_rl_check_duration_seconds")
	require.NoError(t, err)
	assert.Equal(t, 3+3+1+1+1+1, n)
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  metrics.Config
		want string
	}{
		{"ratio above 1", metrics.Config{NearLimitRatio: 1.5}, "NearLimitRatio 1.5"},
		{"negative ratio", metrics.Config{NearLimitRatio: -0.1}, "NearLimitRatio -0.1"},
		{"negative timeout", metrics.Config{StatsTimeout: -time.Second}, "StatsTimeout -1s"},
		{"namespace", metrics.Config{Namespace: "9lives"}, `Namespace "9lives"`},
		{"buckets", metrics.Config{Buckets: []float64{1, 1}}, "Buckets[1] 1 is not above"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := metrics.New(tc.cfg)
			require.ErrorIs(t, err, metrics.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWrapKeepsStarted(t *testing.T) {
	c, err := metrics.New(metrics.Config{})
	require.NoError(t, err)
	_, err = httpadapter.New(c.Wrap(new(actorlimit.Limiter)), httpadapter.Config{Rules: []httpadapter.Rule{{Name: "r", Policy: perHour(1)}}})
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig, "a limiter never started is refused through the wrapper too")
}

// TestNoStoreDependency: the collector links no store package, and so no
// store's client (go-redis), into its users' binaries; a store's counters
// come in as this package's StoreStats.
func TestNoStoreDependency(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		assert.NotContains(t, dep, "redis", "metrics depends on %s", dep)
		assert.NotContains(t, dep, "actorlimit/cluster", "metrics depends on %s", dep)
	}
}

// TestWrapLimiterTimesEveryCheck: the histogram times every check made
// through the wrapped limiter, the middleware's (HitMany) and the
// application's own (CheckRate, Hit, HitN), and counts the failed ones.
func TestWrapLimiterTimesEveryCheck(t *testing.T) {
	c, err := metrics.New(metrics.Config{
		Clock:   testkit.NewSteppingClock(time.Unix(0, 0), 3*time.Microsecond),
		Buckets: []float64{1e-6, 1e-5},
	})
	require.NoError(t, err)
	lim, err := actorlimit.Start()
	require.NoError(t, err)
	defer lim.Close()
	tl := c.WrapLimiter(lim)
	m, err := httpadapter.New(tl, httpadapter.Config{Rules: []httpadapter.Rule{{Name: "r", Policy: perHour(5)}}})
	require.NoError(t, err)
	calls := []struct {
		name string
		call func() error
		fail bool
	}{
		{"middleware", func() error { m.Handler(http200()).ServeHTTP(discard{}, request("/")); return nil }, false},
		{"CheckRate", func() error { _, err := tl.CheckRate("peer", 1000, 5); return err }, false},
		{"Hit", func() error { _, err := tl.Hit(t.Context(), "peer", perHour(5)); return err }, false},
		{"HitN", func() error { _, err := tl.HitN(t.Context(), "peer", perHour(5), 2); return err }, false},
		{"CheckRate refused", func() error { _, err := tl.CheckRate("peer", 0, 5); return err }, true},
		{"HitMany", func() error {
			return tl.HitMany(t.Context(), []actorlimit.HitRequest{{ID: "x", Policy: perHour(1)}}, make([]actorlimit.Result, 1))
		}, false},
	}
	failed := 0
	for i, tc := range calls {
		err := tc.call()
		if tc.fail {
			failed++
			require.Error(t, err, tc.name)
		} else {
			require.NoError(t, err, tc.name)
		}
		want := fmt.Sprintf(`
# HELP actorlimit_check_errors_total Checks made through the wrapped limiter that failed.
# TYPE actorlimit_check_errors_total counter
actorlimit_check_errors_total %d
`, failed)
		assert.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), "actorlimit_check_errors_total"), tc.name)
		n, err := testutil.GatherAndCount(registry(t, c), "actorlimit_check_duration_seconds")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		mfs, err := registry(t, c).Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "actorlimit_check_duration_seconds" {
				assert.Equal(t, uint64(i+1), mf.GetMetric()[0].GetHistogram().GetSampleCount(), "after %s", tc.name)
			}
		}
	}
	assert.True(t, tl.Started())
}
