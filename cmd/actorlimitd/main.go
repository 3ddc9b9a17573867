// Command actorlimitd is a rate-limit service that speaks envoy's Rate
// Limit Service protocol and reads envoy ratelimit's configuration files:
// a drop-in replacement for envoyproxy/ratelimit that decides with
// actorlimit, on its embedded table (no other program needed), on Redis, or
// as a cluster of actorlimitd processes.
//
//	go run ./cmd/actorlimitd -config examples/actorlimitd/config.yaml
//
// It serves gRPC (envoy.service.ratelimit.v3.RateLimitService and the gRPC
// health service) on -grpc-addr, HTTP on -http-addr (POST /json, GET
// /healthcheck), and the debug endpoints on -debug-addr (GET /metrics, GET
// /rlconfig). docs/service.md describes it all.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/metrics"
	"github.com/actorlimit/actorlimit/service"
	"github.com/actorlimit/actorlimit/service/unary"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the command line.
type flags struct {
	config, grpcAddr, httpAddr string
	tlsCert, tlsKey            string
	logLevel                   string
	redis                      string
	redisOpts                  redisFlags // redis.go's
	redisTimeout, deniedCache  time.Duration
	persist                    string
	shards                     int
	cluster                    clusterFlags
	responseHeaders            bool
	allOrNothing               bool
	deniedNotCounted           bool
	shadowMode                 bool
	watchEvery, shutdownGrace  time.Duration
	drainDelay                 time.Duration
	maxDetailed                int
	bounds                     service.Bounds
	edge                       edgeFlags    // secrets.go
	listen                     listenFlags  // listeners.go
	tracing                    tracingFlags // tracing.go
	xds                        xdsFlags     // xds.go
	compat                     compatFlags  // env.go
}

// clusterFlags are the -cluster-* flags.
type clusterFlags struct {
	name, mode, host string
	port, peerPort   int
	deadAfter        time.Duration
	etcd, peers      string
	tlsCert, tlsKey  string
	tlsCA            string
	keyFile          string
	maxEntries       int
	clusterSecurity  // -cluster-trusted-network, -cluster-etcd-*: clustersec.go
}

func (c clusterFlags) on() bool { return c.etcd != "" || c.peers != "" }

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("actorlimitd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "envoy ratelimit configuration: a YAML file, or a directory of them (required unless -config-type grpc-xds-sotw)")
	fs.StringVar(&f.grpcAddr, "grpc-addr", "127.0.0.1:8081", "gRPC listen address (RateLimitService, health)")
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8080", "HTTP listen address (/json, /healthcheck)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "certificate file (PEM) for both listeners; with -tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "private key file (PEM) for both listeners; with -tls-cert")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.redis, "redis", "", "Redis: a redis:// or rediss:// URL, host:port or socket path (a list for sentinel or cluster): keep the counts there, shared by every actorlimitd using it")
	f.redisOpts.register(fs)
	fs.DurationVar(&f.redisTimeout, "redis-timeout", 250*time.Millisecond, "with -redis: the longest a round trip may take before the local fallback decides")
	fs.DurationVar(&f.deniedCache, "redis-denied-cache", 0, "with -redis: answer a key Redis denied locally for up to this long (0: off)")
	fs.StringVar(&f.persist, "persist", "", "directory that keeps the embedded table's counts across restarts")
	fs.IntVar(&f.shards, "shards", 1, "limiter actors on the embedded table or Redis (ids hashed onto them)")
	fs.StringVar(&f.cluster.name, "cluster-name", "actorlimitd", "cluster name (every member the same)")
	fs.StringVar(&f.cluster.mode, "cluster-mode", "local-first", "cluster mode: local-first or owner")
	fs.StringVar(&f.cluster.host, "cluster-host", "127.0.0.1", "this member's cluster address")
	fs.IntVar(&f.cluster.port, "cluster-port", 0, "this member's cluster port (0: any free one)")
	fs.StringVar(&f.cluster.etcd, "cluster-etcd", "", "etcd endpoints (comma separated) through which the members find each other")
	fs.StringVar(&f.cluster.peers, "cluster-peers", "", "every member's automanaged health endpoint host:port (comma separated, this one's among them), instead of etcd")
	fs.IntVar(&f.cluster.peerPort, "cluster-peer-port", 0, "with -cluster-peers: this member's automanaged health endpoint port, on -cluster-host")
	fs.DurationVar(&f.cluster.deadAfter, "cluster-dead-after", cluster.DefaultDeadAfter, "how long a member may go unheard before the others drop it and take its partitions")
	fs.StringVar(&f.cluster.tlsCert, "cluster-tls-cert", "", "members' mutual TLS: this member's certificate (PEM)")
	fs.StringVar(&f.cluster.tlsKey, "cluster-tls-key", "", "members' mutual TLS: this member's key (PEM)")
	fs.StringVar(&f.cluster.tlsCA, "cluster-tls-ca", "", "members' mutual TLS: the CA that signs every member's certificate (PEM)")
	fs.StringVar(&f.cluster.keyFile, "cluster-key-file", "", "file holding the secret key of the hash that places ids in partitions (every member the same; required unless -cluster-host is loopback)")
	f.cluster.clusterSecurity.register(fs)
	fs.BoolVar(&f.responseHeaders, "response-headers", false, "add RateLimit-Limit, -Remaining and -Reset to responses (envoy ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED)")
	fs.BoolVar(&f.allOrNothing, "all-or-nothing", false, "a request that any descriptor denies charges none (changes envoy ratelimit's decisions)")
	fs.BoolVar(&f.deniedNotCounted, "denied-not-counted", false, "a fixed window does not count the hits it denies (changes envoy ratelimit's decisions)")
	fs.BoolVar(&f.shadowMode, "shadow-mode", false, "answer every request OK, whatever the limits say (envoy ratelimit's SHADOW_MODE); metrics still count")
	fs.DurationVar(&f.watchEvery, "watch-every", service.DefaultWatchEvery, "how often the configuration path is looked at for changes (0: never; SIGHUP still reloads)")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "on SIGTERM, how long requests in flight may take before the process exits")
	fs.DurationVar(&f.drainDelay, "drain-delay", 0, "on SIGTERM, how long to keep serving with /healthcheck at 503 before stopping (time for a load balancer to look elsewhere)")
	fs.IntVar(&f.maxDetailed, "max-detailed-series", service.DefaultMaxDetailedSeries, "bound on the metric series of detailed_metric rules")
	fs.IntVar(&f.bounds.Descriptors, "max-descriptors", service.DefaultMaxDescriptors, "bound on a request's descriptors")
	registerListenFlags(fs, &f)
	fs.IntVar(&f.bounds.KeyLength, "max-key-length", service.DefaultMaxKeyLength, "bound on a key's length (bytes)")
	fs.IntVar(&f.bounds.ValueLength, "max-value-length", service.DefaultMaxValueLength, "bound on a value's length (bytes)")
	f.edge.register(fs)
	f.tracing.register(fs)
	f.xds.register(fs)
	f.compat.register(fs)
	envDoc(fs)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := givenFlags(fs) // on the command line, before the environment sets more
	if err := f.compat.fromEnv(fs, given, lookupEnv); err != nil {
		return f, err
	}
	if err := f.xds.check(); err != nil {
		return f, err
	}
	if f.xds.on() && !given["config"] {
		// The runtime directory envoy ratelimit's environment names holds,
		// with xDS, only rate_limit_quota sections, if it is there at all.
		if _, err := os.Stat(f.config); err != nil {
			f.config = ""
		}
	}
	switch {
	case f.config == "" && !f.xds.on():
		return f, errors.New("-config is required: an envoy ratelimit YAML file or a directory of them")
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return f, errors.New("-tls-cert and -tls-key go together")
	case f.redis != "" && f.persist != "":
		return f, errors.New("-persist keeps the embedded table: it does not go with -redis")
	case f.cluster.on() && (f.redis != "" || f.persist != ""):
		return f, errors.New("a cluster member keeps its counts in the cluster: -cluster-etcd and -cluster-peers go without -redis and -persist")
	case f.cluster.etcd != "" && f.cluster.peers != "":
		return f, errors.New("give -cluster-etcd or -cluster-peers, not both")
	case f.cluster.peers != "" && f.cluster.peerPort == 0:
		return f, errors.New("-cluster-peers needs -cluster-peer-port, this member's own health endpoint port")
	case f.cluster.mode != "local-first" && f.cluster.mode != "owner":
		return f, fmt.Errorf("-cluster-mode %q: want local-first or owner", f.cluster.mode)
	case f.drainDelay < 0:
		return f, errors.New("-drain-delay must not be negative")
	case f.shutdownGrace <= 0:
		return f, errors.New("-shutdown-grace must be positive")
	case f.shards < 1:
		return f, errors.New("-shards must be at least 1")
	}
	if _, err := parseLevel(f.logLevel); err != nil {
		return f, err
	}
	if err := f.redisOpts.check(f.redis, f.redisTimeout); err != nil {
		return f, err
	}
	if err := f.listen.check(&f); err != nil {
		return f, err
	}
	if err := f.compat.check(f.listen.tlsClientCA); err != nil {
		return f, err
	}
	if err := f.tracing.check(os.Getenv); err != nil {
		return f, err
	}
	return f, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("-log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// run is main, returning the exit code: 0 after a SIGTERM, 1 when it could
// not start, 2 for bad flags.
func run(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "actorlimitd:", err)
		}
		return 2
	}
	log := f.compat.logger(f.logLevel, stderr)
	for _, w := range f.listen.deprecatedInUse {
		log.Warn(w)
	}
	f.compat.logStart(log)
	if err := serve(f, stdout, log); err != nil {
		log.Error("actorlimitd stopped", "err", err)
		return 1
	}
	return 0
}

// serve runs the service until SIGTERM or SIGINT.
func serve(f flags, stdout io.Writer, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	col, err := metrics.New(metrics.Config{})
	if err != nil {
		return err
	}
	reg.MustRegister(col)
	svcMetrics, err := service.NewMetrics(reg, f.maxDetailed)
	if err != nil {
		return err
	}

	secrets, err := f.edge.secrets(f.redis != "" || f.persist != "" || f.cluster.on())
	if err != nil {
		return err
	}
	b, err := openBackend(f, col, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := b.close(); err != nil {
			log.Error("closing the limiter", "err", err)
		}
	}()
	col.SetLimiter(b.limiter)
	if len(b.pollers) > 0 {
		reg.MustRegister(pollReads(b.pollers))
	}
	if m := b.member; m != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "actorlimitd", Name: "cluster_members",
			Help: "Members of the cluster this member takes for live, itself among them."}, func() float64 { return float64(len(m.Members())) }))
	}

	tr, err := startTracing(f.tracing, log)
	if err != nil {
		return err
	}
	defer tr.shutdown(log)
	srv, err := service.New(nil, service.Options{
		Limiter: b.limiter, Metrics: svcMetrics, Logger: log, Bounds: f.bounds,
		ResponseHeaders: f.responseHeaders, AllOrNothing: f.allOrNothing, DeniedNotCounted: f.deniedNotCounted,
		ShadowMode: f.shadowMode, Secrets: secrets, MaxHitsAddend: f.edge.maxHitsAddend,
		Tracer: tr.serviceTracer(), NearLimitRatio: f.compat.nearLimit,
	})
	if err != nil {
		return err
	}
	reloader, stopConfig, err := loadConfig(f, srv, svcMetrics, log) // xds.go
	if err != nil {
		return err
	}
	defer stopConfig()
	cfg := srv.Config()

	var ready atomic.Bool
	e, err := openEdge(f, srv, reg, tr, &ready, log)
	if err != nil {
		return err
	}
	if b.member != nil { // before serving: every bucket shares its limit
		defer shareQuota(e.quota, b.member, reg)() // quotashare.go
	}
	errs := make(chan error, 4)
	e.serve(errs)
	stopMetrics, err := f.compat.serveMetrics(reg, errs, log)
	if err != nil {
		e.stop()
		return err
	}
	defer stopMetrics()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	reloadQuota(reloader, e.quota, f.config, log) // quota.go
	if f.watchEvery > 0 && reloader != nil {
		go reloader.Watch(ctx, f.watchEvery)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	e.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	e.health.SetServingStatus("ratelimit", healthpb.HealthCheckResponse_SERVING)
	ready.Store(true)
	if e.dl != nil {
		log.Info("actorlimitd debug endpoints", "addr", e.dl.Addr().String())
		fmt.Fprintf(stdout, "actorlimitd debug on %s\n", e.dl.Addr())
	}
	log.Info("actorlimitd serving", "grpc", e.gl.Addr().String(), "http", e.hl.Addr().String(), "backend", b.name,
		"domains", len(cfg.Domains()), "rules", cfg.Rules())
	fmt.Fprintf(stdout, "actorlimitd serving gRPC on %s, HTTP on %s (%s)\n", e.gl.Addr(), e.hl.Addr(), b.name)

	for {
		select {
		case err := <-errs:
			ready.Store(false)
			e.stop()
			return fmt.Errorf("a listener failed: %w", err)
		case s := <-sigs:
			if s == syscall.SIGHUP {
				if reloader != nil {
					_ = reloader.Reload()
				}
				continue
			}
			log.Info("shutting down", "signal", s.String(), "drain", f.drainDelay, "grace", f.shutdownGrace)
			ready.Store(false)
			e.health.Shutdown()
			time.Sleep(f.drainDelay) // still serving, unhealthy: a balancer stops sending here
			e.shutdown(f.shutdownGrace, log)
			log.Info("actorlimitd stopped")
			return nil
		}
	}
}

// shutdown stops taking requests, lets those in flight finish within
// grace, and then stops both servers.
func shutdown(gs *grpc.Server, direct *unary.Server, hsrv *http.Server, grace time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan struct{})
	go func() {
		// The direct transport sends GOAWAY on its connections, grpc-go on
		// those it was handed: both drain at once.
		var wg sync.WaitGroup
		if direct != nil {
			wg.Go(func() { _ = direct.Shutdown(ctx) })
		}
		gs.GracefulStop()
		wg.Wait()
		close(done)
	}()
	if err := hsrv.Shutdown(ctx); err != nil {
		log.Warn("HTTP requests still in flight at the end of the grace", "err", err)
		_ = hsrv.Close()
	}
	select {
	case <-done:
	case <-ctx.Done():
		log.Warn("gRPC requests still in flight at the end of the grace")
		if direct != nil {
			_ = direct.Close()
		}
		gs.Stop()
	}
}

// listen listens on addr, warning when it is not a loopback address.
func listen(what, addr string, log *slog.Logger) (net.Listener, error) {
	network := "tcp"
	if path, ok := strings.CutPrefix(addr, "unix:"); ok { // envoy ratelimit's GRPC_UDS
		network, addr = "unix", path
		if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path) // a socket left by a process before this one
		}
		l, err := net.Listen(network, addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return l, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s address %q: %w", what, addr, err)
	}
	if beyondLoopback(host) {
		log.Warn("listening beyond loopback: anyone who reaches this address can use the service", "listener", what, "addr", addr)
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return l, nil
}

// beyondLoopback reports whether listening on host reaches beyond this
// machine: every interface (""), an address that is not loopback, or a
// name other than localhost.
func beyondLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && !ip.IsLoopback()) || (ip == nil && host != "localhost")
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
