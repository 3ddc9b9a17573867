// Package fleet simulates a fleet of Envoys that speak the Rate Limit
// Quota Service to an in-process quota.Server over real gRPC on loopback.
// Each simulated Envoy enforces its assignments as Envoy's
// rate_limit_quota filter does (a local token bucket, or a blanket rule),
// reports its allowed and denied requests every reporting interval, and
// falls back to its no-assignment and expired-assignment behaviours.
//
// Time is fake: one clock, read by the server and the Envoys, moved on by
// the simulator in ticks. After the reports of a tick the simulator waits
// until the server has handled them and every assignment they caused has
// been received, so that a run is the same whatever the machine's load,
// and a minute of traffic takes a second or two.
//
// RunProcs runs the same fleet against actorlimitd processes in a cluster
// instead, in real time (the processes have their own clocks), and can
// SIGKILL one of them mid-run: its Envoys reconnect to the others.
package fleet

import (
	"context"
	"fmt"
	"math"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit/quota"
)

// Behavior is what an Envoy does without a valid assignment.
type Behavior int

// The behaviours.
const (
	Allow Behavior = iota // allow every request
	Deny                  // deny every request
	Reuse                 // (expired only) keep applying the last assignment
)

// Config is one simulation.
type Config struct {
	// Envoys is the fleet's size; LimitPerMinute the bucket's fleet-wide
	// limit; Interval the reporting interval; Duration the run; Tick the
	// clock's step (default Interval/100).
	Envoys         int
	LimitPerMinute uint32
	Interval       time.Duration
	Duration       time.Duration
	Tick           time.Duration
	// Demand returns Envoy i's demand at t in requests per second; a
	// negative demand means Envoy i is not in the fleet at t (not joined
	// yet, or left: its stream is closed).
	Demand func(i int, t time.Duration) float64
	// Changes are the moments the demand changes: the simulator measures
	// from each the time until every share is within 5% of max-min fair.
	Changes []time.Duration
	// NoAssignment and Expired are the Envoys' behaviours before the first
	// assignment and after one expired.
	NoAssignment, Expired Behavior
	// BurstIntervals, TTL, Reserve: the rule's (0: the defaults).
	BurstIntervals float64
	TTL            time.Duration
	Reserve        float64
	// CarryTokens makes a changed token bucket start with the tokens the
	// old one held (at most its size), not full: the two ends of what an
	// Envoy may do with a new bucket.
	CarryTokens bool
}

// EnvoyWindow is one Envoy's window.
type EnvoyWindow struct {
	Present bool
	// Demand is its demand at the window's end, Fair the max-min fair share
	// of that demand, Share its assignment then (requests per second;
	// +Inf for allow-all).
	Demand, Fair, Share float64
	// Admitted is the requests it let through during the window;
	// Changes the assignments it received that changed its strategy (each
	// starts a new token bucket).
	Admitted, Changes int
	// Proc is the process its stream was on at the window's end (0 in
	// process).
	Proc int
}

// Window is one reporting interval of the fleet.
type Window struct {
	Start    time.Duration
	Admitted int     // the fleet's
	Demand   float64 // the fleet's, at its end, in requests per second
	Rate     float64 // the limit, in requests per second
	Limit    float64 // the limit over the window, in requests
	Envoys   []EnvoyWindow
}

// Result is a run's windows and convergence times.
type Result struct {
	Windows []Window
	// Converge holds, for each of Config.Changes, the time until every
	// present Envoy's share was within 5% of max-min fair (-1: never).
	Converge []time.Duration
	// Reports is the usage reports the server handled (in a
	// multi-process run, those the Envoys sent).
	Reports int64
	// MaxStep is the longest the simulator's loop went between two of
	// its wake-ups (a multi-process run's, in real time: it stalls when
	// the machine is loaded, and then makes the ticks it missed at once,
	// at their times).
	MaxStep time.Duration
	// Kill is the kill of a multi-process run (RunProcs), nil if none.
	Kill *Kill
}

// clock is the fake clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// envoy is one simulated Envoy.
type envoy struct {
	i      int
	cc     *grpc.ClientConn
	st     grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	cancel context.CancelFunc
	recvd  atomic.Int64
	done   chan struct{}

	mu       sync.Mutex // guards what follows, written by the receiver too
	strategy *typev3.RateLimitStrategy
	expires  time.Time // zero: none
	tokens   float64
	last     time.Time
	changes  int // assignments that changed its strategy
	counted  int // changes counted in the windows closed

	acc               float64 // fractional demand carried
	allowed, denied   uint64  // since the last report
	lastReport        time.Duration
	present, reported bool
}

var bucketID = map[string]string{"name": "sim"}

const domain = "sim"

// apply takes one action at now.
func (e *envoy) apply(a *rlqsv3.RateLimitQuotaResponse_BucketAction, now time.Time, carry bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a.GetAbandonAction() != nil {
		e.strategy, e.expires = nil, time.Time{}
		return
	}
	qa := a.GetQuotaAssignmentAction()
	st := qa.GetRateLimitStrategy()
	e.expires = time.Time{}
	if ttl := qa.GetAssignmentTimeToLive(); ttl != nil {
		e.expires = now.Add(ttl.AsDuration())
	}
	if proto.Equal(st, e.strategy) {
		return // the same bucket goes on
	}
	e.refill(now)
	old := e.tokens
	e.strategy = st
	e.changes++
	if tb := st.GetTokenBucket(); tb != nil {
		e.tokens = float64(tb.GetMaxTokens())
		if carry {
			e.tokens = math.Min(old, e.tokens)
		}
		e.last = now
	}
}

// refill brings the token bucket to now. e.mu is held.
func (e *envoy) refill(now time.Time) {
	tb := e.strategy.GetTokenBucket()
	if tb == nil {
		return
	}
	if now.Before(e.last) {
		return // a multi-process run's step at a window's end, after an assignment came
	}
	r := float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
	e.tokens = math.Min(float64(tb.GetMaxTokens()), e.tokens+now.Sub(e.last).Seconds()*r)
	e.last = now
}

// admit lets through up to n requests at now, and returns how many.
func (e *envoy) admit(n int, now time.Time, cfg *Config) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.strategy
	if st != nil && !e.expires.IsZero() && !now.Before(e.expires) {
		switch cfg.Expired {
		case Allow:
			return n
		case Deny:
			return 0
		}
	}
	if st == nil {
		if cfg.NoAssignment == Allow {
			return n
		}
		return 0
	}
	switch {
	case st.GetTokenBucket() != nil:
		e.refill(now)
		k := int(math.Min(float64(n), math.Floor(e.tokens)))
		e.tokens -= float64(k)
		return k
	case st.GetRequestsPerTimeUnit() != nil:
		panic("fleet: the simulator's rule is a token bucket")
	case st.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL:
		return 0
	}
	return n
}

// newChanges returns the changes of e's strategy since it was last asked.
func (e *envoy) newChanges() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.changes - e.counted
	e.counted = e.changes
	return n
}

// share returns e's assigned rate at now (+Inf for allow-all, 0 for none).
func (e *envoy) share(now time.Time, cfg *Config) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.strategy
	expired := st != nil && !e.expires.IsZero() && !now.Before(e.expires)
	switch {
	case st == nil && cfg.NoAssignment == Allow, expired && cfg.Expired == Allow:
		return math.Inf(1)
	case st == nil, expired && cfg.Expired == Deny:
		return 0
	}
	if tb := st.GetTokenBucket(); tb != nil {
		return float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
	}
	if st.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL {
		return 0
	}
	return math.Inf(1)
}

// Fair returns the max-min fair shares of capacity for demands, each
// raised by margin (the rule's room above a demand), with what no one
// asked for divided equally: the server's policy, computed here by
// bisection on the water level.
func Fair(capacity, margin float64, demands []float64) []float64 {
	sum := 0.0
	demands = append([]float64(nil), demands...)
	for i := range demands {
		demands[i] *= 1 + margin
		sum += demands[i]
	}
	out := make([]float64, len(demands))
	if sum <= capacity {
		for i, d := range demands {
			out[i] = d + (capacity-sum)/float64(len(demands))
		}
		return out
	}
	lo, hi := 0.0, capacity
	for range 100 {
		mid := (lo + hi) / 2
		s := 0.0
		for _, d := range demands {
			s += math.Min(d, mid)
		}
		if s > capacity {
			hi = mid
		} else {
			lo = mid
		}
	}
	for i, d := range demands {
		out[i] = math.Min(d, lo)
	}
	return out
}

// sim is one run's state.
type sim struct {
	cfg    Config
	clock  *clock
	srv    *quota.Server
	addr   string
	envoys []*envoy
	sent   int64
	start  time.Time
}

// rule returns the configuration file of cfg's bucket rule, {name: sim}.
func (cfg *Config) rule() string {
	rule := fmt.Sprintf("domain: %s\nrate_limit_quota:\n  reporting_interval: %v\n  buckets:\n    - name: sim\n      match: {name: sim}\n      rate_limit: {unit: minute, requests_per_unit: %d}\n",
		domain, cfg.Interval, cfg.LimitPerMinute)
	if cfg.BurstIntervals > 0 {
		rule += fmt.Sprintf("      burst_intervals: %v\n", cfg.BurstIntervals)
	}
	if cfg.TTL > 0 {
		rule += fmt.Sprintf("      ttl: %v\n", cfg.TTL)
	}
	if cfg.Reserve > 0 {
		rule += fmt.Sprintf("      reserve: %v\n", cfg.Reserve)
	}
	return rule
}

// check checks cfg's required fields.
func (cfg *Config) check() error {
	if cfg.Envoys <= 0 || cfg.LimitPerMinute == 0 || cfg.Interval <= 0 || cfg.Duration <= 0 || cfg.Demand == nil {
		return fmt.Errorf("fleet: Envoys, LimitPerMinute, Interval, Duration and Demand are required")
	}
	return nil
}

// Run runs one simulation.
func Run(cfg Config) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Tick <= 0 {
		cfg.Tick = cfg.Interval / 100
	}
	qc, err := quota.Parse(map[string][]byte{"sim.yaml": []byte(cfg.rule())})
	if err != nil {
		return nil, err
	}
	s := &sim{cfg: cfg, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.clock = &clock{now: s.start}
	s.srv = quota.New(qc, quota.Options{Clock: s.clock.Now, ReportsPerSecond: 1e9, ReportBurst: 1e9})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gs := grpc.NewServer()
	rlqsv3.RegisterRateLimitQuotaServiceServer(gs, s.srv)
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()
	s.addr = l.Addr().String()
	for i := range cfg.Envoys {
		s.envoys = append(s.envoys, &envoy{i: i})
	}
	defer func() {
		for _, e := range s.envoys {
			if e.present {
				e.cancel()
				<-e.done
			}
			if e.cc != nil {
				_ = e.cc.Close()
			}
		}
	}()
	return s.run()
}

// join opens e's stream and sends its first report (a new bucket).
func (s *sim) join(e *envoy, t time.Duration) error {
	if e.cc == nil {
		cc, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		e.cc = cc
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(e.cc).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		return err
	}
	e.st, e.cancel, e.done = st, cancel, make(chan struct{})
	e.present, e.lastReport = true, t
	e.mu.Lock()
	e.strategy, e.expires, e.tokens = nil, time.Time{}, 0
	e.mu.Unlock()
	go func() {
		defer close(e.done)
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			now := s.clock.Now()
			for _, a := range r.GetBucketAction() {
				e.apply(a, now, s.cfg.CarryTokens)
			}
			e.recvd.Add(1)
		}
	}()
	return s.send(e, 0)
}

// leave closes e's stream once everything sent to it was received, and
// waits until the server has seen it go.
func (s *sim) leave(e *envoy) error {
	if err := s.settle(); err != nil {
		return err
	}
	want := s.srv.Stats().Streams - 1
	e.cancel()
	<-e.done
	e.present = false
	deadline := time.Now().Add(10 * time.Second)
	for s.srv.Stats().Streams > want {
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet: the server did not see Envoy %d leave", e.i)
		}
		time.Sleep(50 * time.Microsecond)
	}
	return nil
}

// send reports e's usage since its last report.
func (s *sim) send(e *envoy, elapsed time.Duration) error {
	msg := &rlqsv3.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &rlqsv3.BucketId{Bucket: bucketID}, TimeElapsed: durationpb.New(elapsed),
		NumRequestsAllowed: e.allowed, NumRequestsDenied: e.denied}}}
	if !e.reported {
		msg.Domain = domain
		e.reported = true
	}
	e.allowed, e.denied = 0, 0
	s.sent++
	return e.st.Send(msg)
}

// settle waits until the server has handled every report sent and every
// response it sent was received.
func (s *sim) settle() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.srv.Stats()
		var recvd int64
		for _, e := range s.envoys {
			recvd += e.recvd.Load()
		}
		if st.Reports == s.sent && st.Pending == 0 && st.Responses == recvd {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet: the server did not settle: %+v, %d sent, %d received", st, s.sent, recvd)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// newResult returns a Result for a run of changes changes, none
// converged yet (-1).
func newResult(changes int) *Result {
	res := &Result{Converge: make([]time.Duration, changes)}
	for i := range res.Converge {
		res.Converge[i] = -1
	}
	return res
}

func (s *sim) run() (*Result, error) {
	cfg := s.cfg
	res := newResult(len(cfg.Changes))
	rate := float64(cfg.LimitPerMinute) / 60
	var w *Window
	for t := time.Duration(0); t <= cfg.Duration; t += cfg.Tick {
		now := s.start.Add(t)
		s.clock.set(now)
		if t%cfg.Interval == 0 {
			if w != nil {
				s.closeWindow(w, t, rate)
				res.Windows = append(res.Windows, *w)
			}
			w = &Window{Start: t, Rate: rate, Limit: rate * cfg.Interval.Seconds(), Envoys: make([]EnvoyWindow, cfg.Envoys)}
		}
		reported := false
		for _, e := range s.envoys {
			d := cfg.Demand(e.i, t)
			switch {
			case d >= 0 && !e.present:
				if err := s.join(e, t); err != nil {
					return nil, err
				}
				reported = true
			case d < 0 && e.present:
				if err := s.leave(e); err != nil {
					return nil, err
				}
			}
			if !e.present {
				continue
			}
			e.acc += d * cfg.Tick.Seconds()
			n := int(e.acc)
			e.acc -= float64(n)
			k := e.admit(n, now, &cfg)
			e.allowed += uint64(k)
			e.denied += uint64(n - k)
			w.Admitted += k
			w.Envoys[e.i].Admitted += k
			phase := time.Duration(e.i) * cfg.Interval / time.Duration(cfg.Envoys)
			if t > e.lastReport && (t-phase)%cfg.Interval == 0 {
				if err := s.send(e, t-e.lastReport); err != nil {
					return nil, err
				}
				e.lastReport = t
				reported = true
			}
		}
		if reported {
			if err := s.settle(); err != nil {
				return nil, err
			}
		}
		for i, c := range cfg.Changes {
			if res.Converge[i] < 0 && t >= c && s.converged(t, now, rate) {
				res.Converge[i] = t - c
			}
		}
	}
	res.Reports = s.srv.Stats().Reports
	return res, nil
}

// margin returns the rule's margin.
func (s *sim) margin() float64 { return s.srv.Config().Rules()[0].Margin }

// converged reports whether every present Envoy's share is within 5% of
// max-min fair at t, or of an equal share for an Envoy whose fair share is
// smaller: a demand of 16 a second counted over one second is known to
// 1 in 16 at best.
func (s *sim) converged(t time.Duration, now time.Time, rate float64) bool {
	var ds []float64
	var es []*envoy
	for _, e := range s.envoys {
		if e.present {
			ds = append(ds, s.cfg.Demand(e.i, t))
			es = append(es, e)
		}
	}
	fair := Fair(rate, s.margin(), ds)
	equal := rate / float64(len(es))
	for j, e := range es {
		if math.Abs(e.share(now, &s.cfg)-fair[j]) > 0.05*math.Max(fair[j], equal) {
			return false
		}
	}
	return true
}

// closeWindow fills w's demand, shares and fair shares at its end t.
func (s *sim) closeWindow(w *Window, t time.Duration, rate float64) {
	now := s.start.Add(t)
	var ds []float64
	var idx []int
	for _, e := range s.envoys {
		d := s.cfg.Demand(e.i, t-s.cfg.Tick)
		if !e.present || d < 0 {
			continue
		}
		w.Envoys[e.i].Present = true
		w.Envoys[e.i].Changes = e.newChanges()
		w.Envoys[e.i].Demand = d
		w.Envoys[e.i].Share = e.share(now, &s.cfg)
		w.Demand += d
		ds = append(ds, d)
		idx = append(idx, e.i)
	}
	for j, f := range Fair(rate, s.margin(), ds) {
		w.Envoys[idx[j]].Fair = f
	}
}

// Jain returns Jain's fairness index of xs.
func Jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(xs)) * s2)
}

// Pattern is a named demand.
type Pattern struct {
	Name    string
	Demand  func(i int, t time.Duration) float64
	Changes []time.Duration
}

// Patterns returns the demand patterns for n Envoys and a limit of
// rate requests per second, over windows of interval: total demand over
// times the limit.
func Patterns(n int, rate, over float64, interval time.Duration) []Pattern {
	total := rate * over
	hot := func(h int) func(i int) float64 {
		return func(i int) float64 {
			if i == h {
				return total * 0.8
			}
			return total * 0.2 / float64(n-1)
		}
	}
	shiftEvery := 10 * interval
	var shifts []time.Duration
	for k := 1; k <= 4; k++ {
		shifts = append(shifts, time.Duration(k)*shiftEvery)
	}
	joinAt, leaveAt := 10*interval, 25*interval
	return []Pattern{
		{Name: "steady", Demand: func(int, time.Duration) float64 { return total / float64(n) }},
		{Name: "skewed", Demand: func(i int, _ time.Duration) float64 { return hot(0)(i) }},
		{Name: "shifting", Changes: shifts, Demand: func(i int, t time.Duration) float64 {
			return hot(int(t/shiftEvery) % n)(i)
		}},
		{Name: "join-leave", Changes: []time.Duration{joinAt, leaveAt}, Demand: func(i int, t time.Duration) float64 {
			switch {
			case i >= n/2 && t < joinAt:
				return -1 // the second half joins at joinAt
			case i < n/4 && t >= leaveAt:
				return -1 // the first quarter leaves at leaveAt
			}
			return total / float64(n)
		}},
	}
}

// Summary is a run's figures against the targets, from the windows
// after the first two, those of a kill left out (Kill has theirs).
type Summary struct {
	// MaxOver is the largest admitted/limit of a window; MinOverDemanded
	// the smallest admitted/limit of a window whose demand passed the limit
	// and that does not begin within two intervals of a change.
	MaxOver, MinOverDemanded float64
	// MinJain is the smallest Jain index of the shares of a window whose
	// Envoys all demanded the same (1 if none did).
	MinJain float64
	// MaxConverge is the longest convergence time (-1: one never did).
	MaxConverge time.Duration
}

// nearChange reports whether a window starting at start begins less than
// two intervals after a change: the demand it sees is not the one the
// shares were made for yet.
func nearChange(start time.Duration, changes []time.Duration, interval time.Duration) bool {
	for _, c := range changes {
		if start+interval > c && start < c+2*interval {
			return true
		}
	}
	return false
}

// Summarize returns res's figures; changes and interval are the run's.
func Summarize(res *Result, changes []time.Duration, interval time.Duration) Summary {
	s := Summary{MinOverDemanded: math.Inf(1), MinJain: 1}
	for k, w := range res.Windows {
		if k < 2 || res.Kill.killWindow(w.Start, interval) {
			continue
		}
		s.MaxOver = math.Max(s.MaxOver, float64(w.Admitted)/w.Limit)
		if w.Demand > w.Rate && !nearChange(w.Start, changes, interval) {
			s.MinOverDemanded = math.Min(s.MinOverDemanded, float64(w.Admitted)/w.Limit)
		}
		var shares, demands []float64
		for _, e := range w.Envoys {
			if e.Present {
				shares = append(shares, e.Share)
				demands = append(demands, e.Demand)
			}
		}
		sort.Float64s(demands)
		if len(demands) > 1 && demands[0] == demands[len(demands)-1] {
			s.MinJain = math.Min(s.MinJain, Jain(shares))
		}
	}
	for _, c := range res.Converge {
		if c < 0 {
			s.MaxConverge = -1
			break
		}
		s.MaxConverge = max(s.MaxConverge, c)
	}
	return s
}
