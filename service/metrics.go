package service

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxDetailedSeries is Metrics' default bound on the label values
// that hold a request's values (detailed_metric and value_to_metric rules).
const DefaultMaxDetailedSeries = 1000

// Metrics are the service's Prometheus metrics, per domain and descriptor
// path (the rule's keys and the file's values: no client's value, except
// for detailed_metric and value_to_metric rules, at most NewMetrics'
// maxDetailed distinct paths; past the bound such a descriptor's hits are
// counted under its rule's path, and detailed_series_dropped_total counts
// the descriptor):
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
//	actorlimitd_detailed_series_dropped_total          detailed descriptors counted under their rule's path
//
// A Metrics is safe for concurrent use.
type Metrics struct {
	hits, over, near, within, shadow *prometheus.CounterVec
	overLocal                        *prometheus.CounterVec
	requests, loads                  *prometheus.CounterVec
	duration                         prometheus.Histogram
	rules                            prometheus.Gauge
	unknownDomain, dropped           prometheus.Counter

	// codes are requests' counters by outcome, resolved once.
	codes map[string]prometheus.Counter

	maxDetailed int
	// series maps a seriesKey to its *ruleCounters: read without a lock,
	// written under mu.
	series   sync.Map
	mu       sync.Mutex
	detailed int
}

type seriesKey struct{ domain, path string }

type ruleCounters struct {
	hits, over, near, within, shadow prometheus.Counter
	overLocal                        prometheus.Counter
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
			Help: "Descriptors of detailed_metric and value_to_metric rules counted under their rule's path, the bound on detailed series reached."}),
		maxDetailed: maxDetailed,
		codes:       map[string]prometheus.Counter{},
	}
	for _, c := range []string{"ok", "over_limit", "invalid", "error"} {
		m.codes[c] = m.requests.WithLabelValues(c)
	}
	m.loads.WithLabelValues("success")
	m.loads.WithLabelValues("error")
	if reg != nil {
		for _, c := range []prometheus.Collector{m.hits, m.over, m.near, m.within, m.shadow, m.overLocal, m.requests, m.loads, m.duration, m.rules, m.unknownDomain, m.dropped} {
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

// counters returns the counters of a rule's series.
func (m *Metrics) counters(domain string, match Match) *ruleCounters {
	k := seriesKey{domain, match.Label()}
	if c, ok := m.series.Load(k); ok {
		return c.(*ruleCounters)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.series.Load(k); ok {
		return c.(*ruleCounters)
	}
	if match.Detailed() {
		if m.detailed >= m.maxDetailed {
			m.dropped.Inc()
			k.path = match.Rule.Path
			if c, ok := m.series.Load(k); ok {
				return c.(*ruleCounters)
			}
		} else {
			m.detailed++
		}
	}
	c := &ruleCounters{
		hits:   m.hits.WithLabelValues(k.domain, k.path),
		over:   m.over.WithLabelValues(k.domain, k.path),
		near:   m.near.WithLabelValues(k.domain, k.path),
		within: m.within.WithLabelValues(k.domain, k.path),
		shadow: m.shadow.WithLabelValues(k.domain, k.path),

		overLocal: m.overLocal.WithLabelValues(k.domain, k.path),
	}
	m.series.Store(k, c)
	return c
}
