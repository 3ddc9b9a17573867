package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/quota"
)

// shareQuota makes srv's buckets share one limit over the cluster m is a
// member of: every quota.ExchangeEvery of its rules at start (250 ms, or a
// quarter of the shortest TTL), until stop is called, srv sends
// each bucket's demand to the member that owns the bucket's key, whose
// quota.Owner divides the limit over every member's Envoys (see
// docs/service.md, "One limit across many processes"). reg gets the
// buckets this member divides as their owner.
func shareQuota(srv *quota.Server, m *cluster.Member, reg prometheus.Registerer) (stop func()) {
	ctx, stop := context.WithCancel(context.Background())
	o := quota.NewOwner(nil, maxOwnedBuckets)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "actorlimitd", Name: "quota_owned_buckets",
		Help: "RLQS buckets this member divides as their owner, over every member's Envoys."}, func() float64 { return float64(o.Len()) }))
	m.SetDivider(quotaOwner{o})
	srv.Link(quotaLink{m})
	go srv.Share(ctx, quotaLink{m}, quota.ExchangeEvery(srv.Config()))
	return stop
}

// maxOwnedBuckets bounds the buckets a member divides as their owner, as
// quota.Options.MaxBuckets bounds those its own Envoys report.
const maxOwnedBuckets = 100_000

// quotaLink is a quota.Link over a cluster member.
type quotaLink struct{ m *cluster.Member }

// Divide implements quota.Link.
func (l quotaLink) Divide(ctx context.Context, ds []quota.Demand) []quota.Grant {
	cds := make([]cluster.QuotaDemand, len(ds))
	for i, d := range ds {
		cds[i] = cluster.QuotaDemand{Key: d.Key, Limit: d.Limit, TTL: d.TTL, Leaving: d.Leaving, InForce: d.InForce,
			Wants: make([]cluster.QuotaWant, len(d.Wants))}
		for j, w := range d.Wants {
			cds[i].Wants[j] = cluster.QuotaWant{Rate: w.Rate, Envoys: w.Envoys}
		}
	}
	gs := l.m.DivideQuotas(ctx, cds)
	out := make([]quota.Grant, len(gs))
	for i, g := range gs {
		out[i] = quota.Grant{Share: g.Share, OK: g.OK}
	}
	return out
}

// Members implements quota.Link.
func (l quotaLink) Members() int { return max(len(l.m.Members()), 1) }

// quotaOwner is a cluster.Divider over a quota.Owner.
type quotaOwner struct{ o *quota.Owner }

// Divide implements cluster.Divider.
func (q quotaOwner) Divide(from string, ds []cluster.QuotaDemand, out []cluster.QuotaGrant) {
	qds := make([]quota.Demand, len(ds))
	for i, d := range ds {
		qds[i] = quota.Demand{Key: d.Key, Limit: d.Limit, TTL: d.TTL, Leaving: d.Leaving, InForce: d.InForce,
			Wants: make([]quota.Want, len(d.Wants))}
		for j, w := range d.Wants {
			qds[i].Wants[j] = quota.Want{Rate: w.Rate, Envoys: w.Envoys}
		}
	}
	gs := make([]quota.Grant, len(ds))
	q.o.Divide(from, qds, gs)
	for i, g := range gs {
		out[i] = cluster.QuotaGrant{Share: g.Share, OK: g.OK}
	}
}
