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
)

// registerQuota serves the Rate Limit Quota Service on gs, beside the rate
// limit service, with the rate_limit_quota sections of the configuration
// at path, read again on SIGHUP (a bad one is logged and the rules in force
// kept), and its metrics on reg. It returns the service (a cluster member
// shares its limits: quotashare.go).
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
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() { // for the process's life, as the listener
		for range hup {
			cfg, err := loadQuota(path) // xds.go
			if err != nil {
				log.Error("quota rules not reloaded", "err", err)
				continue
			}
			srv.SetConfig(cfg)
			log.Info("quota rules reloaded", "rules", len(cfg.Rules()))
		}
	}()
	return srv, nil
}
