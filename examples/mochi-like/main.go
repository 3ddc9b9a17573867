// Mochi-like is the raterlimiter article's own use of its limiter, in Go: a
// small file server that lets each peer IP make at most -limit requests per
// window of -scale milliseconds, as the article's Mochiweb server did with
//
//	raterlimiter:check_rate(Req:get(peer), 30000, 500)
//
// Requests over the limit are answered 413 Request Entity Too Large, as in
// the original, with a Retry-After header in whole seconds (rounded up) and a
// short plain-text message. If the limiter cannot decide, the answer is 503.
//
// It serves the folder -dir (by default examples/mochi-like/public, a small
// page, as seen from the repository's root) but never its dotfiles: a name
// with any element that starts with "." (.git/config, .env) is not found,
// and directory listings leave such entries out. Symbolic links may not
// lead out of the folder.
//
// Watch it refuse requests: the demo serves -dir on a free port of
// 127.0.0.1, sends itself the limit plus three requests, prints what came
// back and exits:
//
//	go run ./examples/mochi-like -demo
//
// Or serve a folder until SIGINT or SIGTERM, then shut down gracefully:
//
//	go run ./examples/mochi-like -dir examples/mochi-like/public -addr 127.0.0.1:8080 -scale 30000 -limit 500
//
// With -rules, the rules of a file (package httpadapter: conditions,
// grouping keys, block / monitor / shadow actions; YAML or JSON) run in
// front of the per-peer limit: what each rule enforces is printed first,
// and each rule's statistics at the end. rules.yaml beside this file has a
// monitor rule and a block rule:
//
//	go run ./examples/mochi-like -demo -rules examples/mochi-like/rules.yaml
//
// Logs go to stderr as slog text, and only there: at -log info (the
// default), the actor system starting, the limiter restarting, the
// shutdown and the limiter closing, Redis going away and coming back
// (-redis), the limiter failing under the rules (-rules) or the per-peer
// limit and answering again, each once per change, never per request.
//
// With -redis, the counts live in that Redis (package redisstore), so that
// several servers behind one load balancer share them: a peer gets -limit
// requests per window across all of them, counted at Redis's clock. If Redis
// stops answering, each server falls back to counts of its own until Redis
// is back. Two servers on one Redis:
//
//	go run ./examples/mochi-like -addr 127.0.0.1:8081 -redis 127.0.0.1:6379 &
//	go run ./examples/mochi-like -addr 127.0.0.1:8082 -redis 127.0.0.1:6379 &
//
// The flags:
//
//	-addr   address to listen on (default 127.0.0.1:8080; ignored with -demo)
//	-dir    folder to serve, without its dotfiles (default
//	        examples/mochi-like/public); symbolic links may not leave it
//	-scale  window length in milliseconds (default 30000)
//	-limit  requests allowed per peer IP (an IPv6 peer: per /64, as the
//	        rules group it) per window (default 500, 5 with -demo)
//	-demo   run the demo instead of serving
//	-rules  rules file to apply in front of the per-peer limit (default none)
//	-redis  address (host:port) of a Redis to keep the counts in (default none)
//	-admin  address to serve the admin pages on (default none): a port
//	        alone (:9090) listens on 127.0.0.1; a host (0.0.0.0:9090) is
//	        taken as given, with a warning in the log when other machines
//	        may reach it. The pages: / lists them; /metrics (Prometheus:
//	        every check's latency, the rules' and the per-peer limit's
//	        decisions, the limiter's state, with -redis the store's
//	        errors, outages and fallbacks, Go and process metrics,
//	        go_build_info); /limits (the limits page, JSON at
//	        /limits?format=json); /healthz (200 while the process is alive);
//	        /readyz (200 when the limiter answers and, with -redis, Redis
//	        answers a PING; else 503 naming the check that failed)
//	-admin-token  bearer token that /metrics and /limits require
//	        ("Authorization: Bearer TOKEN"); default the environment's
//	        MOCHI_LIKE_ADMIN_TOKEN, else none. /, /healthz and /readyz are
//	        open, for probes
//	-secret-key-file  file holding the key (at least 16 bytes; trailing
//	        newlines are not part of it) of the HMAC that hashes the rules'
//	        secret grouping values (every cookie, the Authorization header,
//	        what a rule lists under secret:) before they become counter ids
//	        (default: a random key per process). Servers that share -redis
//	        need the same key, or each would count a client's token apart:
//	        with -redis and -rules, the middleware refuses to start without it
//	-log    lowest level logged to stderr: debug, info (default), warn,
//	        error, or off
//
// See what the limits do while the server runs:
//
//	go run ./examples/mochi-like -rules examples/mochi-like/rules.yaml -admin :9090
//
// then open http://127.0.0.1:9090/limits: per rule (and the per-peer limit)
// the heatmaps of groups by requests and by remaining limit over time, and
// the heaviest groups.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/metrics"
	"github.com/actorlimit/actorlimit/redisstore"
)

const (
	defaultAddr = "127.0.0.1:8080"
	// defaultDir is the example folder beside this file, as seen from the
	// repository's root, where the README's commands run.
	defaultDir     = "examples/mochi-like/public"
	defaultScaleMs = 30000
	defaultLimit   = 500
	// demoLimit is the -limit of the demo when none is given, so that it
	// reaches the limit in a few lines.
	demoLimit = 5
	// maxDemoLimit bounds the requests the demo sends itself.
	maxDemoLimit = 1000
	// maxScaleMs is the longest window CheckRate accepts.
	maxScaleMs = math.MaxInt64 / int64(time.Millisecond)
)

// config is what the flags ask for.
type config struct {
	addr    string
	dir     string
	scaleMs int64
	limit   int64
	demo    bool
	rules   string
	redis   string
	admin   string
	// adminToken is the bearer token of /metrics and /limits: -admin-token,
	// or the environment's MOCHI_LIKE_ADMIN_TOKEN.
	adminToken string
	// secretKeyFile holds the key that hashes the rules' secret grouping
	// values (httpadapter.Config.SecretKey).
	secretKeyFile string
	log           slog.Level // the lowest level logged
	logOff        bool       // -log off
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process at once
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "mochi-like:", err)
		os.Exit(1)
	}
}

// run parses args, starts a limiter with opts (tests pass a fake clock) and
// either runs the demo or serves until ctx is done. It logs to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, opts ...actorlimit.Option) error {
	cfg, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)
	opts = append([]actorlimit.Option{actorlimit.WithLogger(logger)}, opts...)
	var rules []httpadapter.Rule
	if cfg.rules != "" {
		if rules, err = httpadapter.LoadRules(cfg.rules); err != nil {
			return fmt.Errorf("-rules: %w", err)
		}
	}
	var secretKey []byte
	if cfg.secretKeyFile != "" {
		if secretKey, err = readSecretKey(cfg.secretKeyFile); err != nil {
			return err
		}
	}
	root, err := os.OpenRoot(cfg.dir)
	if err != nil {
		if cfg.dir == defaultDir && errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("-dir: %w (the default folder is relative to the repository's root: run from there, or give -dir)", err)
		}
		return fmt.Errorf("-dir: %w", err)
	}
	defer root.Close()
	var (
		store       *redisstore.Store
		redisClient *redis.Client
	)
	if cfg.redis != "" {
		if store, redisClient, err = openRedis(ctx, cfg.redis, logger); err != nil {
			return err
		}
		defer redisClient.Close() // after the limiter's Close, deferred below
		opts = append(opts, actorlimit.WithStore(store))
	}
	ln, err := listen(cfg)
	if err != nil {
		return err
	}
	lim, err := actorlimit.Start(opts...)
	if err != nil {
		ln.Close()
		return fmt.Errorf("start limiter: %w", err)
	}
	// Deferred, so it runs after serve has shut the server down and no
	// request in flight meets a closed limiter.
	defer func() {
		if err := lim.Close(); err != nil {
			logger.Error("mochi-like: closing the limiter", "err", err)
			return
		}
		logger.Info("mochi-like: limiter closed")
	}()
	var checker rateChecker = lim
	mwCfg := httpadapter.Config{Logger: logger, SecretKey: secretKey}
	var mwLim httpadapter.Limiter = lim
	var obs []httpadapter.Observer
	if cfg.admin != "" {
		adm, err := startAdmin(cfg, lim, redisClient, logger, stdout)
		if err != nil {
			ln.Close()
			return err
		}
		defer func() { _ = adm.close() }()
		if store != nil {
			adm.col.SetStore(storeStats(store))
		}
		obs, mwCfg.Observers = adm.observers, adm.observers
		// Every check, the rules' and the per-peer limit's, is timed.
		tl := adm.col.WrapLimiter(lim)
		checker, mwLim = tl, tl
		// The limits page lists the rules in the file's order, then the
		// per-peer limit, which decides after them.
		order := make([]string, 0, len(rules)+1)
		for _, r := range rules {
			order = append(order, r.Name)
		}
		adm.an.SetOrder(append(order, "per-peer")...)
	}
	handler := newHandler(checker, hiddenFS{root.FS()}, cfg.scaleMs, cfg.limit, logger)
	handler.obs = obs
	if cfg.rules == "" {
		return serve(ctx, newServer(handler), ln, cfg, stdout, logger)
	}
	mwCfg.Rules = rules
	mw, err := httpadapter.New(mwLim, mwCfg)
	if err != nil {
		ln.Close()
		return fmt.Errorf("-rules: %w", err)
	}
	printRules(stdout, cfg.rules, rules)
	err = serve(ctx, newServer(mw.Handler(handler)), ln, cfg, stdout, logger)
	for _, s := range mw.Stats().Rules {
		fmt.Fprintf(stdout, "rule %s: matched %d, allowed %d, blocked %d, monitored %d, shadowed %d, errors %d\n",
			s.Rule, s.Matched, s.Allowed, s.Blocked, s.Monitored, s.Shadowed, s.Errors)
	}
	return err
}

// startAdmin starts what -admin serves for lim: its readiness checks are
// the limiter's and, with -redis, a PING of client.
func startAdmin(cfg config, lim *actorlimit.Limiter, client *redis.Client, logger *slog.Logger, stdout io.Writer) (*admin, error) {
	var checks []readyCheck
	if client != nil {
		checks = append(checks, readyCheck{"redis", func(ctx context.Context) error { return client.Ping(ctx).Err() }})
	}
	adm, err := newAdmin(lim, analytics.Config{}, cfg.adminToken, checks...)
	if err != nil {
		return nil, fmt.Errorf("-admin: %w", err)
	}
	aln, err := listenAdmin(cfg, logger)
	if err != nil {
		_ = adm.close()
		return nil, err
	}
	adm.start(aln, stdout)
	return adm, nil
}

// listen listens on cfg.addr, or on a free port of 127.0.0.1 for the demo.
func listen(cfg config) (net.Listener, error) {
	if cfg.demo {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("-addr: %w", err)
	}
	return ln, nil
}

// parseFlags parses and validates args. For -h it prints the usage to
// stdout and returns flag.ErrHelp.
func parseFlags(args []string, stdout io.Writer) (config, error) {
	flags := flag.NewFlagSet("mochi-like", flag.ContinueOnError)
	flags.SetOutput(io.Discard) // errors are returned, not printed
	var cfg config
	flags.StringVar(&cfg.addr, "addr", defaultAddr, "`address` to listen on (ignored with -demo)")
	flags.StringVar(&cfg.dir, "dir", defaultDir, "`folder` to serve, without its dotfiles")
	flags.Int64Var(&cfg.scaleMs, "scale", defaultScaleMs, "window length in `milliseconds`")
	flags.Int64Var(&cfg.limit, "limit", defaultLimit, "`requests` allowed per peer IP (IPv6: per /64) per window (5 with -demo)")
	flags.BoolVar(&cfg.demo, "demo", false, "send limit+3 requests to a server of its own, print the answers and exit")
	flags.StringVar(&cfg.admin, "admin", "", "`address` to serve the admin pages on (/, /metrics, /limits, /healthz, /readyz); a port alone (:9090) is on 127.0.0.1 (default: none)")
	// The token's default is read after parsing, never given to the flag:
	// -h prints a flag's default.
	flags.StringVar(&cfg.adminToken, "admin-token", "", "bearer `token` that /metrics and /limits require (default: $"+adminTokenEnv+", else none)")
	flags.StringVar(&cfg.rules, "rules", "", "rules `file` (YAML or JSON, package httpadapter) to apply in front of the per-peer limit")
	flags.StringVar(&cfg.secretKeyFile, "secret-key-file", "", "`file` holding the key that hashes the rules' secret grouping values (cookies, Authorization...); servers sharing -redis need the same (default: a random key per process)")
	flags.StringVar(&cfg.redis, "redis", "", "`address` (host:port) of a Redis to keep the counts in, shared with other servers")
	cfg.log = slog.LevelInfo
	flags.Func("log", "lowest `level` logged to stderr: debug, info (the default), warn, error, or off", func(s string) error {
		if s == "off" {
			cfg.logOff = true
			return nil
		}
		cfg.logOff = false
		return cfg.log.UnmarshalText([]byte(s))
	})
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			flags.SetOutput(stdout)
			flags.Usage()
		}
		return config{}, err
	}
	limitSet, tokenSet := false, false
	flags.Visit(func(f *flag.Flag) {
		limitSet = limitSet || f.Name == "limit"
		tokenSet = tokenSet || f.Name == "admin-token"
	})
	if !tokenSet {
		cfg.adminToken = os.Getenv(adminTokenEnv)
	}
	if cfg.demo && !limitSet {
		cfg.limit = demoLimit
	}
	if flags.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q: all settings are flags", flags.Arg(0))
	}
	return cfg, cfg.validate()
}

// validate says which flag is wrong and why, if any.
func (cfg config) validate() error {
	if cfg.admin != "" && !cfg.demo {
		if _, _, err := adminAddr(cfg.admin); err != nil {
			return err
		}
	}
	switch {
	case cfg.scaleMs <= 0 || cfg.scaleMs > maxScaleMs:
		return fmt.Errorf("-scale %d: want a window of 1 to %d milliseconds", cfg.scaleMs, maxScaleMs)
	case cfg.limit < 0:
		return fmt.Errorf("-limit %d: must not be negative", cfg.limit)
	case cfg.demo && cfg.limit > maxDemoLimit:
		return fmt.Errorf("-limit %d: the demo sends limit+3 requests; use at most %d", cfg.limit, maxDemoLimit)
	case cfg.demo && cfg.admin != "":
		return errors.New("-admin: not with -demo, which exits as soon as it has sent its requests")
	case cfg.adminToken != "" && cfg.admin == "":
		return errors.New("-admin-token (or " + adminTokenEnv + ") without -admin: there is no admin listener to protect")
	case strings.ContainsAny(cfg.adminToken, " \t\r\n"):
		return errors.New("-admin-token: a token of visible characters without spaces is wanted")
	case !cfg.demo && cfg.addr == "":
		return errors.New("-addr is empty")
	case cfg.dir == "":
		return errors.New("-dir is empty")
	}
	return nil
}

// readSecretKey reads the key of -secret-key-file: the file's bytes
// without their trailing newlines, as "$(cat FILE)" gives them to a shell.
func readSecretKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-secret-key-file: %w", err)
	}
	b = bytes.TrimRight(b, "\n")
	if len(b) < httpadapter.MinSecretKey {
		return nil, fmt.Errorf("-secret-key-file %s: the key is %d bytes, fewer than the %d wanted (make one with: openssl rand -hex 32 > %s)", path, len(b), httpadapter.MinSecretKey, path)
	}
	return b, nil
}

// newLogger returns the logger that cfg asks for: text to stderr from
// cfg.log up, or one that discards everything with -log off.
func newLogger(cfg config, stderr io.Writer) *slog.Logger {
	if cfg.logOff {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.log}))
}

// redisCheckTimeout bounds the PING that -redis sends at start.
const redisCheckTimeout = 2 * time.Second

// openRedis returns a store in the Redis at addr, logging its outages to
// logger, and its client, once Redis answers a PING: a wrong address is an
// error at start, not a silent fallback later.
func openRedis(ctx context.Context, addr string, logger *slog.Logger) (*redisstore.Store, *redis.Client, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, nil, fmt.Errorf("-redis %q: want host:port: %w", addr, err)
	}
	setRedisLogger(logger)
	// The options redisstore advises, so that an outage costs little wait.
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1})
	pctx, cancel := context.WithTimeout(ctx, redisCheckTimeout)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("-redis %s: no answer: %w", addr, err)
	}
	store, err := redisstore.New(client, redisstore.WithLogger(logger))
	if err != nil {
		client.Close()
		return nil, nil, fmt.Errorf("-redis: %w", err)
	}
	return store, client, nil
}

// go-redis logs on its own, to the process's stderr, through one logger
// for the whole process: a failed dial at every attempt, so a line every
// probe interval while Redis is down. redisLog passes those lines to the
// logger of the latest openRedis at DEBUG; the store logs the outage once,
// at WARN.
var (
	redisLogger     atomic.Pointer[slog.Logger]
	redisLoggerOnce sync.Once
)

type redisLog struct{}

func (redisLog) Printf(ctx context.Context, format string, v ...any) {
	if l := redisLogger.Load(); l != nil {
		l.DebugContext(ctx, "go-redis: "+strings.TrimSpace(fmt.Sprintf(format, v...)))
	}
}

// setRedisLogger makes go-redis log to logger at DEBUG.
func setRedisLogger(logger *slog.Logger) {
	redisLogger.Store(logger)
	redisLoggerOnce.Do(func() { redis.SetLogger(redisLog{}) })
}

// storeStats gives the metrics the store's counters.
func storeStats(s *redisstore.Store) metrics.StoreStatsSource {
	return metrics.StoreStatsFunc(func() metrics.StoreStats {
		st := s.Stats()
		return metrics.StoreStats{Errors: st.Errors, Outages: st.Outages,
			Fallbacks: st.Fallbacks, FailedOpen: st.FailedOpen, FailedClosed: st.FailedClosed,
			CheckErrors: st.CheckErrors}
	})
}
