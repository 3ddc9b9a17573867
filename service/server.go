package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit"
)

// Bounds on a request. A request past the bound on descriptors, entries or
// keys (what the operator's configuration of Envoy decides) is refused with
// InvalidArgument naming it, nothing of it counted, and
// actorlimitd_refused_total counts it by reason. A value past its bound
// (what a client decides) is never refused: it is counted under its digest
// (see MaxStoredID). Zero fields of Options.Bounds take these defaults.
const (
	DefaultMaxDescriptors = 64   // descriptors per request
	DefaultMaxEntries     = 16   // entries per descriptor
	DefaultMaxKeyLength   = 256  // bytes of an entry's key, and of the domain
	DefaultMaxValueLength = 1024 // bytes of a value kept as it is in an id or a label
)

// Bounds limits what one request may hold. A counter id longer than
// MaxStoredID bytes is counted under its digest, so no id is refused.
type Bounds struct {
	Descriptors, Entries, KeyLength, ValueLength int
}

func (b Bounds) withDefaults() Bounds {
	if b.Descriptors <= 0 {
		b.Descriptors = DefaultMaxDescriptors
	}
	if b.Entries <= 0 {
		b.Entries = DefaultMaxEntries
	}
	if b.KeyLength <= 0 {
		b.KeyLength = DefaultMaxKeyLength
	}
	if b.ValueLength <= 0 {
		b.ValueLength = DefaultMaxValueLength
	}
	return b
}

// The response headers Options.ResponseHeaders adds, envoy ratelimit's
// defaults (the IETF draft's names).
const (
	HeaderLimit     = "RateLimit-Limit"
	HeaderRemaining = "RateLimit-Remaining"
	HeaderReset     = "RateLimit-Reset"
)

// DefaultNearLimitRatio is the share of a limit past which allowed hits
// count as near the limit, envoy ratelimit's 0.8.
const DefaultNearLimitRatio = 0.8

// Options configure a Server. Limiter is required; every other zero field
// takes its default, and the options that change decisions are off.
type Options struct {
	// Limiter decides; the Server does not close it.
	Limiter *actorlimit.Limiter
	// Clock must be the Limiter's clock: duration_until_reset and the
	// RateLimit-Reset header of a rule without extensions are read from it,
	// as envoy ratelimit computes them (a whole unit's remaining seconds).
	// Default the wall clock.
	Clock actorlimit.Clock
	// Metrics, if not nil, counts hits and requests.
	Metrics *Metrics
	// Logger gets what goes wrong (never one line per request); default
	// silent.
	Logger *slog.Logger
	// Bounds limits requests.
	Bounds Bounds
	// ResponseHeaders adds RateLimit-Limit, -Remaining and -Reset to every
	// response that has a limited descriptor: the descriptor with the least
	// remaining, or the last one over its limit (envoy ratelimit's
	// LIMIT_RESPONSE_HEADERS_ENABLED).
	ResponseHeaders bool
	// AllOrNothing: a request that any descriptor's limit denies charges
	// none of its descriptors. Off by default, as in envoy ratelimit, which
	// charges every descriptor. Each descriptor is first peeked, then the
	// request counted only if all fit: two concurrent requests may both see
	// room, and then the second is decided (and charged) as by default.
	AllOrNothing bool
	// DeniedNotCounted: hits that a fixed window denies are not counted,
	// so a client that keeps knocking is let in again in the next window
	// at once (the other algorithms never count denied hits). Off by
	// default: envoy ratelimit counts them. Decided as AllOrNothing is, by
	// a peek first.
	DeniedNotCounted bool
	// ShadowMode answers every request OK, whatever its descriptors'
	// statuses say (envoy ratelimit's SHADOW_MODE): a way to watch what a
	// configuration would do.
	ShadowMode bool
	// NearLimitRatio is the share of the limit past which hits count as near
	// it in metrics; default DefaultNearLimitRatio.
	NearLimitRatio float64
	// Secrets says which descriptor values are secret, kept only as their
	// HMAC in ids and labels, and the HMAC's key. The zero value hashes
	// DefaultSecretKeys' values under a key drawn per Server, which New
	// refuses when the Limiter's counts are shared or kept.
	Secrets Secrets
	// MaxHitsAddend, if positive, bounds a descriptor's hits: a larger
	// hits_addend (the request's or the descriptor's) is counted as
	// MaxHitsAddend, never refused (a refusal is an error, which Envoy
	// lets through by default), and actorlimitd_hits_addend_clamped_total
	// counts it. 0, the default, leaves it unbounded, as envoy ratelimit
	// does.
	MaxHitsAddend uint64
	// Tracer, if not nil, starts a span for each request and for each call
	// of the Limiter in it (trace.go). Nil, the default, costs nothing.
	Tracer trace.Tracer
}

// Server answers envoy's Rate Limit Service protocol with envoy
// ratelimit's decisions, made by an actorlimit.Limiter. It opens no socket:
// register it on a grpc.Server, or serve JSONHandler. It is safe for
// concurrent use; SetConfig swaps the configuration under running requests.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	o      Options
	bounds Bounds
	cfg    atomic.Pointer[Config]
	h      *hasher
	// lastWarn is when the limiter's failure was last logged (Unix ns).
	lastWarn atomic.Int64
}

var _ rlsv3.RateLimitServiceServer = (*Server)(nil)

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// ErrNoLimiter is returned by New without a started Limiter.
var ErrNoLimiter = errors.New("service: Options.Limiter is required")

// New returns a Server that decides with c (nil: no domain, every
// descriptor OK).
func New(c *Config, o Options) (*Server, error) {
	if !o.Limiter.Started() {
		return nil, ErrNoLimiter
	}
	if o.Clock == nil {
		o.Clock = wallClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.NearLimitRatio <= 0 || o.NearLimitRatio > 1 {
		o.NearLimitRatio = DefaultNearLimitRatio
	}
	s := &Server{o: o, bounds: o.Bounds.withDefaults()}
	h, err := newHasher(o.Secrets, s.bounds.ValueLength, o.Limiter.SharedCounts())
	if err != nil {
		return nil, err
	}
	s.h = h
	if c == nil {
		c = newConfig()
	}
	if err := s.CheckConfig(c); err != nil {
		return nil, err
	}
	s.cfg.Store(c)
	return s, nil
}

// SetConfig puts c in force for the requests that start after it. The
// counts of every rule are kept: a counter is the descriptor's, under its
// rule's algorithm and period, so a rule whose algorithm and period did not
// change keeps counting where it was. Check c with CheckConfig first.
func (s *Server) SetConfig(c *Config) { s.cfg.Store(c) }

// CheckConfig returns an error wrapping ErrSecretKey if c marks a key
// secret (secret: true) while the Server has no Secrets.Key and the
// Limiter's counts are shared or kept: such values would be counted under
// a key of this process only. The Reloader checks every configuration so.
func (s *Server) CheckConfig(c *Config) error {
	if s.h.keyed || !s.o.Limiter.SharedCounts() {
		return nil
	}
	for _, d := range c.Domains() {
		for k := range c.secret[d] {
			return fmt.Errorf("%w is empty while the limiter's counts are shared or kept, and domain %q marks key %q secret: give every process the same key", ErrSecretKey, d, k)
		}
	}
	return nil
}

// Config returns the configuration in force.
func (s *Server) Config() *Config { return s.cfg.Load() }

// item is one descriptor of a request, as it is decided.
type item struct {
	rule      *Rule // nil: no limit applies
	match     Match
	unlimited bool
	policy    actorlimit.Policy
	hits      int64
	id        string
	counted   bool // hit through the limiter, else peeked
	res       actorlimit.Result
}

// ShouldRateLimit decides a request as envoy ratelimit does. The
// statuses' current_limit is the rule's own message, shared by every
// answer: read it, never change it.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if s.o.Tracer != nil {
		return s.traced(ctx, req)
	}
	return s.shouldRateLimit(ctx, req)
}

func (s *Server) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	resp, err := s.decide(ctx, req)
	if m := s.o.Metrics; m != nil {
		m.duration.Observe(time.Since(start).Seconds())
		code := "ok"
		switch {
		case status.Code(err) == codes.InvalidArgument:
			code = "invalid"
		case err != nil:
			code = "error"
		case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
			code = "over_limit"
		}
		m.codes[code].Inc()
	}
	return resp, err
}

// The reasons of refusals, actorlimitd_refused_total's label: each is
// what the operator's configuration of Envoy decides, never a client.
const (
	refusedDomain        = "domain"         // empty, or over the key length bound
	refusedNoDescriptors = "no_descriptors" // an empty list
	refusedDescriptors   = "descriptors"    // over the bound
	refusedEntries       = "entries"        // over the bound, or a null descriptor
	refusedKeyLength     = "key_length"     // over the bound
	refusedOverrideUnit  = "override_unit"  // a limit override's unit unknown
	refusedMalformed     = "malformed"      // not a RateLimitRequest: never from Envoy
)

// refusedReasons are the refusals' reasons, for the metric.
var refusedReasons = []string{refusedDomain, refusedNoDescriptors, refusedDescriptors, refusedEntries, refusedKeyLength, refusedOverrideUnit, refusedMalformed}

// refusal is the error of a refused request: InvalidArgument, with the
// reason actorlimitd_refused_total counts it under.
type refusal struct {
	reason string
	st     *status.Status
}

func (r *refusal) Error() string { return r.st.Err().Error() }

// GRPCStatus makes status.Code and status.Convert read r as its status.
func (r *refusal) GRPCStatus() *status.Status { return r.st }

// invalid returns the refusal of a request for reason.
func invalid(reason, format string, args ...any) error {
	return &refusal{reason: reason, st: status.Newf(codes.InvalidArgument, format, args...)}
}

// countRefusal counts err in actorlimitd_refused_total if it is a refusal.
func (s *Server) countRefusal(err error) {
	var r *refusal
	if m := s.o.Metrics; m != nil && errors.As(err, &r) {
		m.refusals[r.reason].Inc()
	}
}

// invalid counts a refusal for reason and returns its error.
func (s *Server) invalid(reason, format string, args ...any) error {
	err := invalid(reason, format, args...)
	s.countRefusal(err)
	return err
}

// validate refuses a request past a bound of what the operator's
// configuration decides. Values are not bounded here: a long one is
// counted under its digest.
func (s *Server) validate(req *rlsv3.RateLimitRequest) error {
	b := s.bounds
	if req.GetDomain() == "" {
		return s.invalid(refusedDomain, "rate limit domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		return s.invalid(refusedNoDescriptors, "rate limit descriptor list must not be empty")
	}
	if len(req.GetDomain()) > b.KeyLength {
		return s.invalid(refusedDomain, "domain is %d bytes, over the bound of %d bytes (the key length bound)", len(req.GetDomain()), b.KeyLength)
	}
	if n := len(req.GetDescriptors()); n > b.Descriptors {
		return s.invalid(refusedDescriptors, "%d descriptors, over the bound of %d descriptors per request", n, b.Descriptors)
	}
	for i, d := range req.GetDescriptors() {
		if d == nil {
			return s.invalid(refusedEntries, "descriptor %d is null", i)
		}
		if n := len(d.GetEntries()); n > b.Entries {
			return s.invalid(refusedEntries, "descriptor %d has %d entries, over the bound of %d entries per descriptor", i, n, b.Entries)
		}
		for j, e := range d.GetEntries() {
			if n := len(e.GetKey()); n > b.KeyLength {
				return s.invalid(refusedKeyLength, "descriptor %d, entry %d: key is %d bytes, over the bound of %d bytes", i, j, n, b.KeyLength)
			}
		}
	}
	return nil
}

func (s *Server) decide(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := s.validate(req); err != nil {
		return nil, err
	}
	cfg := s.cfg.Load()
	descs := req.GetDescriptors()
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	items := sc.take(len(descs))
	var replaced map[string]bool
	for i, d := range descs {
		it := &items[i]
		if l := d.GetLimit(); l != nil && cfg.domains[req.GetDomain()] != nil {
			// envoy ratelimit's override: the request's limit, no name, no shadow mode.
			unit := Unit(l.GetUnit())
			if unitSeconds(unit) == 0 {
				return nil, s.invalid(refusedOverrideUnit, "descriptor %d: the limit override's unit %v is not a known unit", i, l.GetUnit())
			}
			it.rule = &Rule{Domain: req.GetDomain(), Path: "limit_override", Unit: unit, RequestsPerUnit: l.GetRequestsPerUnit(),
				Policy: actorlimit.Policy{Limit: int64(l.GetRequestsPerUnit()), Period: time.Duration(unitSeconds(unit)) * time.Second}}
			it.match = Match{Rule: it.rule, Known: true, label: overrideLabel(d), detailed: true, secret: cfg.secret[req.GetDomain()]}
		} else {
			it.match = cfg.match(req.GetDomain(), d, s.h)
			it.rule = it.match.Rule
			if !it.match.Known && s.o.Metrics != nil {
				s.o.Metrics.unknownDomain.Inc()
			}
		}
		if it.rule == nil {
			continue
		}
		for _, r := range it.rule.Replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[r] = true
		}
		if it.rule.Unlimited {
			it.unlimited, it.rule = true, nil
		}
	}
	for i, d := range descs {
		it := &items[i]
		if it.rule != nil && it.rule.Name != "" && replaced[it.rule.Name] {
			it.rule = nil
		}
		if it.rule == nil {
			continue
		}
		it.policy = it.rule.Policy
		it.hits = hitsAddend(req, d)
		if m := s.o.MaxHitsAddend; m > 0 && uint64(it.hits) > m {
			it.hits = int64(min(m, math.MaxInt64))
			if s.o.Metrics != nil {
				s.o.Metrics.clamped.Inc()
			}
		}
		it.id = it.match.id(req.GetDomain(), d, s.h)
	}
	if err := s.count(ctx, items, sc); err != nil {
		switch {
		case errors.Is(err, actorlimit.ErrInvalidArgument):
			return nil, status.Error(codes.InvalidArgument, err.Error())
		case errors.Is(err, context.Canceled):
			return nil, status.Error(codes.Canceled, err.Error())
		case errors.Is(err, context.DeadlineExceeded):
			return nil, status.Error(codes.DeadlineExceeded, err.Error())
		}
		if now := time.Now().UnixNano(); now-s.lastWarn.Load() > int64(time.Second) {
			s.lastWarn.Store(now) // at most a line a second, not one per request
			s.o.Logger.Warn("the limiter did not decide", "err", err)
		}
		return nil, status.Error(codes.Unavailable, "the limiter did not decide: "+err.Error())
	}
	return s.respond(req, items), nil
}

// scratch holds a request's working slices between requests, so that a
// decision allocates little more than its answer.
type scratch struct {
	items   []item
	hits    []actorlimit.HitRequest
	idx     []int
	results []actorlimit.Result
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// take returns n zero items.
func (sc *scratch) take(n int) []item {
	if cap(sc.items) < n {
		sc.items = make([]item, n)
	}
	sc.items = sc.items[:n]
	return sc.items
}

// release forgets what the request held and puts sc back in the pool; the
// slices are not kept past a bound, so that one huge request does not pin
// its memory.
func (sc *scratch) release() {
	clear(sc.items)
	clear(sc.hits)
	if cap(sc.items) > 4*DefaultMaxDescriptors {
		return
	}
	sc.items, sc.hits, sc.idx, sc.results = sc.items[:0], sc.hits[:0], sc.idx[:0], sc.results[:0]
	scratchPool.Put(sc)
}

// hitsAddend is envoy ratelimit's: the descriptor's own when present (0:
// checked, not counted), else the request's, at least 1.
func hitsAddend(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	if h := d.GetHitsAddend(); h != nil {
		if h.GetValue() > math.MaxInt64 {
			return math.MaxInt64
		}
		return int64(h.GetValue())
	}
	return max(1, int64(req.GetHitsAddend()))
}

func overrideLabel(d *ratelimitv3.RateLimitDescriptor) string {
	var b strings.Builder
	b.WriteString("limit_override")
	for _, e := range d.GetEntries() {
		b.WriteByte('.')
		b.WriteString(e.GetKey())
	}
	return b.String()
}

// fits reports whether hits more hits would be allowed on a peeked state.
func fits(it *item) bool {
	if it.policy.Algorithm == actorlimit.FixedWindow {
		return satAdd(it.res.Count, it.hits) <= it.policy.Limit
	}
	return it.res.Remaining >= it.hits
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// count decides the items: peeks those checked without counting (and,
// with AllOrNothing or DeniedNotCounted, every one first), then hits the
// others in one HitMany, in order.
func (s *Server) count(ctx context.Context, items []item, sc *scratch) error {
	peekAll := s.o.AllOrNothing || s.o.DeniedNotCounted
	blocked := false
	for i := range items {
		it := &items[i]
		if it.rule == nil || (it.hits > 0 && !peekAll) {
			continue
		}
		res, err := s.peek(ctx, it.id, it.policy)
		if err != nil {
			return err
		}
		it.res = res
		if it.hits > 0 && !fits(it) && !it.rule.ShadowMode && !it.rule.QuotaMode {
			blocked = true
		}
	}
	hits, idx := sc.hits[:0], sc.idx[:0]
	for i := range items {
		it := &items[i]
		if it.rule == nil || it.hits == 0 {
			continue
		}
		if peekAll && (s.o.AllOrNothing && blocked || s.o.DeniedNotCounted && !fits(it)) {
			continue
		}
		hits = append(hits, actorlimit.HitRequest{ID: it.id, Policy: it.policy, N: it.hits})
		idx = append(idx, i)
	}
	if len(hits) == 0 {
		return nil
	}
	sc.hits, sc.idx = hits, idx
	results := sc.results[:0]
	for range hits {
		results = append(results, actorlimit.Result{})
	}
	sc.results = results
	if err := s.hitMany(ctx, hits, results); err != nil {
		return err
	}
	for k, i := range idx {
		items[i].res, items[i].counted = results[k], true
	}
	// A descriptor checked without counting (hits_addend 0) sees, as in
	// envoy ratelimit's pipeline of INCRBY, the hits of the descriptors
	// before it in the request on the same counter, and not those after:
	// the state the last of them left, else the state peeked before.
	for i := range items {
		it := &items[i]
		if it.rule == nil || it.hits != 0 {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			e := &items[j]
			if e.counted && e.id == it.id && e.policy.Algorithm == it.policy.Algorithm && e.policy.Period == it.policy.Period {
				it.res = e.res
				break
			}
		}
	}
	return nil
}

// respond builds envoy ratelimit's answer from the decided items. The
// answer and its statuses are parts of one allocation up to 4 descriptors
// (see newAnswer).
func (s *Server) respond(req *rlsv3.RateLimitRequest, items []item) *rlsv3.RateLimitResponse {
	resp, sts, durs := newAnswer(len(items))
	overall := rlsv3.RateLimitResponse_OK
	now := s.o.Clock.Now()
	minRemaining := uint32(math.MaxUint32)
	var minStatus *rlsv3.RateLimitResponse_DescriptorStatus
	var minReset int64
	for i := range items {
		it, st := &items[i], &sts[i]
		if it.unlimited {
			st.Code, st.LimitRemaining = rlsv3.RateLimitResponse_OK, math.MaxUint32
			continue
		}
		if it.rule == nil {
			st.Code = rlsv3.RateLimitResponse_OK
			continue
		}
		over, reset := s.status(st, &durs[i], req.GetDomain(), it, now)
		if s.o.ResponseHeaders && st.LimitRemaining < minRemaining {
			minStatus, minRemaining, minReset = st, st.LimitRemaining, reset
		}
		if !over {
			continue
		}
		if it.rule.QuotaMode {
			st.Code, st.DurationUntilReset = rlsv3.RateLimitResponse_OK, nil
			continue
		}
		overall = rlsv3.RateLimitResponse_OVER_LIMIT
		if s.o.ResponseHeaders {
			minStatus, minRemaining, minReset = st, 0, reset
		}
	}
	if minStatus != nil {
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: HeaderLimit, Value: strconv.FormatUint(uint64(minStatus.CurrentLimit.GetRequestsPerUnit()), 10)},
			{Key: HeaderRemaining, Value: strconv.FormatUint(uint64(minStatus.LimitRemaining), 10)},
			{Key: HeaderReset, Value: strconv.FormatInt(minReset, 10)},
		}
	}
	if s.o.ShadowMode {
		overall = rlsv3.RateLimitResponse_OK
	}
	resp.OverallCode = overall
	return resp
}

// newAnswer returns an answer of n statuses (resp.Statuses points into
// sts, zero) and n durations for them: for up to 4 statuses, parts of one
// allocation, else four.
func newAnswer(n int) (resp *rlsv3.RateLimitResponse, sts []rlsv3.RateLimitResponse_DescriptorStatus, durs []durationpb.Duration) {
	var ptrs []*rlsv3.RateLimitResponse_DescriptorStatus
	switch {
	case n <= 1:
		a := new(struct {
			resp rlsv3.RateLimitResponse
			ptrs [1]*rlsv3.RateLimitResponse_DescriptorStatus
			sts  [1]rlsv3.RateLimitResponse_DescriptorStatus
			durs [1]durationpb.Duration
		})
		resp, ptrs, sts, durs = &a.resp, a.ptrs[:n:n], a.sts[:n], a.durs[:n]
	case n <= 4:
		a := new(struct {
			resp rlsv3.RateLimitResponse
			ptrs [4]*rlsv3.RateLimitResponse_DescriptorStatus
			sts  [4]rlsv3.RateLimitResponse_DescriptorStatus
			durs [4]durationpb.Duration
		})
		resp, ptrs, sts, durs = &a.resp, a.ptrs[:n:n], a.sts[:n], a.durs[:n]
	default:
		resp, ptrs = new(rlsv3.RateLimitResponse), make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)
		sts, durs = make([]rlsv3.RateLimitResponse_DescriptorStatus, n), make([]durationpb.Duration, n)
	}
	for i := range ptrs {
		ptrs[i] = &sts[i]
	}
	resp.Statuses = ptrs
	return resp, sts, durs
}

// status fills st, a zero status, with a limited descriptor's status (its
// duration until reset in dur) and returns whether it is over its limit
// (shadow mode answers OK and is not over), and its reset in whole seconds
// for the RateLimit-Reset header. It counts the metrics.
func (s *Server) status(st *rlsv3.RateLimitResponse_DescriptorStatus, dur *durationpb.Duration, domain string, it *item, now time.Time) (bool, int64) {
	r, lim := it.rule, it.policy.Limit
	var after, before int64
	var over bool
	var remaining int64
	switch {
	case it.policy.Algorithm == actorlimit.FixedWindow:
		// envoy ratelimit's arithmetic: the window's count after the hits
		// against the limit. Hits peeked and not counted are added when
		// they did not fit (denied, not counted), not when another
		// descriptor blocked them (AllOrNothing: nothing changed).
		after = it.res.Count
		if !it.counted && it.hits > 0 && !fits(it) {
			after = satAdd(after, it.hits)
		}
		before = max(0, after-it.hits)
		over = after > lim
		remaining = lim - after
	default:
		over = it.hits > 0 && !it.counted && !fits(it) || it.counted && !it.res.Allowed
		remaining = it.res.Remaining
		after = max(0, lim-remaining)
		before = max(0, after-it.hits)
		if over {
			before, after = after, satAdd(after, it.hits)
		}
	}
	if over {
		remaining = 0
	}
	if remaining > math.MaxUint32 {
		remaining = math.MaxUint32
	}
	st.Code = rlsv3.RateLimitResponse_OK
	st.CurrentLimit = r.currentLimit()
	st.LimitRemaining = uint32(remaining)
	var reset int64
	if r.Extended {
		// durationpb.New's fields, without its allocation.
		dur.Seconds, dur.Nanos = int64(it.res.ResetAfter/time.Second), int32(it.res.ResetAfter%time.Second)
		reset = int64((it.res.ResetAfter + time.Second - 1) / time.Second)
	} else {
		sec := unitSeconds(r.Unit)
		reset = sec - now.Unix()%sec
		dur.Seconds = reset
	}
	st.DurationUntilReset = dur
	if over {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if m := s.o.Metrics; m != nil {
		s.countMetrics(m.counters(domain, it.match, max(1, it.hits)), it, lim, before, after, over)
	}
	if over && r.ShadowMode {
		st.Code = rlsv3.RateLimitResponse_OK
		return false, reset
	}
	return over, reset
}

// countMetrics counts a descriptor's hits as envoy ratelimit does: of the
// hits that crossed the limit, those past it are over the limit and those
// between the near-limit threshold and the limit near it.
func (s *Server) countMetrics(c *ruleCounters, it *item, lim, before, after int64, over bool) {
	h := float64(it.hits)
	c.hits.Add(h)
	near := int64(math.Floor(float64(lim) * s.o.NearLimitRatio))
	if over {
		var overHits float64
		if before >= lim {
			overHits = h
		} else {
			overHits = float64(after - lim)
			c.near.Add(float64(lim - max(near, before)))
		}
		c.over.Add(overHits)
		if it.res.Cached {
			c.overLocal.Add(overHits)
		}
		if it.rule.ShadowMode {
			c.shadow.Add(overHits)
		}
		return
	}
	if after > near {
		if before >= near {
			c.near.Add(h)
		} else {
			c.near.Add(float64(after - near))
		}
	}
	c.within.Add(h)
}

// String describes the bounds, for logs and errors.
func (b Bounds) String() string {
	b = b.withDefaults()
	return fmt.Sprintf("%d descriptors a request, %d entries a descriptor, keys of %d bytes, values of %d bytes", b.Descriptors, b.Entries, b.KeyLength, b.ValueLength)
}
