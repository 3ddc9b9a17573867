package quota

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descStreams = prometheus.NewDesc("actorlimitd_quota_streams", "RLQS streams open (one per Envoy).", nil, nil)
	descBuckets = prometheus.NewDesc("actorlimitd_quota_buckets", "Buckets divided, by domain and rule.", []string{"domain", "rule"}, nil)
	descEnvoys  = prometheus.NewDesc("actorlimitd_quota_envoys", "Envoys reporting on the rule's buckets (one per bucket and stream).", []string{"domain", "rule"}, nil)
	descDemand  = prometheus.NewDesc("actorlimitd_quota_demand_per_second", "The Envoys' last reported demand (allowed + denied) on the rule's buckets, in requests per second.", []string{"domain", "rule"}, nil)
	descShares  = prometheus.NewDesc("actorlimitd_quota_assigned_per_second", "The shares in force on the rule's buckets (leavers' until their TTL), in requests per second.", []string{"domain", "rule"}, nil)
	descLimit   = prometheus.NewDesc("actorlimitd_quota_limit_per_second", "The rule's limit per bucket, in requests per second.", []string{"domain", "rule"}, nil)
	descAllowed = prometheus.NewDesc("actorlimitd_quota_reported_allowed_total", "Requests the Envoys reported allowed on the rule's buckets.", []string{"domain", "rule"}, nil)
	descDenied  = prometheus.NewDesc("actorlimitd_quota_reported_denied_total", "Requests the Envoys reported denied on the rule's buckets.", []string{"domain", "rule"}, nil)
	descRefused = prometheus.NewDesc("actorlimitd_quota_refused_total", "Streams, buckets or reports refused by a bound, by reason.", []string{"reason"}, nil)
)

// Describe implements prometheus.Collector.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStreams, descBuckets, descEnvoys, descDemand, descShares, descLimit, descAllowed, descDenied, descRefused} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the labels are the rules'
// domains and names, never a client's value, so the series are bounded by
// the configuration.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	type agg struct {
		buckets, envoys       int
		demand, shares, limit float64
	}
	s.mu.Lock()
	streams := len(s.streams)
	buckets := make([]*bucket, 0, len(s.buckets))
	for _, b := range s.buckets {
		buckets = append(buckets, b)
	}
	counters := make(map[ruleName]*ruleCounters, len(s.counters))
	for r, c := range s.counters {
		counters[r] = c
	}
	refused := make(map[string]uint64, len(s.rejected))
	for k, v := range s.rejected {
		refused[k] = v
	}
	s.mu.Unlock()

	ch <- prometheus.MustNewConstMetric(descStreams, prometheus.GaugeValue, float64(streams))
	aggs := map[ruleName]*agg{}
	for _, b := range buckets {
		b.mu.Lock()
		rn := ruleName{b.rule.Domain, b.rule.Name}
		a := aggs[rn]
		if a == nil {
			a = &agg{limit: b.rule.Rate()}
			aggs[rn] = a
		}
		a.buckets++
		for _, m := range b.div.Shares() {
			if m.Live {
				a.envoys++
				a.demand += m.Demand
			}
			a.shares += m.Share
		}
		b.mu.Unlock()
	}
	for r, a := range aggs {
		ch <- prometheus.MustNewConstMetric(descBuckets, prometheus.GaugeValue, float64(a.buckets), r.domain, r.name)
		ch <- prometheus.MustNewConstMetric(descEnvoys, prometheus.GaugeValue, float64(a.envoys), r.domain, r.name)
		ch <- prometheus.MustNewConstMetric(descDemand, prometheus.GaugeValue, a.demand, r.domain, r.name)
		ch <- prometheus.MustNewConstMetric(descShares, prometheus.GaugeValue, a.shares, r.domain, r.name)
		ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, a.limit, r.domain, r.name)
	}
	for r, c := range counters {
		ch <- prometheus.MustNewConstMetric(descAllowed, prometheus.CounterValue, float64(c.allowed.Load()), r.domain, r.name)
		ch <- prometheus.MustNewConstMetric(descDenied, prometheus.CounterValue, float64(c.denied.Load()), r.domain, r.name)
	}
	reasons := make([]string, 0, len(refused))
	for k := range refused {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(refused[k]), k)
	}
}

var _ prometheus.Collector = (*Server)(nil)
