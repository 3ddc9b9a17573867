package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/actorlimit/actorlimit/quota"
	"github.com/actorlimit/actorlimit/service"
)

// Configuration types of -config-type (envoy ratelimit's CONFIG_TYPE).
const (
	configFile = "file"
	configXDS  = "grpc-xds-sotw"
)

// xdsFlags are -config-type, the -xds-* flags and
// -force-start-without-initial-config: envoy ratelimit's CONFIG_TYPE,
// CONFIG_GRPC_XDS_* and XDS_CLIENT_* settings.
type xdsFlags struct {
	configType                     string
	server, nodeID                 string
	nodeMetadata, headers          string
	retry                          time.Duration
	tls                            bool
	tlsCert, tlsKey, tlsCA, tlsSAN string
	maxMsgBytes                    int
	backoff                        service.XDSBackoff
	forceStart                     bool
}

func (x *xdsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&x.configType, "config-type", configFile, "where the configuration comes from: file (-config) or grpc-xds-sotw (an xDS server, -xds-server); case does not matter, and _ stands for - (CONFIG_TYPE)")
	fs.StringVar(&x.server, "xds-server", "localhost:18000", "with -config-type grpc-xds-sotw: the xDS server, host:port (CONFIG_GRPC_XDS_SERVER_URL)")
	fs.StringVar(&x.nodeID, "xds-node-id", "default", "the node id this client gives the xDS server (CONFIG_GRPC_XDS_NODE_ID)")
	fs.StringVar(&x.nodeMetadata, "xds-node-metadata", "", "the node metadata this client gives the xDS server: k1=v1,k2:v2 (CONFIG_GRPC_XDS_NODE_METADATA)")
	fs.DurationVar(&x.retry, "xds-retry-interval", 3*time.Second, "how long between attempts to connect to an xDS server that does not answer (CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL)")
	fs.StringVar(&x.headers, "xds-headers", "", "gRPC metadata sent to the xDS server: k1:v1,k2:v2 (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS)")
	fs.BoolVar(&x.tls, "xds-tls", false, "reach the xDS server over TLS (CONFIG_GRPC_XDS_SERVER_USE_TLS)")
	fs.StringVar(&x.tlsCert, "xds-tls-cert", "", "with -xds-tls: this client's certificate (PEM), with -xds-tls-key (CONFIG_GRPC_XDS_CLIENT_TLS_CERT)")
	fs.StringVar(&x.tlsKey, "xds-tls-key", "", "with -xds-tls: this client's key (PEM), with -xds-tls-cert (CONFIG_GRPC_XDS_CLIENT_TLS_KEY)")
	fs.StringVar(&x.tlsCA, "xds-tls-ca", "", "with -xds-tls: the CA that signs the xDS server's certificate (PEM; default: the system's) (CONFIG_GRPC_XDS_SERVER_TLS_CACERT)")
	fs.StringVar(&x.tlsSAN, "xds-tls-san", "", "with -xds-tls: the name the xDS server's certificate must hold (default: the host of -xds-server) (CONFIG_GRPC_XDS_SERVER_TLS_SAN)")
	fs.IntVar(&x.maxMsgBytes, "xds-max-msg-bytes", 0, "the largest response taken from the xDS server (0: gRPC's 4 MiB) (XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES)")
	fs.DurationVar(&x.backoff.Initial, "xds-backoff-initial", 10*time.Second, "the wait before a new stream once one to the xDS server ended (XDS_CLIENT_BACKOFF_INITIAL_INTERVAL)")
	fs.DurationVar(&x.backoff.Max, "xds-backoff-max", 60*time.Second, "the longest such wait, doubled from -xds-backoff-initial while streams end without a response (XDS_CLIENT_BACKOFF_MAX_INTERVAL)")
	fs.Float64Var(&x.backoff.RandomFactor, "xds-backoff-random-factor", 0.5, "with -xds-backoff-jitter: each wait randomized by this fraction of it either way (XDS_CLIENT_BACKOFF_RANDOM_FACTOR)")
	fs.BoolVar(&x.backoff.Jitter, "xds-backoff-jitter", true, "randomize the waits (XDS_CLIENT_BACKOFF_JITTER)")
	fs.BoolVar(&x.forceStart, "force-start-without-initial-config", false, "with -config-type grpc-xds-sotw: serve before the first configuration arrives, with no domain until then (FORCE_START_WITHOUT_INITIAL_CONFIG)")
}

// on reports whether the configuration comes from an xDS server.
func (x *xdsFlags) on() bool { return x.configType == configXDS }

// check normalizes -config-type and checks the flags that matter for it.
func (x *xdsFlags) check() error {
	t := strings.ReplaceAll(strings.ToLower(x.configType), "_", "-")
	if t != configFile && t != configXDS {
		return fmt.Errorf("-config-type %q: want file or grpc-xds-sotw", x.configType)
	}
	x.configType = t
	if !x.on() {
		return nil
	}
	switch {
	case x.server == "":
		return errors.New("-xds-server is empty: give the xDS server's host:port")
	case x.retry <= 0:
		return errors.New("-xds-retry-interval must be positive")
	case x.maxMsgBytes < 0:
		return errors.New("-xds-max-msg-bytes must not be negative")
	case x.backoff.Initial <= 0:
		return errors.New("-xds-backoff-initial must be positive")
	case x.backoff.Max < x.backoff.Initial:
		return errors.New("-xds-backoff-max must be at least -xds-backoff-initial")
	case x.backoff.RandomFactor < 0 || x.backoff.RandomFactor > 1:
		return fmt.Errorf("-xds-backoff-random-factor %v: want 0 to 1", x.backoff.RandomFactor)
	case x.tls && (x.tlsCert == "") != (x.tlsKey == ""):
		return errors.New("-xds-tls-cert and -xds-tls-key go together")
	}
	if _, err := service.ParseKeyValues(x.nodeMetadata, "=:"); err != nil {
		return fmt.Errorf("-xds-node-metadata: %w", err)
	}
	if _, err := service.ParseKeyValues(x.headers, ":"); err != nil {
		return fmt.Errorf("-xds-headers: %w", err)
	}
	return nil
}

// options returns the XDS client's options.
func (x *xdsFlags) options() (service.XDSOptions, error) {
	md, _ := service.ParseKeyValues(x.nodeMetadata, "=:")
	hd, _ := service.ParseKeyValues(x.headers, ":")
	o := service.XDSOptions{Target: x.server, NodeID: x.nodeID, NodeMetadata: md, Headers: hd,
		RetryInterval: x.retry, MaxMsgBytes: x.maxMsgBytes, Backoff: x.backoff}
	if !x.tls {
		return o, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: x.tlsSAN}
	if x.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(x.tlsCert, x.tlsKey)
		if err != nil {
			return o, fmt.Errorf("-xds-tls-cert, -xds-tls-key: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	if x.tlsCA != "" {
		pem, err := os.ReadFile(x.tlsCA)
		if err != nil {
			return o, fmt.Errorf("-xds-tls-ca: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return o, fmt.Errorf("-xds-tls-ca %s: no PEM certificate in it", x.tlsCA)
		}
	}
	o.Credentials = credentials.NewTLS(conf)
	return o, nil
}

// loadConfig puts the first configuration in force in srv: from the
// files of -config (the Reloader, to reload them later), or from the
// xDS server, whose client then runs until stop is called. Without
// -force-start-without-initial-config it waits for the xDS server's first
// configuration, not listening meanwhile, as envoy ratelimit does.
func loadConfig(f flags, srv *service.Server, m *service.Metrics, log *slog.Logger) (r *service.Reloader, stop func(), err error) {
	if !f.xds.on() {
		r = service.NewReloader(f.config, srv, m, log)
		r.SetLoadOptions(service.LoadOptions{MergeDomains: f.compat.mergeDomains})
		if err := r.Reload(); err != nil {
			return nil, nil, fmt.Errorf("the configuration: %w", err)
		}
		return r, func() {}, nil
	}
	if f.config != "" {
		log.Warn("-config's domains are not read with -config-type grpc-xds-sotw: they are the xDS server's alone, as in envoy ratelimit (its rate_limit_quota sections are)", "config", f.config)
	}
	o, err := f.xds.options()
	if err != nil {
		return nil, nil, err
	}
	x := service.NewXDS(o, srv, m, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	if f.xds.forceStart {
		log.Info("serving before the first configuration from the xDS server: no domain until it arrives", "server", o.Target)
		return nil, stop, nil
	}
	log.Info("waiting for the first configuration from the xDS server", "server", o.Target, "node", o.NodeID)
	sig, unsig := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer unsig()
	select {
	case <-x.Loaded():
		return nil, stop, nil
	case <-sig.Done():
		stop()
		return nil, nil, errors.New("stopped by a signal before the first configuration from the xDS server")
	}
}

// loadQuota reads the rate_limit_quota sections of the files at path; with
// no path (the configuration from an xDS server, and no -config), there
// are none.
func loadQuota(path string) (*quota.Config, error) {
	if path == "" {
		return quota.Parse(nil)
	}
	return quota.Load(path)
}
