package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/actorlimit/actorlimit/quota"
	"github.com/actorlimit/actorlimit/service"
)

// registerQuota serves the Rate Limit Quota Service on gs, beside the rate
// limit service, with the rate_limit_quota sections of the configuration
// at path, and its metrics on reg. It returns the service (a cluster member
// shares its limits: quotashare.go); reloadQuota keeps its rules up to
// date.
func registerQuota(gs *grpc.Server, reg prometheus.Registerer, path string, log *slog.Logger) (*quota.Server, error) {
	cfg, err := loadQuota(path) // xds.go
	if err != nil {
		return nil, fmt.Errorf("the configuration's %s sections: %w", quota.Section, err)
	}
	srv := quota.New(cfg, quota.Options{Logger: log})
	rlqsv3.RegisterRateLimitQuotaServiceServer(gs, srv)
	if err := reg.Register(srv); err != nil {
		return nil, err
	}
	log.Info("quota service", "rules", len(cfg.Rules()))
	return srv, nil
}

// reloadQuota reads the rate_limit_quota sections again whenever r reloads
// the rate limit rules (SIGHUP, or a change -watch sees): both are put in
// force, or, if either is bad, neither (logged and counted in
// actorlimitd_config_loads_total as any bad configuration). Without r (the
// rules from an xDS server) the sections of path are read again on SIGHUP,
// a bad one logged and the rules in force kept.
func reloadQuota(r *service.Reloader, srv *quota.Server, path string, log *slog.Logger) {
	apply := func(cfg *quota.Config) {
		srv.SetConfig(cfg)
		log.Info("quota rules reloaded", "rules", len(cfg.Rules()))
	}
	if r != nil {
		r.AlsoLoad(func(path string) (func(), error) {
			cfg, err := loadQuota(path) // xds.go
			if err != nil {
				return nil, fmt.Errorf("the configuration's %s sections: %w", quota.Section, err)
			}
			return func() { apply(cfg) }, nil
		})
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() { // for the process's life, as the listener
		for range hup {
			cfg, err := loadQuota(path) // xds.go
			if err != nil {
				log.Error("quota rules not reloaded", "err", err)
				continue
			}
			apply(cfg)
		}
	}()
}
