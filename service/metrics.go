package service

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxDetailedSeries is Metrics' default bound on the label values
// that hold a request's values (detailed_metric and value_to_metric rules).
const DefaultMaxDetailedSeries = 1000

// Metrics are the service's Prometheus metrics, per domain and descriptor
// path (the rule's keys and the file's values: no client's value, except
// for detailed_metric and value_to_metric rules; a secret value, or a
// client's value longer than Bounds.ValueLength, is written as its digest,
// see MaxStoredID).
//
// The detailed series are at most NewMetrics' maxDetailed, and the budget
// keeps the busiest, by the space-saving scheme of Metwally, Agrawal and
// El Abbadi (2005): each series has a weight, the hits counted under it;
// a new series takes the place of the lightest one, whose metric series
// are deleted, and starts at that weight plus its own hits. A series whose
// hits are more than 1/maxDetailed of all the detailed hits since the
// start is never evicted, so a client that sends many values once cannot
// push out the values that get the traffic; it only churns the lightest
// places. detailed_series_dropped_total counts the series evicted.
//
// The metrics:
//
//	actorlimitd_hits_total{domain,descriptor}          hits asked for (hits_addend summed)
//	actorlimitd_over_limit_total{domain,descriptor}    hits over the limit
//	actorlimitd_near_limit_total{domain,descriptor}    hits allowed past NearLimitRatio (80%) of the limit
//	actorlimitd_within_limit_total{domain,descriptor}  hits within the limit
//	actorlimitd_shadow_mode_total{domain,descriptor}   hits over the limit of a shadow_mode rule, answered OK
//	actorlimitd_over_limit_with_local_cache_total{domain,descriptor}
//	                                                   hits over the limit answered by the store's local
//	                                                   over-limit cache, without a round trip (also in over_limit)
//	actorlimitd_requests_total{code}                   requests answered: ok, over_limit, invalid, error
//	actorlimitd_request_duration_seconds               histogram of ShouldRateLimit's time
//	actorlimitd_config_loads_total{result}             configurations loaded: success, error
//	actorlimitd_config_rules                           rate_limit entries in the configuration in force
//	actorlimitd_unknown_domain_total                   descriptors of a domain the configuration lacks
//	actorlimitd_detailed_series_dropped_total          detailed series evicted for a new one
//	actorlimitd_refused_total{reason}                  requests refused (InvalidArgument), by the bound passed:
//	                                                   domain, no_descriptors, descriptors, entries,
//	                                                   key_length, override_unit
//	actorlimitd_hits_addend_clamped_total              descriptors whose hits_addend was over Options.MaxHitsAddend
//
// A Metrics is safe for concurrent use.
type Metrics struct {
	hits, over, near, within, shadow *prometheus.CounterVec
	overLocal                        *prometheus.CounterVec
	requests, loads                  *prometheus.CounterVec
	duration                         prometheus.Histogram
	rules                            prometheus.Gauge
	unknownDomain, dropped, clamped  prometheus.Counter
	refused                          *prometheus.CounterVec

	// codes are requests' counters by outcome, resolved once; refusals
	// by reason.
	codes, refusals map[string]prometheus.Counter

	maxDetailed int
	// series maps a seriesKey to its *ruleCounters: read without a lock,
	// written under mu.
	series sync.Map
	mu     sync.Mutex
	// detailed are the detailed series, at most maxDetailed (under mu).
	detailed []*ruleCounters
}

type seriesKey struct{ domain, path string }

type ruleCounters struct {
	hits, over, near, within, shadow prometheus.Counter
	overLocal                        prometheus.Counter
	// key and weight are a detailed series' (space-saving's count).
	key    seriesKey
	weight atomic.Int64
}

// NewMetrics makes the service's metrics and registers them with reg
// (nil: not registered). maxDetailed bounds the detailed label values
// (0: DefaultMaxDetailedSeries).
func NewMetrics(reg prometheus.Registerer, maxDetailed int) (*Metrics, error) {
	if maxDetailed <= 0 {
		maxDetailed = DefaultMaxDetailedSeries
	}
	labels := []string{"domain", "descriptor"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "actorlimitd", Name: name, Help: help}, labels)
	}
	m := &Metrics{
		hits:   counter("hits_total", "Hits asked for (hits_addend summed), per domain and descriptor path."),
		over:   counter("over_limit_total", "Hits over the limit."),
		near:   counter("near_limit_total", "Hits allowed past 80% of the limit."),
		within: counter("within_limit_total", "Hits within the limit."),
		shadow: counter("shadow_mode_total", "Hits over the limit of a shadow_mode rule, answered OK."),
		overLocal: counter("over_limit_with_local_cache_total",
			"Hits over the limit answered by the store's local over-limit cache, without a round trip (counted in over_limit_total too)."),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "actorlimitd", Name: "requests_total",
			Help: "ShouldRateLimit requests answered, by outcome: ok, over_limit, invalid, error."}, []string{"code"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "actorlimitd", Name: "config_loads_total",
			Help: "Configurations loaded, by result: success, error."}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "actorlimitd", Name: "request_duration_seconds",
			Help: "ShouldRateLimit's time, in seconds.", Buckets: prometheus.ExponentialBuckets(10e-6, 2, 18)}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "actorlimitd", Name: "config_rules",
			Help: "rate_limit entries in the configuration in force."}),
		unknownDomain: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "actorlimitd", Name: "unknown_domain_total",
			Help: "Descriptors of a domain that the configuration lacks."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "actorlimitd", Name: "detailed_series_dropped_total",
			Help: "Series of detailed_metric and value_to_metric rules evicted for a new one, the bound on detailed series reached (the busiest are kept)."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "actorlimitd", Name: "refused_total",
			Help: "Requests refused with InvalidArgument, by the bound of the operator's configuration they passed."}, []string{"reason"}),
		clamped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "actorlimitd", Name: "hits_addend_clamped_total",
			Help: "Descriptors whose hits_addend was over -max-hits-addend, counted as that bound."}),
		maxDetailed: maxDetailed,
		codes:       map[string]prometheus.Counter{},
		refusals:    map[string]prometheus.Counter{},
	}
	for _, c := range []string{"ok", "over_limit", "invalid", "error"} {
		m.codes[c] = m.requests.WithLabelValues(c)
	}
	for _, r := range refusedReasons {
		m.refusals[r] = m.refused.WithLabelValues(r)
	}
	m.loads.WithLabelValues("success")
	m.loads.WithLabelValues("error")
	if reg != nil {
		for _, c := range []prometheus.Collector{m.hits, m.over, m.near, m.within, m.shadow, m.overLocal, m.requests, m.loads, m.duration, m.rules, m.unknownDomain, m.dropped, m.refused, m.clamped} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// ConfigLoaded counts a configuration load: c in force, or err.
func (m *Metrics) ConfigLoaded(c *Config, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.loads.WithLabelValues("error").Inc()
		return
	}
	m.loads.WithLabelValues("success").Inc()
	m.rules.Set(float64(c.Rules()))
}

// counters returns the counters of a match's series, which weight more
// hits make busier.
func (m *Metrics) counters(domain string, match Match, weight int64) *ruleCounters {
	k := seriesKey{domain, match.Label()}
	if c, ok := m.series.Load(k); ok {
		c := c.(*ruleCounters)
		if match.Detailed() {
			c.weight.Add(weight)
		}
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.series.Load(k); ok {
		c := c.(*ruleCounters)
		if match.Detailed() {
			c.weight.Add(weight)
		}
		return c
	}
	c := m.newCounters(k)
	if !match.Detailed() {
		m.series.Store(k, c)
		return c
	}
	if len(m.detailed) < m.maxDetailed {
		c.weight.Store(weight)
		m.detailed = append(m.detailed, c)
		m.series.Store(k, c)
		return c
	}
	// Space-saving: the lightest series gives its place, and its weight.
	j := 0
	for i, d := range m.detailed {
		if d.weight.Load() < m.detailed[j].weight.Load() {
			j = i
		}
	}
	old := m.detailed[j]
	m.series.Delete(old.key)
	for _, v := range []*prometheus.CounterVec{m.hits, m.over, m.near, m.within, m.shadow, m.overLocal} {
		v.DeleteLabelValues(old.key.domain, old.key.path)
	}
	m.dropped.Inc()
	c.weight.Store(satAdd(old.weight.Load(), weight))
	m.detailed[j] = c
	m.series.Store(k, c)
	return c
}

// newCounters returns the counters of the series k.
func (m *Metrics) newCounters(k seriesKey) *ruleCounters {
	return &ruleCounters{
		key:    k,
		hits:   m.hits.WithLabelValues(k.domain, k.path),
		over:   m.over.WithLabelValues(k.domain, k.path),
		near:   m.near.WithLabelValues(k.domain, k.path),
		within: m.within.WithLabelValues(k.domain, k.path),
		shadow: m.shadow.WithLabelValues(k.domain, k.path),

		overLocal: m.overLocal.WithLabelValues(k.domain, k.path),
	}
}
