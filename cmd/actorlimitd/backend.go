package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/metrics"
	"github.com/actorlimit/actorlimit/redisstore/busypoll"
)

// backend is the limiter the service decides with, and what to close.
type backend struct {
	name    string
	limiter *actorlimit.Limiter
	member  *cluster.Member // nil unless a cluster member
	closers []func() error
	pollers []*busypoll.Poller // the Redis clients' pollers (-redis-busy-poll)
}

func (b *backend) close() error {
	var first error
	for i := len(b.closers) - 1; i >= 0; i-- {
		if err := b.closers[i](); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// openBackend starts the limiter the flags ask for: a cluster member, the
// Redis store, or the embedded table (with persistence).
func openBackend(f flags, col *metrics.Collector, log *slog.Logger) (*backend, error) {
	switch {
	case f.cluster.on():
		b, err := openCluster(f.cluster, log)
		if err != nil {
			return nil, err
		}
		m := b.member
		col.SetCluster(metrics.ClusterStatsFunc(func() metrics.ClusterStats {
			s := m.SyncStats()
			return metrics.ClusterStats{Fallbacks: s.Fallbacks, Rounds: s.Rounds, Requests: s.Requests, Failures: s.Failures,
				Outages: s.Outages, Recoveries: s.Recoveries, Rebuilds: s.Rebuilds, QueuedResets: s.QueuedResets,
				HandOffs: s.HandOffs, Refusals: s.Refusals, TakeOvers: s.TakeOvers, Backups: s.Backups,
				Rejected: s.Rejected, KeyMismatches: s.KeyMismatches, RefusedResets: s.RefusedResets,
				OwnerFallbacks: s.OwnerFallbacks, Charged: s.Charged, ChargesDropped: s.ChargesDropped,
				Retries: s.Retries, Deduplicated: s.Deduplicated}
		}))
		return b, nil
	case f.redis != "":
		return openRedis(f, col, log)
	}
	opts := []actorlimit.Option{actorlimit.WithLogger(log), actorlimit.WithShards(f.shards), actorlimit.WithMaxEntries(f.listen.maxTableEntries)}
	name := "embedded table"
	if f.persist != "" {
		opts = append(opts, actorlimit.WithPersistence(f.persist, actorlimit.PersistConfig{}))
		name += ", persisted in " + f.persist
	}
	lim, err := actorlimit.Start(opts...)
	if err != nil {
		return nil, fmt.Errorf("starting the limiter: %w", err)
	}
	if f.persist != "" {
		if st, err := lim.Stats(context.Background()); err == nil {
			log.Info("persisted state loaded", "dir", f.persist, "loaded", fmt.Sprintf("%+v", st.Loaded))
		}
	}
	return &backend{name: name, limiter: lim, closers: []func() error{lim.Close}}, nil
}

// openCluster starts this process as a member of an actorlimit cluster.
func openCluster(c clusterFlags, log *slog.Logger) (*backend, error) {
	cfg := cluster.Config{Name: c.name, Host: c.host, Port: c.port, Logger: log, DeadAfter: c.deadAfter, MaxEntries: c.maxEntries, TrustedNetwork: c.trustedNetwork, Advertise: c.advertise}
	if c.mode == "owner" {
		cfg.Mode = cluster.Owner
	}
	if err := clusterTLS(&cfg, c); err != nil {
		return nil, err
	}
	if err := c.openMember(); err != nil {
		return nil, err
	}
	if err := clusterKey(&cfg, c); err != nil {
		return nil, err
	}
	what := ""
	if c.etcd != "" {
		ec, err := c.etcdConfig(splitList(c.etcd))
		if err != nil {
			return nil, err
		}
		p, err := etcd.NewWithConfig("/actorlimitd", ec)
		if err != nil {
			return nil, fmt.Errorf("-cluster-etcd: %w", err)
		}
		cfg.Provider = p
		what = "etcd at " + c.etcd
	} else {
		cfg.AutoManaged = &cluster.AutoManaged{Port: c.peerPort, Hosts: splitList(c.peers)}
		what = "peers " + strings.Join(cfg.AutoManaged.Hosts, ",")
	}
	m, err := cluster.Start(cfg)
	if err != nil {
		return nil, fmt.Errorf("joining the cluster: %w", err)
	}
	return &backend{name: fmt.Sprintf("cluster %s (%s, %s) as %s", c.name, c.mode, what, m.Address()), limiter: m.Limiter,
		member: m, closers: []func() error{m.Limiter.Close}}, nil
}
