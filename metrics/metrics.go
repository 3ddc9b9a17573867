package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// ErrInvalidConfig is wrapped by every error of [New]; test it with
// errors.Is.
var ErrInvalidConfig = errors.New("metrics: invalid configuration")

// ErrNotMade is the error a zero Collector, one not made by [New], gives
// when registered (prometheus.Registry.Register returns an error wrapping
// it): it has no metrics to describe.
var ErrNotMade = errors.New("metrics: the Collector was not made by metrics.New")

// notMade is the description a zero Collector gives.
var notMade = prometheus.NewInvalidDesc(ErrNotMade)

// Defaults used when Config leaves a field zero.
const (
	DefaultNamespace      = "actorlimit"
	DefaultNearLimitRatio = 0.8
	DefaultStatsTimeout   = time.Second
)

// DefaultBuckets are the check latency histogram's upper bounds, in
// seconds: 1 µs to about 1 s, doubling.
var DefaultBuckets = prometheus.ExponentialBuckets(1e-6, 2, 21)

// Clock tells the time; the collector reads it twice per limiter call made
// through [Collector.Wrap].
type Clock interface {
	Now() time.Time
}

// StatsSource is what [Collector.SetLimiter] reads at scrape time;
// *actorlimit.Limiter is one.
type StatsSource interface {
	Stats(ctx context.Context) (actorlimit.Stats, error)
}

// StoreStats are the counters of a networked store that
// [Collector.SetStore] exports. They only grow.
type StoreStats struct {
	// Errors is the number of round trips to the store that failed.
	Errors uint64
	// Outages is the number of times the store went from answering to not.
	Outages uint64
	// Fallbacks, FailedOpen and FailedClosed count the checks decided by a
	// local fallback, allowed, and denied because the store did not answer.
	Fallbacks, FailedOpen, FailedClosed uint64
	// CheckErrors counts the checks the store answered with an error of
	// their own (a key it cannot read), decided alone by the outage mode.
	CheckErrors uint64
	// Cached counts the hits a store's over-limit cache answered denied
	// without asking the store.
	Cached uint64
}

// StoreStatsSource is what [Collector.SetStore] reads at scrape time.
// StoreStats must be safe for concurrent use. It is declared here, in
// terms of this package's [StoreStats], so that metrics depends on no
// store: adapt a store's own statistics with a [StoreStatsFunc].
type StoreStatsSource interface {
	StoreStats() StoreStats
}

// StoreStatsFunc adapts a function to a [StoreStatsSource]. For a
// *redisstore.Store s:
//
//	col.SetStore(metrics.StoreStatsFunc(func() metrics.StoreStats {
//		st := s.Stats()
//		return metrics.StoreStats{Errors: st.Errors, Outages: st.Outages,
//			Fallbacks: st.Fallbacks, FailedOpen: st.FailedOpen, FailedClosed: st.FailedClosed,
//			CheckErrors: st.CheckErrors, Cached: st.Cached}
//	}))
type StoreStatsFunc func() StoreStats

// StoreStats returns f().
func (f StoreStatsFunc) StoreStats() StoreStats { return f() }

// ClusterStats are the counters of a cluster member's checks and syncs
// that [Collector.SetCluster] exports, with the meaning of the cluster
// package's SyncStats. They only grow.
type ClusterStats struct {
	// Fallbacks is the hits decided while their partition's owner could
	// not be reached.
	Fallbacks uint64
	// Rounds is the sync rounds run; Requests the requests they sent to
	// owners; Failures those that failed.
	Rounds, Requests, Failures uint64
	// Outages is the times the member went from reaching every owner to
	// not reaching one; Recoveries the times it went back.
	Outages, Recoveries uint64
	// Rebuilds is the times an owner was found to have started empty and
	// was sent the member's part of the partition again.
	Rebuilds uint64
	// QueuedResets is the resets kept for an owner that could not be
	// reached, to be sent with a later sync.
	QueuedResets uint64
	// HandOffs is the partitions the member took from a live owner;
	// Refusals the requests it refused for a partition it did not hold;
	// TakeOvers the partitions it took from its backup of them after their
	// owner died; Backups the partitions' states it sent to their backup.
	HandOffs, Refusals, TakeOvers, Backups uint64
	// Rejected is the messages from other members the member rejected,
	// changing nothing, because they failed its checks.
	Rejected uint64
	// OwnerFallbacks is the Owner-mode checks the member decided on its
	// share because their owner did not answer in time; Charged those of
	// them the owner has counted since; ChargesDropped those dropped,
	// beyond the bound of the checks kept for owners.
	OwnerFallbacks, Charged, ChargesDropped uint64
	// Retries is the Owner-mode requests the member sent again, under the
	// same id, for want of an answer; Deduplicated the requests it answered,
	// as an owner, from its first decision of them.
	Retries, Deduplicated uint64
	// KeyMismatches is the requests the member refused because their
	// sender's partition key differs; RefusedResets the resets it refused
	// because those kept for unreachable owners were at their bound.
	KeyMismatches, RefusedResets uint64
}

// ClusterStatsSource is what [Collector.SetCluster] reads at scrape time.
// ClusterStats must be safe for concurrent use. It is declared here, in
// terms of this package's [ClusterStats], so that metrics depends on no
// backend: adapt a cluster member's SyncStats with a [ClusterStatsFunc].
type ClusterStatsSource interface {
	ClusterStats() ClusterStats
}

// ClusterStatsFunc adapts a function to a [ClusterStatsSource]. For a
// *cluster.Member m:
//
//	col.SetCluster(metrics.ClusterStatsFunc(func() metrics.ClusterStats {
//		s := m.SyncStats()
//		return metrics.ClusterStats{Fallbacks: s.Fallbacks,
//			Rounds: s.Rounds, Requests: s.Requests, Failures: s.Failures,
//			Outages: s.Outages, Recoveries: s.Recoveries, Rebuilds: s.Rebuilds,
//			QueuedResets: s.QueuedResets, HandOffs: s.HandOffs, Refusals: s.Refusals,
//			TakeOvers: s.TakeOvers, Backups: s.Backups, Rejected: s.Rejected,
//			OwnerFallbacks: s.OwnerFallbacks, Charged: s.Charged, ChargesDropped: s.ChargesDropped,
//			Retries: s.Retries, Deduplicated: s.Deduplicated,
//			KeyMismatches: s.KeyMismatches, RefusedResets: s.RefusedResets}
//	}))
type ClusterStatsFunc func() ClusterStats

// ClusterStats returns f().
func (f ClusterStatsFunc) ClusterStats() ClusterStats { return f() }

// Config configures a [Collector]. The zero Config is valid.
type Config struct {
	// Namespace prefixes every metric name (default "actorlimit").
	Namespace string
	// NearLimitRatio: an allowed request counts as near the limit when the
	// group has used at least this share of its limit, (Limit-Remaining) /
	// Limit >= NearLimitRatio. In (0, 1]; default 0.8.
	NearLimitRatio float64
	// Buckets are the check latency histogram's upper bounds in seconds,
	// increasing (default DefaultBuckets).
	Buckets []float64
	// Clock times the limiter calls (default the system clock).
	Clock Clock
	// StatsTimeout bounds the limiter's Stats call at each scrape (default
	// 1 s).
	StatsTimeout time.Duration
}

// systemClock is the default Clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Collector is a prometheus.Collector of a middleware's rules and a
// limiter. Its methods are safe for concurrent use. Make it with [New]: a
// zero Collector counts nothing, its wrapped limiters pass calls through
// untimed, and registering it fails with [ErrNotMade].
type Collector struct {
	near    float64
	clock   Clock
	timeout time.Duration

	rules sync.Map // ruleKey -> *ruleCounters

	latency     prometheus.Histogram
	checkErrors atomic.Uint64
	statsErrors atomic.Uint64
	lim         atomic.Pointer[StatsSource]
	store       atomic.Pointer[StoreStatsSource]
	cluster     atomic.Pointer[ClusterStatsSource]

	matched, allowed, denied, monitored, shadowed, nearLimit, ruleErrors            *prometheus.Desc
	checkErrorsDesc, entries, evictions, expired, queued, restarts, statsErrorsDesc *prometheus.Desc
	sweeps, sweepSeconds                                                            *prometheus.Desc
	storeErrors, storeOutages, storeFallbacks, storeOpen, storeClosed               *prometheus.Desc
	storeCheckErrors                                                                *prometheus.Desc
	storeCached                                                                     *prometheus.Desc
	clusterFallbacks, clusterRounds, clusterRequests, clusterFailures               *prometheus.Desc
	clusterOutages, clusterRecoveries, clusterRebuilds, clusterQueuedResets         *prometheus.Desc
	clusterHandOffs, clusterRefusals, clusterTakeOvers, clusterBackups              *prometheus.Desc
	clusterRejected                                                                 *prometheus.Desc
	clusterOwnerFallbacks, clusterCharged, clusterChargesDropped                    *prometheus.Desc
	clusterRetries, clusterDeduplicated                                             *prometheus.Desc
	clusterKeyMismatches, clusterRefusedResets                                      *prometheus.Desc
}

type ruleKey struct {
	rule   string
	action httpadapter.ActionKind
}

type ruleCounters struct {
	matched, allowed, over, near, errors atomic.Uint64
}

// New returns a collector configured by cfg, or an error naming the field
// that is wrong.
func New(cfg Config) (*Collector, error) {
	ns := cfg.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	near := cfg.NearLimitRatio
	if near == 0 {
		near = DefaultNearLimitRatio
	}
	buckets := cfg.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	switch {
	case math.IsNaN(near) || near <= 0 || near > 1:
		return nil, fmt.Errorf("%w: NearLimitRatio %v is not in (0, 1]", ErrInvalidConfig, cfg.NearLimitRatio)
	case cfg.StatsTimeout < 0:
		return nil, fmt.Errorf("%w: StatsTimeout %v is negative", ErrInvalidConfig, cfg.StatsTimeout)
	case !validNamespace(ns):
		return nil, fmt.Errorf("%w: Namespace %q cannot start a metric name", ErrInvalidConfig, ns)
	}
	for i := 1; i < len(buckets); i++ {
		if !(buckets[i] > buckets[i-1]) {
			return nil, fmt.Errorf("%w: Buckets[%d] %v is not above Buckets[%d] %v", ErrInvalidConfig, i, buckets[i], i-1, buckets[i-1])
		}
	}
	c := &Collector{near: near, clock: cfg.Clock, timeout: cfg.StatsTimeout}
	if c.clock == nil {
		c.clock = systemClock{}
	}
	if c.timeout == 0 {
		c.timeout = DefaultStatsTimeout
	}
	c.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: ns, Name: "check_duration_seconds",
		Help:    "Duration of the checks made through the limiter wrapped by the collector (the middleware's and the application's own), in seconds.",
		Buckets: buckets,
	})
	ruleDesc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(ns+"_rule_"+name, help, []string{"rule", "action"}, nil)
	}
	c.matched = ruleDesc("matched_total", "Requests the rule matched.")
	c.allowed = ruleDesc("allowed_total", "Requests within the rule's limit.")
	c.denied = ruleDesc("denied_total", "Requests over the limit of a block rule: denied.")
	c.monitored = ruleDesc("monitored_total", "Requests over the limit of a monitor rule: the rule would have denied them.")
	c.shadowed = ruleDesc("shadowed_total", "Requests over the limit of a shadow rule: answered with a fake success.")
	c.nearLimit = ruleDesc("near_limit_total", "Allowed requests whose group had used at least the near-limit ratio of its limit.")
	c.ruleErrors = ruleDesc("errors_total", "Requests whose hit of the rule the limiter did not decide.")
	c.checkErrorsDesc = prometheus.NewDesc(ns+"_check_errors_total", "Checks made through the wrapped limiter that failed.", nil, nil)
	c.entries = prometheus.NewDesc(ns+"_limiter_entries", "Keys the limiter holds.", nil, nil)
	c.evictions = prometheus.NewDesc(ns+"_limiter_evictions_total", "Entries evicted by the limiter's memory bound.", nil, nil)
	c.expired = prometheus.NewDesc(ns+"_limiter_expired_total", "Entries deleted by the limiter's sweeps.", nil, nil)
	c.queued = prometheus.NewDesc(ns+"_limiter_mailbox_queued", "Messages waiting in the limiter's mailbox when scraped.", nil, nil)
	c.restarts = prometheus.NewDesc(ns+"_limiter_restarts_total", "Restarts of the limiter actor.", nil, nil)
	c.sweeps = prometheus.NewDesc(ns+"_limiter_sweeps_total", "Sweeps of expired entries finished.", nil, nil)
	c.sweepSeconds = prometheus.NewDesc(ns+"_limiter_sweep_seconds_total", "Time the sweeps took in all, in seconds, by the limiter's clock.", nil, nil)
	c.statsErrorsDesc = prometheus.NewDesc(ns+"_limiter_stats_errors_total", "Scrapes at which reading the limiter's statistics failed.", nil, nil)
	c.storeErrors = prometheus.NewDesc(ns+"_store_errors_total", "Round trips to the networked store that failed.", nil, nil)
	c.storeOutages = prometheus.NewDesc(ns+"_store_outages_total", "Times the networked store went from answering to not.", nil, nil)
	c.storeFallbacks = prometheus.NewDesc(ns+"_store_fallbacks_total", "Checks decided by the local fallback table during outages.", nil, nil)
	c.storeOpen = prometheus.NewDesc(ns+"_store_failed_open_total", "Checks allowed because the networked store did not answer.", nil, nil)
	c.storeClosed = prometheus.NewDesc(ns+"_store_failed_closed_total", "Checks denied because the networked store did not answer.", nil, nil)
	c.storeCached = prometheus.NewDesc(ns+"_store_cached_denials_total", "Hits the networked store's over-limit cache answered denied without a round trip.", nil, nil)
	c.storeCheckErrors = prometheus.NewDesc(ns+"_store_check_errors_total", "Checks the networked store answered with an error of their own, decided alone by the outage mode.", nil, nil)
	clusterDesc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(ns+"_cluster_"+name, help, nil, nil)
	}
	c.clusterFallbacks = clusterDesc("fallbacks_total", "Hits the cluster member decided on its copy, within its share of the limit, while the owner could not be reached.")
	c.clusterRounds = clusterDesc("sync_rounds_total", "Sync rounds the cluster member ran.")
	c.clusterRequests = clusterDesc("sync_requests_total", "Sync requests the cluster member sent to owners.")
	c.clusterFailures = clusterDesc("sync_failures_total", "Sync requests that failed; their hits are sent again.")
	c.clusterOutages = clusterDesc("outages_total", "Times the cluster member went from reaching every owner to not reaching one.")
	c.clusterRecoveries = clusterDesc("recoveries_total", "Times the cluster member went back to reaching every owner.")
	c.clusterRebuilds = clusterDesc("rebuilds_total", "Times an owner was found to have started empty and was sent the member's part of the partition again.")
	c.clusterQueuedResets = clusterDesc("queued_resets_total", "Resets kept for an owner that could not be reached, to be sent with a later sync.")
	c.clusterHandOffs = clusterDesc("hand_offs_total", "Partitions the cluster member took, with their state, from a live owner.")
	c.clusterRefusals = clusterDesc("refusals_total", "Requests the cluster member refused for a partition it did not hold.")
	c.clusterTakeOvers = clusterDesc("take_overs_total", "Partitions the cluster member took from its backup of them after their owner died.")
	c.clusterBackups = clusterDesc("backups_total", "Partitions' states the cluster member sent to their backup member.")
	c.clusterRejected = clusterDesc("rejected_total", "Messages from other members the cluster member rejected, changing nothing, because they failed its checks.")
	c.clusterOwnerFallbacks = clusterDesc("owner_fallbacks_total", "Owner-mode checks the cluster member decided on its share because their owner did not answer in time.")
	c.clusterCharged = clusterDesc("owner_charged_total", "Owner-mode checks decided on the member's share that their owner has counted since.")
	c.clusterChargesDropped = clusterDesc("owner_charges_dropped_total", "Owner-mode checks decided on the member's share that were dropped, beyond the bound of those kept for owners.")
	c.clusterRetries = clusterDesc("decide_retries_total", "Owner-mode requests the cluster member sent again, under the same id, for want of an answer.")
	c.clusterDeduplicated = clusterDesc("decide_deduplicated_total", "Owner-mode requests the cluster member, as an owner, answered from its first decision of them.")
	c.clusterKeyMismatches = clusterDesc("key_mismatches_total", "Requests the cluster member refused because their sender's partition key differs from its own.")
	c.clusterRefusedResets = clusterDesc("refused_resets_total", "Resets the cluster member refused because those kept for unreachable owners were at their bound.")
	return c, nil
}

var _ httpadapter.Observer = (*Collector)(nil)
var _ prometheus.Collector = (*Collector)(nil)

// Observe counts one rule's decision; it is the [httpadapter.Observer]
// method, and allocates only the first time it sees a rule.
func (c *Collector) Observe(o httpadapter.Observation) {
	if c.latency == nil {
		return // a zero Collector exports nothing
	}
	k := ruleKey{o.Rule, o.Action}
	v, ok := c.rules.Load(k)
	if !ok {
		v, _ = c.rules.LoadOrStore(k, new(ruleCounters))
	}
	rc := v.(*ruleCounters)
	rc.matched.Add(1)
	switch o.Outcome {
	case httpadapter.Within:
		rc.allowed.Add(1)
		if r := o.Result; r.Limit > 0 && float64(r.Limit-r.Remaining) >= c.near*float64(r.Limit) {
			rc.near.Add(1)
		}
	case httpadapter.Over:
		rc.over.Add(1)
	default:
		rc.errors.Add(1)
	}
}

// SetLimiter makes the collector read l's statistics at each scrape; nil
// stops it.
func (c *Collector) SetLimiter(l StatsSource) {
	if l == nil {
		c.lim.Store(nil)
		return
	}
	c.lim.Store(&l)
}

// SetStore makes the collector read s's counters at each scrape (errors,
// outages, fallbacks, failed open and closed); nil stops it.
func (c *Collector) SetStore(s StoreStatsSource) {
	if s == nil {
		c.store.Store(nil)
		return
	}
	c.store.Store(&s)
}

// SetCluster makes the collector read a cluster member's counters at each
// scrape (local checks, fallbacks, sync rounds, requests and failures,
// outages, recoveries, rebuilds, queued resets); nil stops it.
func (c *Collector) SetCluster(s ClusterStatsSource) {
	if s == nil {
		c.cluster.Store(nil)
		return
	}
	c.cluster.Store(&s)
}

// Wrap returns a limiter that calls lim and records each call's duration
// and failure. Give the result to httpadapter.New. [Collector.WrapLimiter]
// does the same for the other checks of a limiter (CheckRate, Hit, HitN)
// made outside the middleware.
func (c *Collector) Wrap(lim httpadapter.Limiter) httpadapter.Limiter {
	return &timed{lim: lim, c: c}
}

// Checker is what [Collector.WrapLimiter] times: the checks of
// *actorlimit.Limiter, which is one.
type Checker interface {
	httpadapter.Limiter
	Hit(ctx context.Context, id string, p actorlimit.Policy) (actorlimit.Result, error)
	HitN(ctx context.Context, id string, p actorlimit.Policy, n int64) (actorlimit.Result, error)
	CheckRate(id string, scaleMs, limit int64) (actorlimit.Result, error)
}

// TimedLimiter is a [Checker] whose every check the collector that made it
// times in actorlimit_check_duration_seconds, and counts in
// actorlimit_check_errors_total when it fails. Make it with
// [Collector.WrapLimiter]; it is safe for concurrent use as its limiter
// is.
type TimedLimiter struct {
	timed
	lim Checker
}

var _ Checker = (*TimedLimiter)(nil)

// WrapLimiter returns lim with its checks timed: give it to httpadapter.New
// and make the application's own checks (CheckRate, Hit, HitN) through it
// too, so that the histogram holds every check of the process.
func (c *Collector) WrapLimiter(lim Checker) *TimedLimiter {
	return &TimedLimiter{timed: timed{lim: lim, c: c}, lim: lim}
}

// Hit calls the limiter's Hit and records the call.
func (t *TimedLimiter) Hit(ctx context.Context, id string, p actorlimit.Policy) (actorlimit.Result, error) {
	start := t.c.now()
	res, err := t.lim.Hit(ctx, id, p)
	t.c.record(start, err)
	return res, err
}

// HitN calls the limiter's HitN and records the call.
func (t *TimedLimiter) HitN(ctx context.Context, id string, p actorlimit.Policy, n int64) (actorlimit.Result, error) {
	start := t.c.now()
	res, err := t.lim.HitN(ctx, id, p, n)
	t.c.record(start, err)
	return res, err
}

// CheckRate calls the limiter's CheckRate and records the call.
func (t *TimedLimiter) CheckRate(id string, scaleMs, limit int64) (actorlimit.Result, error) {
	start := t.c.now()
	res, err := t.lim.CheckRate(id, scaleMs, limit)
	t.c.record(start, err)
	return res, err
}

// timed is the limiter Wrap returns.
type timed struct {
	lim httpadapter.Limiter
	c   *Collector
}

// HitMany calls the wrapped limiter and records the call.
func (t *timed) HitMany(ctx context.Context, hits []actorlimit.HitRequest, results []actorlimit.Result) error {
	start := t.c.now()
	err := t.lim.HitMany(ctx, hits, results)
	t.c.record(start, err)
	return err
}

// Started reports whether the wrapped limiter was started, when it can
// tell (httpadapter.New refuses one that was not).
func (t *timed) Started() bool {
	s, ok := t.lim.(interface{ Started() bool })
	return !ok || s.Started()
}

// SharedCounts reports whether the wrapped limiter's counts are shared or
// kept, when it can tell (httpadapter.New then wants a SecretKey).
func (t *timed) SharedCounts() bool {
	s, ok := t.lim.(interface{ SharedCounts() bool })
	return ok && s.SharedCounts()
}

// now reads the clock, when the collector has one (a zero Collector has
// none, and records nothing).
func (c *Collector) now() time.Time {
	if c.clock == nil {
		return time.Time{}
	}
	return c.clock.Now()
}

// record records a limiter call that began at start and returned err.
func (c *Collector) record(start time.Time, err error) {
	if c.latency == nil {
		return // a zero Collector, not made by New
	}
	c.latency.Observe(c.clock.Now().Sub(start).Seconds())
	if err != nil {
		c.checkErrors.Add(1)
	}
}

// Describe sends the descriptions of every metric the collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.latency == nil {
		ch <- notMade
		return
	}
	for _, d := range []*prometheus.Desc{c.matched, c.allowed, c.denied, c.monitored, c.shadowed, c.nearLimit,
		c.ruleErrors, c.checkErrorsDesc, c.entries, c.evictions, c.expired, c.queued, c.restarts, c.statsErrorsDesc, c.sweeps, c.sweepSeconds,
		c.storeErrors, c.storeOutages, c.storeFallbacks, c.storeOpen, c.storeClosed, c.storeCheckErrors, c.storeCached,
		c.clusterFallbacks, c.clusterRounds, c.clusterRequests, c.clusterFailures,
		c.clusterOutages, c.clusterRecoveries, c.clusterRebuilds, c.clusterQueuedResets,
		c.clusterHandOffs, c.clusterRefusals, c.clusterTakeOvers, c.clusterBackups,
		c.clusterRejected,
		c.clusterOwnerFallbacks, c.clusterCharged, c.clusterChargesDropped, c.clusterRetries, c.clusterDeduplicated,
		c.clusterKeyMismatches, c.clusterRefusedResets} {
		ch <- d
	}
	c.latency.Describe(ch)
}

// Collect sends the current values; it reads the limiter's statistics
// (bounded by Config.StatsTimeout).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.latency == nil {
		ch <- prometheus.NewInvalidMetric(notMade, ErrNotMade)
		return
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	c.rules.Range(func(k, v any) bool {
		key, rc := k.(ruleKey), v.(*ruleCounters)
		l := []string{key.rule, key.action.String()}
		counter(c.matched, rc.matched.Load(), l...)
		counter(c.allowed, rc.allowed.Load(), l...)
		switch key.action {
		case httpadapter.Block:
			counter(c.denied, rc.over.Load(), l...)
		case httpadapter.Monitor:
			counter(c.monitored, rc.over.Load(), l...)
		case httpadapter.Shadow:
			counter(c.shadowed, rc.over.Load(), l...)
		}
		counter(c.nearLimit, rc.near.Load(), l...)
		counter(c.ruleErrors, rc.errors.Load(), l...)
		return true
	})
	c.latency.Collect(ch)
	counter(c.checkErrorsDesc, c.checkErrors.Load())
	if p := c.lim.Load(); p != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		st, err := (*p).Stats(ctx)
		cancel()
		if err != nil {
			c.statsErrors.Add(1)
		} else {
			if st.Entries >= 0 { // actorlimit.EntriesUnknown: no sample
				ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(st.Entries))
			}
			counter(c.evictions, st.Evictions)
			counter(c.expired, st.Expired)
			ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(st.Queued))
			counter(c.restarts, uint64(max(st.Restarts, 0)))
			counter(c.sweeps, st.Sweeps)
			ch <- prometheus.MustNewConstMetric(c.sweepSeconds, prometheus.CounterValue, st.SweepTime.Seconds())
		}
		counter(c.statsErrorsDesc, c.statsErrors.Load())
	}
	if p := c.store.Load(); p != nil {
		st := (*p).StoreStats()
		counter(c.storeErrors, st.Errors)
		counter(c.storeOutages, st.Outages)
		counter(c.storeFallbacks, st.Fallbacks)
		counter(c.storeOpen, st.FailedOpen)
		counter(c.storeClosed, st.FailedClosed)
		counter(c.storeCheckErrors, st.CheckErrors)
		counter(c.storeCached, st.Cached)
	}
	if p := c.cluster.Load(); p != nil {
		st := (*p).ClusterStats()
		counter(c.clusterFallbacks, st.Fallbacks)
		counter(c.clusterRounds, st.Rounds)
		counter(c.clusterRequests, st.Requests)
		counter(c.clusterFailures, st.Failures)
		counter(c.clusterOutages, st.Outages)
		counter(c.clusterRecoveries, st.Recoveries)
		counter(c.clusterRebuilds, st.Rebuilds)
		counter(c.clusterQueuedResets, st.QueuedResets)
		counter(c.clusterHandOffs, st.HandOffs)
		counter(c.clusterRefusals, st.Refusals)
		counter(c.clusterTakeOvers, st.TakeOvers)
		counter(c.clusterBackups, st.Backups)
		counter(c.clusterRejected, st.Rejected)
		counter(c.clusterOwnerFallbacks, st.OwnerFallbacks)
		counter(c.clusterCharged, st.Charged)
		counter(c.clusterChargesDropped, st.ChargesDropped)
		counter(c.clusterRetries, st.Retries)
		counter(c.clusterDeduplicated, st.Deduplicated)
		counter(c.clusterKeyMismatches, st.KeyMismatches)
		counter(c.clusterRefusedResets, st.RefusedResets)
	}
}

// validNamespace reports whether ns can start a metric name: an ASCII
// letter or '_', then letters, digits and '_'.
func validNamespace(ns string) bool {
	for i := 0; i < len(ns); i++ {
		b := ns[i]
		letter := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '_'
		if !letter && (i == 0 || b < '0' || b > '9') {
			return false
		}
	}
	return ns != ""
}
