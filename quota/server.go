package quota

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Options configures a Server. Every bound is on what one client controls;
// a zero field takes its default.
type Options struct {
	// Clock returns the time; time.Now by default. Tests inject a fake.
	Clock func() time.Time
	// Logger logs streams opened and closed at debug level; none by default.
	Logger *slog.Logger
	// MaxStreams bounds the streams open at once (default 10 000); one
	// more is refused with RESOURCE_EXHAUSTED.
	MaxStreams int
	// MaxBucketsPerStream bounds the buckets one stream may report
	// (default 1 000); a bucket beyond it is abandoned, and kept nowhere.
	MaxBucketsPerStream int
	// MaxBuckets bounds the buckets with a division, over all streams
	// (default 100 000); a new bucket beyond it is abandoned.
	MaxBuckets int
	// MaxBucketIDEntries and MaxBucketIDBytes bound a bucket id: its
	// entries (default 16) and the bytes of its keys and values (default
	// 1 024). A larger id ends the stream with INVALID_ARGUMENT.
	MaxBucketIDEntries, MaxBucketIDBytes int
	// ReportsPerSecond and ReportBurst bound a stream's reports (defaults
	// 20 and 100: an Envoy reports once per interval, and once at once for
	// each new bucket). A stream past them ends with RESOURCE_EXHAUSTED.
	ReportsPerSecond, ReportBurst float64
}

func (o *Options) defaults() {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxStreams, 10_000)
	def(&o.MaxBucketsPerStream, 1_000)
	def(&o.MaxBuckets, 100_000)
	def(&o.MaxBucketIDEntries, 16)
	def(&o.MaxBucketIDBytes, 1_024)
	if !(o.ReportsPerSecond > 0) {
		o.ReportsPerSecond = 20
	}
	if !(o.ReportBurst >= 1) {
		o.ReportBurst = 100
	}
}

// Server is the Rate Limit Quota Service: register it on a grpc.Server
// with rlqsv3.RegisterRateLimitQuotaServiceServer. It is safe for
// concurrent use; each stream is one Envoy.
type Server struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer
	opts Options
	cfg  atomic.Pointer[Config]

	mu       sync.Mutex // guards what follows
	buckets  map[string]*bucket
	streams  map[uint64]*stream
	nextID   uint64
	counters map[ruleName]*ruleCounters // kept across reloads: bounded by the rules' names
	rejected map[string]uint64          // by reason

	reports, pending, sent atomic.Int64

	link atomic.Pointer[linkBox] // the fleet it shares its limits with (shared.go)
}

// Stats are a server's running counts.
type Stats struct {
	// Reports is the usage reports handled: every assignment they caused
	// is in an outbox or sent.
	Reports int64
	// Pending is the bucket actions in outboxes, not yet sent.
	Pending int64
	// Responses is the responses sent.
	Responses int64
	// Streams is the streams open.
	Streams int
}

// Stats returns the server's counts: a simulator with a fake clock waits,
// after its reports, for Reports to count them, Pending to be 0 and its
// Envoys to have received Responses, before it moves the clock on.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n := len(s.streams)
	s.mu.Unlock()
	return Stats{Reports: s.reports.Load(), Pending: s.pending.Load(), Responses: s.sent.Load(), Streams: n}
}

// ruleName is a rule's metric labels.
type ruleName struct{ domain, name string }

// ruleCounters are the fleet's reports on the buckets of one rule.
type ruleCounters struct{ allowed, denied atomic.Uint64 }

// bucket is one bucket id of one domain, matched to a rule.
type bucket struct {
	key string
	id  *rlqsv3.BucketId

	mu      sync.Mutex // guards what follows
	rule    *Rule
	cfg     *Config // the configuration rule is of
	ctr     *ruleCounters
	div     *Division
	members map[uint64]*stream
	fleet   fleetBucket    // its part of a limit shared by a fleet (shared.go)
	gone    bool           // no rule of cfg matches it: its Envoys leave it (reload.go)
	last    lastAssignment // assignment.go
}

// stream is one Envoy's stream.
type stream struct {
	id     uint64
	peer   string
	domain string
	// buckets and seen are the recv goroutine's alone.
	buckets map[string]*bucket
	seen    map[string]bool // unmatched buckets answered with a blanket rule
	seenCfg *Config         // the configuration seen's were matched in
	posted  []*stream       // the streams this report posted to (wake.go)
	tokens  float64
	last    time.Time

	mu      sync.Mutex // guards out
	out     map[string]*rlqsv3.RateLimitQuotaResponse_BucketAction
	wake    chan struct{}
	pending *atomic.Int64 // the server's
}

// New returns a server of the rules of cfg (nil: none, every bucket gets
// the abandon action).
func New(cfg *Config, opts Options) *Server {
	opts.defaults()
	if cfg == nil {
		cfg = &Config{domains: map[string]*domainRules{}}
	}
	s := &Server{opts: opts, buckets: map[string]*bucket{}, streams: map[uint64]*stream{},
		counters: map[ruleName]*ruleCounters{}, rejected: map[string]uint64{}}
	s.cfg.Store(cfg)
	return s
}

// SetConfig makes cfg the rules, on the streams open: a bucket already
// divided takes its new rule at its next report (a changed rule sends its
// Envoys new assignments), and one that no rule of cfg matches any more
// gets the default action (see reload.go).
func (s *Server) SetConfig(cfg *Config) { s.cfg.Store(cfg) }

// Config returns the rules in use.
func (s *Server) Config() *Config { return s.cfg.Load() }

var (
	errDomain  = status.Error(codes.InvalidArgument, "quota: the first report must name a domain, and every later one the same or none")
	errStreams = status.Error(codes.ResourceExhausted, "quota: too many streams open")
)

func (s *Server) reject(reason string) {
	s.mu.Lock()
	s.rejected[reason]++
	s.mu.Unlock()
}

// StreamRateLimitQuotas serves one Envoy: it reads its usage reports and
// sends the assignments of its buckets as they change.
func (s *Server) StreamRateLimitQuotas(st grpc.BidiStreamingServer[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]) error {
	str := &stream{buckets: map[string]*bucket{}, seen: map[string]bool{},
		out: map[string]*rlqsv3.RateLimitQuotaResponse_BucketAction{}, wake: make(chan struct{}, 1),
		tokens: s.opts.ReportBurst, pending: &s.pending}
	if p, ok := peer.FromContext(st.Context()); ok && p.Addr != nil {
		str.peer = p.Addr.String()
	}
	s.mu.Lock()
	if len(s.streams) >= s.opts.MaxStreams {
		s.rejected["streams"]++
		s.mu.Unlock()
		return errStreams
	}
	s.nextID++
	str.id = s.nextID
	s.streams[str.id] = str
	s.mu.Unlock()
	s.opts.Logger.Debug("quota stream opened", "stream", str.id, "peer", str.peer)

	done := make(chan struct{})
	sent := make(chan error, 1)
	go func() { sent <- s.sendLoop(st, str, done) }()
	err := s.recvLoop(st, str)
	close(done)
	if serr := <-sent; err == nil {
		err = serr
	}
	s.leave(str)
	str.mu.Lock() // no post comes after leave: drop what was not sent
	s.pending.Add(-int64(len(str.out)))
	clear(str.out)
	str.mu.Unlock()
	s.opts.Logger.Debug("quota stream closed", "stream", str.id, "peer", str.peer, "domain", str.domain, "err", err)
	return err
}

func (s *Server) recvLoop(st grpc.BidiStreamingServer[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse], str *stream) error {
	for {
		msg, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.report(str, msg); err != nil {
			return err
		}
	}
}

// sendLoop sends what str's outbox holds, whenever it is woken, until done.
func (s *Server) sendLoop(st grpc.BidiStreamingServer[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse], str *stream, done <-chan struct{}) error {
	for {
		select {
		case <-done:
			return nil
		case <-st.Context().Done():
			return nil
		case <-str.wake:
		}
		str.mu.Lock()
		keys := make([]string, 0, len(str.out))
		for k := range str.out {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		resp := &rlqsv3.RateLimitQuotaResponse{BucketAction: make([]*rlqsv3.RateLimitQuotaResponse_BucketAction, 0, len(keys))}
		for _, k := range keys {
			resp.BucketAction = append(resp.BucketAction, str.out[k])
			delete(str.out, k)
		}
		str.mu.Unlock()
		if len(resp.BucketAction) == 0 {
			continue
		}
		err := st.Send(resp)
		if err == nil {
			s.sent.Add(1)
		}
		s.pending.Add(-int64(len(resp.BucketAction)))
		if err != nil {
			return err
		}
	}
}

// post puts an action in str's outbox, replacing an older one for the same
// bucket not sent yet, and wakes its sender.
func (str *stream) post(key string, a *rlqsv3.RateLimitQuotaResponse_BucketAction) {
	str.put(key, a) // wake.go
	str.wakeUp()
}

// report handles one usage report of str.
func (s *Server) report(str *stream, msg *rlqsv3.RateLimitQuotaUsageReports) error {
	defer s.reports.Add(1)
	defer str.wakeAll() // wake.go
	now := s.opts.Clock()
	if !str.last.IsZero() {
		str.tokens = math.Min(s.opts.ReportBurst, str.tokens+now.Sub(str.last).Seconds()*s.opts.ReportsPerSecond)
	}
	str.last = now
	if str.tokens < 1 {
		s.reject("reports_per_second")
		return status.Errorf(codes.ResourceExhausted, "quota: more than %v reports a second", s.opts.ReportsPerSecond)
	}
	str.tokens--
	switch d := msg.GetDomain(); {
	case str.domain == "" && d == "":
		return errDomain
	case str.domain == "":
		str.domain = d
	case d != "" && d != str.domain:
		return errDomain
	}
	usages := msg.GetBucketQuotaUsages()
	if len(usages) > s.opts.MaxBucketsPerStream {
		s.reject("buckets_per_report")
		return status.Errorf(codes.InvalidArgument, "quota: a report of %d buckets, more than the %d a stream may have", len(usages), s.opts.MaxBucketsPerStream)
	}
	cfg := s.cfg.Load()
	if str.seenCfg != cfg { // a new configuration may have a rule for them
		clear(str.seen)
		str.seenCfg = cfg
	}
	for _, u := range usages {
		id := u.GetBucketId().GetBucket()
		if err := s.checkID(id); err != nil {
			return err
		}
		key := bucketKey(str.domain, id)
		b := str.buckets[key]
		if b != nil && !s.current(str, b, cfg, id) { // reload.go
			b = nil
		}
		if b == nil {
			if str.seen[key] {
				continue // a blanket rule was sent, with no TTL
			}
			if len(str.buckets)+len(str.seen) >= s.opts.MaxBucketsPerStream {
				s.reject("buckets_per_stream")
				str.postFrom(str, key, abandon(u.GetBucketId()))
				continue
			}
			rule, act := cfg.Match(str.domain, id)
			if rule == nil {
				if act == Abandon {
					str.postFrom(str, key, abandon(u.GetBucketId()))
				} else {
					str.seen[key] = true
					str.postFrom(str, key, blanket(u.GetBucketId(), act))
				}
				continue
			}
			if b = s.bucket(key, rule, cfg, u.GetBucketId(), str, now); b == nil {
				s.reject("buckets")
				str.postFrom(str, key, abandon(u.GetBucketId()))
				continue
			}
			str.buckets[key] = b
		}
		count := u.GetNumRequestsAllowed()
		if count+u.GetNumRequestsDenied() >= count {
			count += u.GetNumRequestsDenied()
		} else {
			count = math.MaxUint64
		}
		b.mu.Lock()
		b.ctr.allowed.Add(u.GetNumRequestsAllowed())
		b.ctr.denied.Add(u.GetNumRequestsDenied())
		b.div.Report(str.id, count, u.GetTimeElapsed().AsDuration(), now)
		b.div.Assign(now, func(member uint64, share float64) {
			if m := b.members[member]; m != nil {
				str.postFrom(m, b.key, b.assignment(share))
			}
		})
		b.mu.Unlock()
	}
	return nil
}

func (s *Server) checkID(id map[string]string) error {
	if len(id) == 0 {
		return status.Error(codes.InvalidArgument, "quota: a bucket id with no entry")
	}
	if len(id) > s.opts.MaxBucketIDEntries {
		s.reject("bucket_id")
		return status.Errorf(codes.InvalidArgument, "quota: a bucket id of %d entries, more than %d", len(id), s.opts.MaxBucketIDEntries)
	}
	n := 0
	for k, v := range id {
		n += len(k) + len(v)
	}
	if n > s.opts.MaxBucketIDBytes {
		s.reject("bucket_id")
		return status.Errorf(codes.InvalidArgument, "quota: a bucket id of %d bytes, more than %d", n, s.opts.MaxBucketIDBytes)
	}
	return nil
}

// bucketKey returns the identity of a bucket id in a domain: its entries
// sorted, each length-prefixed, so that no two ids share a key.
func bucketKey(domain string, id map[string]string) string {
	keys := make([]string, 0, len(id))
	for k := range id {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d:%s", len(domain), domain)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%d:%s%d:%s", len(k), k, len(id[k]), id[k])
	}
	return b.String()
}

// bucket returns the division of key with str joined, made for rule if
// there is none, or nil past MaxBuckets.
func (s *Server) bucket(key string, rule *Rule, cfg *Config, id *rlqsv3.BucketId, str *stream, now time.Time) *bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	join := func(b *bucket) *bucket { // under s.mu, so that no sweep forgets b meanwhile
		b.mu.Lock()
		b.members[str.id] = str
		b.div.Join(str.id)
		b.mu.Unlock()
		return b
	}
	if b := s.buckets[key]; b != nil {
		return join(b)
	}
	if len(s.buckets) >= s.opts.MaxBuckets {
		s.sweep(now)
		if len(s.buckets) >= s.opts.MaxBuckets {
			return nil
		}
	}
	div, err := NewDivision(rule.division())
	if err != nil {
		panic(err) // a loaded rule is valid
	}
	b := &bucket{key: key, rule: rule, cfg: cfg, id: &rlqsv3.BucketId{Bucket: id.GetBucket()}, ctr: s.counter(rule), div: div, members: map[uint64]*stream{}}
	s.fleetStart(b)
	s.buckets[key] = b
	return join(b)
}

// counter returns the counters of rule's name. s.mu is held.
func (s *Server) counter(rule *Rule) *ruleCounters {
	rn := ruleName{rule.Domain, rule.Name}
	ctr := s.counters[rn]
	if ctr == nil {
		ctr = &ruleCounters{}
		s.counters[rn] = ctr
	}
	return ctr
}

// sweep forgets the buckets no Envoy reports and no leaver's share holds.
// s.mu is held.
func (s *Server) sweep(now time.Time) {
	for k, b := range s.buckets {
		b.mu.Lock()
		if len(b.members) == 0 && b.div.Empty(now) {
			delete(s.buckets, k)
		}
		b.mu.Unlock()
	}
}

// leave takes str out of its buckets: each keeps its share until its TTL.
func (s *Server) leave(str *stream) {
	now := s.opts.Clock()
	for _, b := range str.buckets {
		b.mu.Lock()
		b.div.Leave(str.id)
		delete(b.members, str.id)
		b.mu.Unlock()
	}
	s.mu.Lock()
	delete(s.streams, str.id)
	if len(s.buckets) >= s.opts.MaxBuckets/2 {
		s.sweep(now)
	}
	s.mu.Unlock()
}

func abandon(id *rlqsv3.BucketId) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{}}}
}

func blanket(id *rlqsv3.BucketId, a Action) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	rule := typev3.RateLimitStrategy_ALLOW_ALL
	if a == DenyAll {
		rule = typev3.RateLimitStrategy_DENY_ALL
	}
	return assign(id, nil, &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: rule}})
}

func assign(id *rlqsv3.BucketId, ttl *durationpb.Duration, st *typev3.RateLimitStrategy) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: ttl, RateLimitStrategy: st}}}
}

// minTokens is a token bucket assignment's smallest size: a bucket of one
// token denies a request that comes a little early, however small the
// share, so that a share close to its demand would waste a part of it.
const minTokens = 2

// fillInterval is a token bucket assignment's shortest fill interval.
const fillInterval = 50 * time.Millisecond

// Strategy returns the strategy that lets an Envoy through at most share
// requests per second under rule: a token bucket of share ×
// BurstIntervals reporting intervals (at least two tokens, and at least
// one fill), or requests_per_time_unit in the smallest unit that holds
// 100 requests; deny-all for a share under one request a day.
func Strategy(rule *Rule, share float64) *typev3.RateLimitStrategy {
	if !(share*86400 >= 1) {
		return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
	}
	if !rule.TokenBucket() {
		units := []struct {
			u typev3.RateLimitUnit
			s float64
		}{{typev3.RateLimitUnit_SECOND, 1}, {typev3.RateLimitUnit_MINUTE, 60}, {typev3.RateLimitUnit_HOUR, 3600}, {typev3.RateLimitUnit_DAY, 86400}}
		for _, u := range units {
			if n := share * u.s; n >= 100 || u.u == typev3.RateLimitUnit_DAY {
				return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{
					RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{RequestsPerTimeUnit: uint64(n), TimeUnit: u.u}}}
			}
		}
	}
	perFill := math.Floor(share * fillInterval.Seconds())
	if perFill < 1 {
		perFill = 1
	}
	perFill = math.Min(perFill, math.MaxUint32)
	// The interval that gives at most share: rounded up to the nanosecond.
	interval := time.Duration(math.Ceil(perFill / share * 1e9))
	burst := math.Floor(share * rule.ReportingInterval.Seconds() * rule.BurstIntervals)
	burst = math.Min(math.Max(burst, math.Max(perFill, minTokens)), math.MaxUint32)
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: uint32(burst), TokensPerFill: wrapperspb.UInt32(uint32(perFill)), FillInterval: durationpb.New(interval)}}}
}
