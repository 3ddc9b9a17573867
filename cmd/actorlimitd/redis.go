package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/metrics"
	"github.com/actorlimit/actorlimit/redisstore"
	"github.com/actorlimit/actorlimit/redisstore/busypoll"
)

// redisConn is the flags of one Redis: the main one (-redis-*) or the
// per-second one (-redis-persecond-*). Each maps onto one of envoy
// ratelimit's REDIS_* (or REDIS_PERSECOND_*) variables; docs/service.md
// lists them.
type redisConn struct {
	url            string // -redis, -redis-persecond-url: a URL, host:port or socket path; comma separated for sentinels or cluster seeds
	typ            string // single, sentinel or cluster
	socket         string // tcp or unix; empty: from the address
	auth           string // password, or user:password
	passwordFile   string // file holding the password
	sentinelMaster string
	sentinelAuth   string // password, or user:password, of the sentinels
	tls            bool
	poolSize       int
	timeout        time.Duration
}

// redisFlags are the Redis flags beyond -redis, -redis-timeout and
// -redis-denied-cache (main.go's).
type redisFlags struct {
	main      redisConn // url and timeout are main.go's -redis and -redis-timeout
	perSecond redisConn
	perSecOn  bool
	tlsCA     string
	tlsCert   string
	tlsKey    string
	tlsServer string
	tlsNoHost bool
	keyPrefix string        // env.go's -redis-key-prefix
	winKeys   bool          // -redis-window-keys: fixed windows as a key per window, on this process's clock
	busyPoll  time.Duration // -redis-busy-poll: how long a read polls for a reply (0: it parks at once)

	pollers []*busypoll.Poller // the clients' pollers, with -redis-busy-poll
}

// register adds the flags to fs.
func (r *redisFlags) register(fs *flag.FlagSet) {
	conn := func(c *redisConn, prefix, what string) {
		fs.StringVar(&c.typ, prefix+"-type", "single", what+": single, sentinel or cluster")
		fs.StringVar(&c.socket, prefix+"-socket-type", "", what+": tcp or unix (default: unix for a path, tcp otherwise)")
		fs.StringVar(&c.auth, prefix+"-auth", "", what+": password, or user:password for an ACL user (prefer "+prefix+"-password-file)")
		fs.StringVar(&c.passwordFile, prefix+"-password-file", "", what+": file holding the password (the user from the URL)")
		fs.StringVar(&c.sentinelMaster, prefix+"-sentinel-master", "", what+" with type sentinel: the master's name (or first in the address list)")
		fs.StringVar(&c.sentinelAuth, prefix+"-sentinel-auth", "", what+" with type sentinel: the sentinels' password, or user:password")
		fs.BoolVar(&c.tls, prefix+"-tls", false, what+": connect with TLS (as a rediss:// URL does)")
		fs.IntVar(&c.poolSize, prefix+"-pool-size", 10, what+": connections kept to each Redis server")
	}
	conn(&r.main, "redis", "Redis")
	conn(&r.perSecond, "redis-persecond", "per-second Redis")
	fs.BoolVar(&r.perSecOn, "redis-persecond", false, "decide the rules whose unit is second on a Redis of their own, -redis-persecond-url")
	fs.StringVar(&r.perSecond.url, "redis-persecond-url", "", "with -redis-persecond: the per-second Redis, in -redis's forms")
	fs.DurationVar(&r.perSecond.timeout, "redis-persecond-timeout", 0, "with -redis-persecond: as -redis-timeout, for the per-second Redis (default: -redis-timeout)")
	fs.BoolVar(&r.winKeys, "redis-window-keys", false, "keep each fixed window as a Redis key of its own, counted with INCRBY and PEXPIRE (no Lua; Redis 7.0 or later), and decide every rule on this process's clock, not Redis's: the processes sharing a Redis need synchronised clocks")
	fs.DurationVar(&r.busyPoll, "redis-busy-poll", 0, "how long a read of a Redis connection polls for the reply before it waits in the poller, while no other read is in flight (0: it waits at once; at most 10ms): halves a lone round trip to a Redis nearby on a VM, for a processor busy meanwhile")
	fs.StringVar(&r.tlsCA, "redis-tls-ca", "", "CA file (PEM) that signs the Redis servers' certificates (default: the system's)")
	fs.StringVar(&r.tlsCert, "redis-tls-cert", "", "client certificate file (PEM) for Redis; with -redis-tls-key")
	fs.StringVar(&r.tlsKey, "redis-tls-key", "", "client key file (PEM) for Redis; with -redis-tls-cert")
	fs.StringVar(&r.tlsServer, "redis-tls-server-name", "", "the name the Redis servers' certificates must hold (default: each server's host)")
	fs.BoolVar(&r.tlsNoHost, "redis-tls-skip-hostname-verification", false, "check the Redis servers' certificates against the CA but not their names")
}

// check validates the Redis flags, given main.go's -redis and -redis-timeout.
func (r *redisFlags) check(addr string, timeout time.Duration) error {
	r.main.url, r.main.timeout = addr, timeout
	if r.perSecond.timeout == 0 {
		r.perSecond.timeout = timeout
	}
	switch {
	case r.perSecOn && addr == "":
		return errors.New("-redis-persecond needs -redis: the other rules' Redis")
	case r.perSecOn && r.perSecond.url == "":
		return errors.New("-redis-persecond needs -redis-persecond-url")
	case !r.perSecOn && r.perSecond.url != "":
		return errors.New("-redis-persecond-url is read only with -redis-persecond")
	case (r.tlsCert == "") != (r.tlsKey == ""):
		return errors.New("-redis-tls-cert and -redis-tls-key go together")
	case timeout <= 0 || r.perSecond.timeout <= 0:
		return errors.New("-redis-timeout and -redis-persecond-timeout must be positive")
	case r.busyPoll < 0 || r.busyPoll > busypoll.MaxSpin:
		return fmt.Errorf("-redis-busy-poll %v is not between 0 and %v", r.busyPoll, busypoll.MaxSpin)
	}
	if addr == "" {
		return nil
	}
	if _, err := r.main.parse("redis"); err != nil {
		return err
	}
	if r.perSecOn {
		if _, err := r.perSecond.parse("redis-persecond"); err != nil {
			return err
		}
	}
	return nil
}

// redisTarget is a Redis address list as parsed from the flags.
type redisTarget struct {
	typ            string // single, sentinel or cluster
	network        string
	addrs          []string
	user, password string
	sentinelUser   string
	sentinelPass   string
	master         string
	db             int
	tls            bool
	tlsConfig      *tls.Config // set by client when tls
}

// parse reads c's address, type and credentials; errors name the flag
// (prefix is "redis" or "redis-persecond").
func (c *redisConn) parse(prefix string) (redisTarget, error) {
	urlFlag := "-redis"
	if prefix != "redis" {
		urlFlag = "-" + prefix + "-url"
	}
	t := redisTarget{typ: strings.ToLower(c.typ), master: c.sentinelMaster, tls: c.tls}
	switch t.typ {
	case "single", "sentinel", "cluster":
	default:
		return t, fmt.Errorf("-%s-type %q: want single, sentinel or cluster", prefix, c.typ)
	}
	switch c.socket {
	case "", "tcp", "unix":
	default:
		return t, fmt.Errorf("-%s-socket-type %q: want tcp or unix", prefix, c.socket)
	}
	var userSet, passSet bool
	for i, item := range strings.Split(c.url, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			return t, fmt.Errorf("%s %q: an empty address", urlFlag, c.url)
		case strings.HasPrefix(item, "redis://") || strings.HasPrefix(item, "rediss://") || strings.HasPrefix(item, "unix://"):
			u, err := url.Parse(item)
			if err != nil {
				return t, fmt.Errorf("%s: %w", urlFlag, err)
			}
			if u.RawQuery != "" {
				return t, fmt.Errorf("%s %q: URL parameters are not read: use the -redis-tls-* and -%s-* flags", urlFlag, redactURL(item), prefix)
			}
			if u.User != nil {
				if userSet {
					return t, fmt.Errorf("%s: give the credentials in one address only", urlFlag)
				}
				userSet = true
				t.user = u.User.Username()
				t.password, passSet = u.User.Password()
			}
			if u.Scheme == "unix" {
				if t.typ != "single" {
					return t, fmt.Errorf("%s %q: a socket path goes with -%s-type single only", urlFlag, redactURL(item), prefix)
				}
				t.network = "unix"
				t.addrs = append(t.addrs, u.Path)
				continue
			}
			if u.Scheme == "rediss" {
				t.tls = true
			}
			if _, _, err := net.SplitHostPort(u.Host); err != nil {
				return t, fmt.Errorf("%s %q: want host:port after %s://: %w", urlFlag, redactURL(item), u.Scheme, err)
			}
			t.addrs = append(t.addrs, u.Host)
			if db := strings.Trim(u.Path, "/"); db != "" {
				n, err := strconv.Atoi(db)
				if err != nil || n < 0 {
					return t, fmt.Errorf("%s %q: the database %q is not a number", urlFlag, redactURL(item), db)
				}
				if t.typ == "cluster" && n != 0 {
					return t, fmt.Errorf("%s: a Redis Cluster has database 0 only", urlFlag)
				}
				t.db = n
			}
		case strings.HasPrefix(item, "/"):
			if t.typ != "single" {
				return t, fmt.Errorf("%s %q: a socket path goes with -%s-type single only", urlFlag, item, prefix)
			}
			t.network = "unix"
			t.addrs = append(t.addrs, item)
		case i == 0 && t.typ == "sentinel" && !strings.Contains(item, ":"):
			// envoy ratelimit's form: <master>,<sentinel>,...
			if t.master != "" && t.master != item {
				return t, fmt.Errorf("%s names the master %q, -%s-sentinel-master %q", urlFlag, item, prefix, t.master)
			}
			t.master = item
		default:
			if _, _, err := net.SplitHostPort(item); err != nil {
				return t, fmt.Errorf("%s %q: want a redis:// or rediss:// URL, host:port or a socket path: %w", urlFlag, item, err)
			}
			t.addrs = append(t.addrs, item)
		}
	}
	if c.socket != "" {
		if t.network != "" && t.network != c.socket {
			return t, fmt.Errorf("-%s-socket-type %s: %s is a socket path", prefix, c.socket, urlFlag)
		}
		t.network = c.socket
	}
	if t.network == "" {
		t.network = "tcp"
	}
	switch {
	case len(t.addrs) == 0:
		return t, fmt.Errorf("%s %q: no address", urlFlag, c.url)
	case t.typ == "single" && len(t.addrs) > 1:
		return t, fmt.Errorf("%s lists %d addresses: -%s-type sentinel or cluster takes a list, single one address", urlFlag, len(t.addrs), prefix)
	case t.typ == "sentinel" && t.master == "":
		return t, fmt.Errorf("-%s-type sentinel needs the master's name: -%s-sentinel-master, or first in %s", prefix, prefix, urlFlag)
	case t.typ != "sentinel" && (c.sentinelMaster != "" || c.sentinelAuth != ""):
		return t, fmt.Errorf("-%s-sentinel-master and -%s-sentinel-auth go with -%s-type sentinel", prefix, prefix, prefix)
	}
	given := 0
	for _, b := range []bool{passSet, c.auth != "", c.passwordFile != ""} {
		if b {
			given++
		}
	}
	if given > 1 {
		return t, fmt.Errorf("give the password of %s once: in the URL, -%s-auth or -%s-password-file", urlFlag, prefix, prefix)
	}
	if c.auth != "" {
		if u, p, ok := strings.Cut(c.auth, ":"); ok {
			if userSet && t.user != "" && t.user != u {
				return t, fmt.Errorf("-%s-auth names the user %q, %s %q", prefix, u, urlFlag, t.user)
			}
			t.user, t.password = u, p
		} else {
			t.password = c.auth
		}
	}
	if c.passwordFile != "" {
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			return t, fmt.Errorf("-%s-password-file: %w", prefix, err)
		}
		t.password = strings.TrimRight(string(b), "\r\n")
		if t.password == "" {
			return t, fmt.Errorf("-%s-password-file %s is empty", prefix, c.passwordFile)
		}
	}
	if c.sentinelAuth != "" {
		if u, p, ok := strings.Cut(c.sentinelAuth, ":"); ok {
			t.sentinelUser, t.sentinelPass = u, p
		} else {
			t.sentinelPass = c.sentinelAuth
		}
	}
	return t, nil
}

// redactURL hides a URL's password, for errors and logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// describe says where t is, without its credentials.
func (t redisTarget) describe() string {
	s := t.typ + " " + strings.Join(t.addrs, ",")
	if t.master != "" {
		s += " (master " + t.master + ")"
	}
	if t.tls {
		s += " with TLS"
	}
	if t.password != "" {
		if t.user != "" {
			s += " as " + t.user
		} else {
			s += " with a password"
		}
	}
	return s
}

// tlsConfig returns the client TLS configuration the -redis-tls-* flags ask
// for.
func (r *redisFlags) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.tlsServer}
	if r.tlsCA != "" {
		pem, err := os.ReadFile(r.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("-redis-tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-redis-tls-ca %s: no PEM certificate in it", r.tlsCA)
		}
	}
	if r.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(r.tlsCert, r.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("-redis-tls-cert, -redis-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if r.tlsNoHost {
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true // the chain is still verified, below, without the name
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the Redis server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// dialer returns go-redis's dialer for t: TCP or a socket, then TLS with
// each server's host as the name its certificate must hold (unless the
// configuration names one).
func dialer(timeout time.Duration, cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 5 * time.Minute}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil || cfg == nil {
			return conn, err
		}
		c := cfg
		if c.ServerName == "" && !c.InsecureSkipVerify {
			host, _, _ := net.SplitHostPort(addr)
			c = cfg.Clone()
			c.ServerName = host
		}
		tc := tls.Client(conn, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// client returns the go-redis client of c, with the options redisstore
// advises: a round trip ends at the store's deadline, no retries (the
// store's fallback decides instead).
func (r *redisFlags) client(c *redisConn, prefix string) (redis.UniversalClient, redisTarget, error) {
	t, err := c.parse(prefix)
	if err != nil {
		return nil, t, err
	}
	var tc *tls.Config
	if t.tls {
		if tc, err = r.tlsConfig(); err != nil {
			return nil, t, err
		}
		t.tlsConfig = tc
	}
	if c.poolSize < 1 {
		return nil, t, fmt.Errorf("-%s-pool-size must be at least 1", prefix)
	}
	// A dial may take longer than one round trip's bound: a connection made
	// for a round trip that gave up serves the next one.
	dialTimeout := max(2*time.Second, c.timeout)
	dial := dialer(dialTimeout, tc)
	if r.busyPoll > 0 {
		p, err := busypoll.New(busypoll.Config{Spin: r.busyPoll, TLS: tc, DialTimeout: dialTimeout})
		if err != nil {
			return nil, t, fmt.Errorf("-redis-busy-poll: %w", err)
		}
		r.pollers = append(r.pollers, p)
		dial = p.Dial
	}
	o := &redis.UniversalOptions{
		Addrs: t.addrs, DB: t.db, Username: t.user, Password: t.password,
		SentinelUsername: t.sentinelUser, SentinelPassword: t.sentinelPass, MasterName: t.master,
		ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1, DialTimeout: dialTimeout,
		// RESP2: the store keeps a connection of its own for a lone round
		// trip, past the pool's health check (redisstore's doc).
		Protocol: 2,
		PoolSize: c.poolSize, Dialer: dial,
	}
	switch t.typ {
	case "sentinel":
		return redis.NewFailoverClient(o.Failover()), t, nil
	case "cluster":
		return redis.NewClusterClient(o.Cluster()), t, nil
	}
	so := o.Simple()
	so.Network, so.Addr = t.network, t.addrs[0]
	return redis.NewClient(so), t, nil
}

// refusal reports whether err is Redis refusing this client for good (bad
// credentials, a TLS certificate it or we do not accept), rather than a
// Redis that does not answer yet.
func refusal(err error) bool {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		alert     tls.AlertError
	)
	if errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &alert) {
		return true
	}
	msg := err.Error()
	// "remote error: tls: ...": the server's alert (certificate required,
	// bad certificate, unknown CA), which crypto/tls gives as an unexported
	// type.
	for _, p := range []string{"remote error: tls:", "WRONGPASS", "NOAUTH", "NOPERM", "ERR AUTH", "ERR invalid password", "ERR Client sent AUTH"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// tlsProbe completes a TLS handshake with addr and reads for a moment
// without sending anything: a server that accepts this client says nothing
// (nil), one that refuses its certificate sends its alert, which the read
// returns. Other errors (no answer, a refused connection) are returned as
// they are.
func tlsProbe(network, addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := dialer(2*time.Second, cfg)(ctx, network, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return err
	}
	return nil
}

// openStore connects to one Redis and returns its store. A Redis that does
// not answer yet is not fatal (the store decides on its fallback table until
// it does); one that refuses the credentials or the TLS handshake is.
func (r *redisFlags) openStore(c *redisConn, prefix string, deniedCache time.Duration, log *slog.Logger) (*redisstore.Store, redis.UniversalClient, string, error) {
	client, t, err := r.client(c, prefix)
	if err != nil {
		return nil, nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		if refusal(err) {
			client.Close()
			return nil, nil, "", fmt.Errorf("the Redis %s refused this client (check the credentials and -redis-tls-* flags): %w", t.describe(), err)
		}
		if t.tlsConfig != nil && t.network != "unix" {
			// A server that refuses our certificate under TLS 1.3 says so
			// after the handshake, and the PING may meet a reset instead of
			// its alert: ask again without writing, so that the alert is
			// what we read.
			if perr := tlsProbe(t.network, t.addrs[0], t.tlsConfig); perr != nil && refusal(perr) {
				client.Close()
				return nil, nil, "", fmt.Errorf("the Redis %s refused this client (check the credentials and -redis-tls-* flags): %w", t.describe(), perr)
			}
		}
		log.Warn("Redis does not answer yet: deciding on the local fallback until it does", "redis", t.describe(), "err", err)
	}
	opts := []redisstore.Option{redisstore.WithLogger(log.With("redis", t.describe())), redisstore.WithTimeout(c.timeout),
		redisstore.WithPrefix(r.keyPrefix)}
	if deniedCache > 0 {
		opts = append(opts, redisstore.WithDeniedCache(deniedCache))
	}
	if r.winKeys {
		// A window's number is worked out before the round trip: on this
		// process's clock, for every rule (redisstore.WithWindowKeys).
		opts = append(opts, redisstore.WithCallerTime(), redisstore.WithWindowKeys())
	}
	store, err := redisstore.New(client, opts...)
	if err != nil {
		client.Close()
		return nil, nil, "", fmt.Errorf("-%s: %w", prefix, err)
	}
	return store, client, "Redis " + t.describe(), nil
}

// openRedis starts a limiter on the Redis store (on two, split by period,
// with -redis-persecond), with the client options redisstore advises so
// that a dead Redis costs at most -redis-timeout: the store's local fallback
// table decides meanwhile.
func openRedis(f flags, col *metrics.Collector, log *slog.Logger) (*backend, error) {
	r := &f.redisOpts
	r.keyPrefix = f.compat.keyPrefix
	if err := r.check(f.redis, f.redisTimeout); err != nil {
		return nil, err
	}
	main, mainClient, name, err := r.openStore(&r.main, "redis", f.deniedCache, log)
	if err != nil {
		return nil, err
	}
	closers := []func() error{mainClient.Close}
	var store actorlimit.Store = main
	stats := main.Stats
	if r.perSecOn {
		sec, secClient, secName, err := r.openStore(&r.perSecond, "redis-persecond", f.deniedCache, log)
		if err != nil {
			mainClient.Close()
			return nil, err
		}
		closers = append(closers, secClient.Close)
		split, err := redisstore.NewSplit(sec, main)
		if err != nil {
			mainClient.Close()
			secClient.Close()
			return nil, err
		}
		store, stats, name = split, split.Stats, name+", per-second rules on "+secName
	}
	lim, err := actorlimit.Start(actorlimit.WithStore(store), actorlimit.WithShards(f.shards), actorlimit.WithLogger(log))
	if err != nil {
		for _, c := range closers {
			c()
		}
		return nil, fmt.Errorf("starting the limiter on Redis: %w", err)
	}
	col.SetStore(metrics.StoreStatsFunc(func() metrics.StoreStats {
		st := stats()
		return metrics.StoreStats{Errors: st.Errors, Outages: st.Outages, Fallbacks: st.Fallbacks, FailedOpen: st.FailedOpen,
			FailedClosed: st.FailedClosed, CheckErrors: st.CheckErrors, Cached: st.Cached}
	}))
	return &backend{name: name, limiter: lim, closers: append(closers, lim.Close), pollers: r.pollers}, nil
}

// pollReads is actorlimitd_redis_busy_poll_reads_total, by outcome: the
// reads of the Redis connections that got their reply while they polled,
// that polled in vain and waited, and that did not poll (another read was
// in flight, or polling was paused after polls in vain).
func pollReads(pollers []*busypoll.Poller) prometheus.Collector {
	return pollCollector{pollers: pollers, desc: prometheus.NewDesc("actorlimitd_redis_busy_poll_reads_total",
		"Reads of the Redis connections under -redis-busy-poll, by outcome: polled (the reply was not there at once and came while the read polled), waited (the poll ran out, then the read waited), unpolled (the read did not poll: another read was in flight, or polling was paused).",
		[]string{"outcome"}, nil)}
}

type pollCollector struct {
	pollers []*busypoll.Poller
	desc    *prometheus.Desc
}

func (c pollCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c pollCollector) Collect(ch chan<- prometheus.Metric) {
	var sum busypoll.Stats
	for _, p := range c.pollers {
		st := p.Stats()
		sum.Polled += st.Polled
		sum.Waited += st.Waited
		sum.Unpolled += st.Unpolled
	}
	for _, o := range []struct {
		name string
		n    uint64
	}{{"polled", sum.Polled}, {"waited", sum.Waited}, {"unpolled", sum.Unpolled}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(o.n), o.name)
	}
}
