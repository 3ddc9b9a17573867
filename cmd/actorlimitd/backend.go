package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/metrics"
	"github.com/actorlimit/actorlimit/redisstore"
)

// backend is the limiter the service decides with, and what to close.
type backend struct {
	name    string
	limiter *actorlimit.Limiter
	member  *cluster.Member // nil unless a cluster member
	closers []func() error
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
	opts := []actorlimit.Option{actorlimit.WithLogger(log), actorlimit.WithShards(f.shards)}
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

// openRedis starts a limiter on the Redis store, with the client options
// redisstore advises so that a dead Redis costs at most its timeout: the
// store's local fallback table decides meanwhile.
func openRedis(f flags, col *metrics.Collector, log *slog.Logger) (*backend, error) {
	if _, _, err := net.SplitHostPort(f.redis); err != nil {
		return nil, fmt.Errorf("-redis %q: want host:port: %w", f.redis, err)
	}
	client := redis.NewClient(&redis.Options{Addr: f.redis, ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		// Not fatal: the store decides on its fallback table until Redis answers.
		log.Warn("Redis does not answer yet: deciding on the local fallback until it does", "redis", f.redis, "err", err)
	}
	opts := []redisstore.Option{redisstore.WithLogger(log), redisstore.WithTimeout(f.redisTimeout), redisstore.WithPrefix("actorlimitd:")}
	if f.deniedCache > 0 {
		opts = append(opts, redisstore.WithDeniedCache(f.deniedCache))
	}
	store, err := redisstore.New(client, opts...)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("-redis: %w", err)
	}
	lim, err := actorlimit.Start(actorlimit.WithStore(store), actorlimit.WithShards(f.shards), actorlimit.WithLogger(log))
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("starting the limiter on Redis: %w", err)
	}
	col.SetStore(metrics.StoreStatsFunc(func() metrics.StoreStats {
		st := store.Stats()
		return metrics.StoreStats{Errors: st.Errors, Outages: st.Outages, Fallbacks: st.Fallbacks, FailedOpen: st.FailedOpen,
			FailedClosed: st.FailedClosed, CheckErrors: st.CheckErrors, Cached: st.Cached}
	}))
	return &backend{name: "Redis at " + f.redis, limiter: lim, closers: []func() error{client.Close, lim.Close}}, nil
}

// openCluster starts this process as a member of an actorlimit cluster.
func openCluster(c clusterFlags, log *slog.Logger) (*backend, error) {
	cfg := cluster.Config{Name: c.name, Host: c.host, Port: c.port, Logger: log, DeadAfter: c.deadAfter, TrustedNetwork: c.trustedNetwork}
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
