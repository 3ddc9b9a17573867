package httpadapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorlimit/actorlimit"
)

// Limiter counts hits; *actorlimit.Limiter is one. HitMany counts every
// request of hits in one call and writes the i-th decision to results[i].
// It must not keep hits or results after it returns. An error that wraps
// [actorlimit.ErrInvalidArgument] must mean that a request of hits was
// refused and nothing was counted: the middleware then asks again, one
// request at a time, so that the rule whose request is refused does not
// stop the others. Any other error is a failure of the limiter as a whole
// (closed, timed out).
type Limiter interface {
	HitMany(ctx context.Context, hits []actorlimit.HitRequest, results []actorlimit.Result) error
}

// ErrInvalidConfig is wrapped by every error of [New], [Middleware.SetRules]
// and the rules parsers; test it with errors.Is.
var ErrInvalidConfig = errors.New("httpadapter: invalid configuration")

// errNotMade is the error of a zero Middleware, one not made by New: its
// SetRules returns it, its handler answers 500 with it and passes nothing
// on.
var errNotMade = fmt.Errorf("%w: the Middleware was not made by httpadapter.New", ErrInvalidConfig)

// Defaults used when Config leaves a field zero.
const (
	DefaultIPv6Prefix = 64
	DefaultIPv4Prefix = 32
)

// Config configures a [Middleware]. Only Rules may change later, with
// [Middleware.SetRules].
type Config struct {
	// Rules is the initial rule set. It may be empty only with
	// AllowNoRules.
	Rules []Rule
	// AllowNoRules lets Rules, and every set given to [Middleware.SetRules]
	// later, be empty: every request then passes unlimited. Without it an
	// empty set is an error, so that an empty rules file, or a reload with
	// one, cannot remove every limit by mistake.
	AllowNoRules bool
	// Logger receives the middleware's warnings, each logged once per state
	// change, never per request: a rule whose hits the limiter refuses
	// (once per rule), the limiter failing (closed, timing out) and
	// answering again, a rule set swapped. nil, the default, logs nothing.
	Logger *slog.Logger
	// TrustedProxies lists the networks of the proxies in front of the
	// server. Only a request whose direct peer (RemoteAddr) is in one of
	// them has its ClientIPHeader believed. Empty: the client IP is always
	// the peer. An IPv4-mapped prefix (::ffff:127.0.0.1/128) is taken as
	// the IPv4 one (127.0.0.1/32), as addresses are unmapped.
	TrustedProxies []netip.Prefix
	// ClientIPHeader is the one forwarding header the proxies set:
	// XForwardedFor (the default), Forwarded or XRealIP. Only one is read,
	// so a client cannot pick a header the proxy does not overwrite.
	ClientIPHeader string
	// IPv6Prefix is how many leading bits of an IPv6 client IP make its
	// "ip" group (default 64: one group per customer network, so a client
	// cannot escape by rotating through its own /64).
	IPv6Prefix int
	// IPv4Prefix is the same for IPv4 (default 32).
	IPv4Prefix int
	// UnknownIP says what happens when the client IP cannot be determined.
	UnknownIP UnknownIP
	// Country maps a client IP to a country code, for CountryIn conditions;
	// it is called at most once per request and must be safe for concurrent
	// use.
	Country func(netip.Addr) string
	// FailClosed answers 503 Service Unavailable when the limiter fails (it
	// is closed, or the call times out) and a block or shadow rule
	// matched, or when it refuses the hit of a block or shadow rule and no
	// other rule blocks or shadows the request. The default is to fail
	// open: the request passes (what the rules it did decide say). Either
	// way the failure is counted.
	FailClosed bool
	// LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds) to the draft RateLimit fields.
	LegacyHeaders bool
	// Timeout bounds each call to the limiter; 0 leaves only the request's
	// own context.
	Timeout time.Duration
	// NoDelay passes an allowed request on at once even when the limiter
	// asks it to wait (Result.Delay, given by LeakyBucket), as nginx's
	// limit_req nodelay. By default the middleware waits that long, or
	// until the request's context ends, before calling the next handler.
	NoDelay bool
	// SecretKey is the key of the HMAC-SHA256 that hashes secret grouping
	// values (every cookie, the Authorization, Proxy-Authorization and
	// Cookie headers, what a rule lists in [Rule.Secret]) before they
	// become part of a counter id, so that no credential is kept in clear
	// in the limiter's store, its snapshots or the analytics. Empty, the
	// default, is a key of 32 random bytes drawn once per process: right
	// for one server, but servers that share counts (a Redis store, a
	// cluster) must be given the same key, or each counts a client's
	// token under an id of its own: New refuses an empty key with a
	// limiter whose SharedCounts() bool method reports true
	// (actorlimit.Limiter's does for a Redis store, a cluster member and
	// persistence). Set, it is at least [MinSecretKey]
	// bytes, and makes a token's group computable by whoever holds it
	// (docs/security.md gives the command).
	SecretKey []byte
	// Observers see every rule's decision for every request (see
	// [Observer]): a metrics collector, the analytics. None by default.
	Observers []Observer
}

// Middleware limits the requests that pass through it by rules. Its
// methods are safe for concurrent use. Make it with [New]: a zero
// Middleware answers every request 500 without passing it on, and its
// SetRules returns an error wrapping [ErrInvalidConfig].
type Middleware struct {
	lim     Limiter
	ips     ipResolver
	bits4   int
	bits6   int
	unknown UnknownIP
	country func(netip.Addr) string
	closed  bool
	legacy  bool
	timeout time.Duration
	noDelay bool
	noRules bool // AllowNoRules
	log     *slog.Logger
	sleep   func(context.Context, time.Duration) error // a seam for tests
	obs     []Observer
	macs    *sync.Pool // of *macer, HMACs under the secret key

	rules atomic.Pointer[ruleSet]

	mu    sync.Mutex            // serializes SetRules
	stats map[string]*ruleStats // by rule name, for the current set

	limiterErrors atomic.Uint64
	unknownIPs    atomic.Uint64
	failing       atomic.Bool // the limiter's failure was logged, and it has not answered since
}

// New returns a middleware that asks lim, configured by cfg. It refuses a
// limiter that could not answer: nil, a nil pointer of a type that
// implements Limiter, or a limiter that was never started (a zero
// actorlimit.Limiter; any Limiter with a Started() bool method that
// returns false).
func New(lim Limiter, cfg Config) (*Middleware, error) {
	if err := checkLimiter(lim); err != nil {
		return nil, err
	}
	m := &Middleware{
		lim:     lim,
		bits4:   cfg.IPv4Prefix,
		bits6:   cfg.IPv6Prefix,
		unknown: cfg.UnknownIP,
		country: cfg.Country,
		closed:  cfg.FailClosed,
		legacy:  cfg.LegacyHeaders,
		timeout: cfg.Timeout,
		noDelay: cfg.NoDelay,
		noRules: cfg.AllowNoRules,
		log:     cfg.Logger,
		sleep:   sleep,
		obs:     cfg.Observers,
		stats:   map[string]*ruleStats{},
	}
	if m.bits4 == 0 {
		m.bits4 = DefaultIPv4Prefix
	}
	if m.bits6 == 0 {
		m.bits6 = DefaultIPv6Prefix
	}
	switch {
	case m.bits4 < 0 || m.bits4 > 32:
		return nil, fmt.Errorf("%w: IPv4Prefix %d is not in 1..32", ErrInvalidConfig, cfg.IPv4Prefix)
	case m.bits6 < 0 || m.bits6 > 128:
		return nil, fmt.Errorf("%w: IPv6Prefix %d is not in 1..128", ErrInvalidConfig, cfg.IPv6Prefix)
	case cfg.UnknownIP != UnknownIPGroup && cfg.UnknownIP != UnknownIPReject:
		return nil, fmt.Errorf("%w: UnknownIP %d is unknown", ErrInvalidConfig, cfg.UnknownIP)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("%w: Timeout %v is negative", ErrInvalidConfig, cfg.Timeout)
	}
	switch n := len(cfg.SecretKey); {
	case n == 0 && sharedCounts(lim):
		return nil, fmt.Errorf("%w: SecretKey is empty, and the limiter's counts are shared or kept (a Redis store, a cluster, persistence): "+
			"a key drawn per process would count a secret value under another id on every process and after every restart; "+
			"give every process the same key of at least %d bytes (head -c 32 /dev/urandom > key)", ErrInvalidConfig, MinSecretKey)
	case n == 0:
		m.macs = newMacs(processKey())
	case n < MinSecretKey:
		return nil, fmt.Errorf("%w: SecretKey is %d bytes, fewer than the %d wanted", ErrInvalidConfig, n, MinSecretKey)
	default:
		m.macs = newMacs(cfg.SecretKey)
	}
	for i, o := range cfg.Observers {
		if o == nil {
			return nil, fmt.Errorf("%w: Observers[%d] is nil", ErrInvalidConfig, i)
		}
	}
	m.obs = slices.Clone(cfg.Observers)
	if err := m.ips.configure(cfg.TrustedProxies, cfg.ClientIPHeader); err != nil {
		return nil, err
	}
	if err := m.SetRules(cfg.Rules); err != nil {
		return nil, err
	}
	return m, nil
}

// configure sets v up from Config.TrustedProxies and
// Config.ClientIPHeader.
func (v *ipResolver) configure(trusted []netip.Prefix, header string) error {
	if len(trusted) == 0 {
		return nil
	}
	h := http.CanonicalHeaderKey(header)
	switch h {
	case "":
		h = XForwardedFor
	case XForwardedFor, Forwarded, XRealIP:
	default:
		return fmt.Errorf("%w: ClientIPHeader %q is not X-Forwarded-For, Forwarded or X-Real-IP", ErrInvalidConfig, header)
	}
	v.header = h
	for i, p := range trusted {
		if !p.IsValid() {
			return fmt.Errorf("%w: TrustedProxies[%d] is not a valid prefix", ErrInvalidConfig, i)
		}
		v.trusted = append(v.trusted, unmapPrefix(p))
	}
	return nil
}

// checkLimiter says what makes lim unable to answer, if anything.
func checkLimiter(lim Limiter) error {
	if lim == nil {
		return fmt.Errorf("%w: limiter is nil", ErrInvalidConfig)
	}
	switch v := reflect.ValueOf(lim); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		if v.IsNil() {
			return fmt.Errorf("%w: limiter is a nil %T", ErrInvalidConfig, lim)
		}
	}
	if s, ok := lim.(interface{ Started() bool }); ok && !s.Started() {
		return fmt.Errorf("%w: limiter %T was never started (make it with actorlimit.Start or actorlimit.Spawn)", ErrInvalidConfig, lim)
	}
	return nil
}

// sharedCounts reports whether lim says its counts are shared with other
// processes or kept across restarts (actorlimit.Limiter.SharedCounts).
func sharedCounts(lim Limiter) bool {
	s, ok := lim.(interface{ SharedCounts() bool })
	return ok && s.SharedCounts()
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Handler wraps next: it is the middleware, of the shape
// func(http.Handler) http.Handler.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

// request is the per-request state that conditions and keys read; client
// IP, country and cleaned path are computed once, when first needed.
type request struct {
	m        *Middleware
	r        *http.Request
	ip       netip.Addr
	ipState  uint8 // 0 not yet, 1 known, 2 unknown
	cc       string
	ccDone   bool
	cleaned  string
	pathDone bool
	rejected bool // the client IP was needed, unknown, and UnknownIPReject
}

func (q *request) clientIP() (netip.Addr, bool) {
	if q.ipState == 0 {
		q.ipState = 2
		if ip, ok := q.m.ips.resolve(q.r); ok {
			q.ip, q.ipState = ip, 1
		}
	}
	if q.ipState == 2 && q.m.unknown == UnknownIPReject {
		q.rejected = true
	}
	return q.ip, q.ipState == 1
}

func (q *request) groupIP() (netip.Addr, bool) {
	ip, ok := q.clientIP()
	if !ok {
		return ip, false
	}
	return group(ip, q.m.bits4, q.m.bits6), true
}

func (q *request) country() (string, bool) {
	ip, ok := q.clientIP()
	if !ok {
		return "", false
	}
	if !q.ccDone {
		q.cc, q.ccDone = q.m.country(ip), true
	}
	return q.cc, true
}

func (q *request) path() string {
	if !q.pathDone {
		p := ""
		if q.r.URL != nil {
			p = q.r.URL.Path
		}
		q.cleaned, q.pathDone = cleanPath(p), true
	}
	return q.cleaned
}

// scratch is the pooled per-request memory of the hot path.
type scratch struct {
	q     request
	hits  []actorlimit.HitRequest
	res   []actorlimit.Result
	rules []*rule
	ends  []int // of each rule's key in buf
	buf   []byte
	// refused[i] says the limiter refused the hit of rules[i]; empty unless
	// it refused some (see Middleware.hitEach).
	refused []bool
}

// decided reports whether the limiter decided the hit of rules[i].
func (s *scratch) decided(i int) bool {
	return len(s.refused) == 0 || !s.refused[i]
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

func (s *scratch) release() {
	for i := range s.hits {
		s.hits[i] = actorlimit.HitRequest{}
	}
	clear(s.rules)
	s.q = request{}
	s.hits, s.res, s.rules, s.ends, s.buf = s.hits[:0], s.res[:0], s.rules[:0], s.ends[:0], s.buf[:0]
	s.refused = s.refused[:0]
	scratches.Put(s)
}
