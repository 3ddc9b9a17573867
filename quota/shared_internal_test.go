package quota

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit/internal/testkit"
)

const sharedYAML = `domain: edge
rate_limit_quota:
  reporting_interval: 500ms
  buckets:
    - name: api
      match: {name: api}
      rate_limit: {unit: second, requests_per_unit: 300}
`

// ownerLink is a Link to an Owner in the same process, as the cluster's
// path is between members: a server's demands go to the owner under the
// server's name, unless the owner is down (no grant).
type ownerLink struct {
	node string
	f    *fleetSim
}

func (l *ownerLink) Divide(_ context.Context, ds []Demand) []Grant {
	out := make([]Grant, len(ds))
	if l.f.owner != nil {
		l.f.owner.Divide(l.node, ds, out)
	}
	return out
}

func (l *ownerLink) Members() int { return l.f.alive() }

// simEnvoy is an Envoy of fleetSim: its demand, the share it was last
// assigned and until when, the server it reports to and its stream there.
type simEnvoy struct {
	demand float64
	share  float64
	until  time.Time
	server int
	str    *stream
}

// fleetSim is servers sharing one limit through an owner, on a fake
// clock, with Envoys whose reports and assignments go through the
// servers' stream state directly (no gRPC), step by step.
type fleetSim struct {
	t       *testing.T
	clock   *testkit.Clock
	servers []*Server
	up      []bool
	owner   *Owner
	envoys  []*simEnvoy
	step    time.Duration
	steps   int
	limit   float64
}

func newFleetSim(t *testing.T, servers int, demands []float64) *fleetSim {
	cfg, err := Parse(map[string][]byte{"edge.yaml": []byte(sharedYAML)})
	require.NoError(t, err)
	f := &fleetSim{t: t, clock: testkit.NewClock(time.Unix(1_000_000, 0)), step: 50 * time.Millisecond, limit: 300}
	f.owner = NewOwner(f.clock.Now, 100)
	for i := range servers {
		s := New(cfg, Options{Clock: f.clock.Now})
		s.Link(&ownerLink{node: fmt.Sprintf("s%d", i), f: f})
		f.servers = append(f.servers, s)
		f.up = append(f.up, true)
	}
	for i, d := range demands {
		e := &simEnvoy{demand: d}
		f.envoys = append(f.envoys, e)
		f.connect(e, i%servers)
	}
	return f
}

func (f *fleetSim) alive() int {
	n := 0
	for _, u := range f.up {
		if u {
			n++
		}
	}
	return n
}

// connect opens e's stream on server i and sends its first report of the
// bucket, as an Envoy does on a new stream.
func (f *fleetSim) connect(e *simEnvoy, i int) {
	s := f.servers[i]
	s.mu.Lock()
	s.nextID++
	e.str = &stream{id: s.nextID, buckets: map[string]*bucket{}, seen: map[string]bool{},
		out: map[string]*rlqsv3.RateLimitQuotaResponse_BucketAction{}, wake: make(chan struct{}, 1),
		tokens: s.opts.ReportBurst, pending: &s.pending}
	s.streams[e.str.id] = e.str
	s.mu.Unlock()
	e.server = i
	f.report(e, 0)
}

func (f *fleetSim) report(e *simEnvoy, elapsed time.Duration) {
	n := uint64(math.Round(e.demand * elapsed.Seconds()))
	err := f.servers[e.server].report(e.str, &rlqsv3.RateLimitQuotaUsageReports{Domain: "edge",
		BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"name": "api"}}, TimeElapsed: durationpb.New(elapsed), NumRequestsAllowed: n}}})
	require.NoError(f.t, err)
}

// receive applies what e's stream holds.
func (f *fleetSim) receive(e *simEnvoy) {
	now := f.clock.Now()
	e.str.mu.Lock()
	defer e.str.mu.Unlock()
	for k, a := range e.str.out {
		delete(e.str.out, k)
		f.servers[e.server].pending.Add(-1)
		qa := a.GetQuotaAssignmentAction()
		tb := qa.GetRateLimitStrategy().GetTokenBucket()
		e.share, e.until = 0, now.Add(qa.GetAssignmentTimeToLive().AsDuration())
		if tb != nil {
			e.share = float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
		}
	}
}

// inForce returns the Envoys' shares in force, summed.
func (f *fleetSim) inForce() float64 {
	sum := 0.0
	for _, e := range f.envoys {
		if f.clock.Now().Before(e.until) {
			sum += e.share
		}
	}
	return sum
}

// run moves the clock on by d in steps: the servers up exchange every
// 250 ms, each 50 ms after the one before, the Envoys report every 500 ms, and the sum of the shares
// in force is checked against the limit.
func (f *fleetSim) run(d time.Duration) (maxSum float64) {
	for end := f.clock.Now().Add(d); f.clock.Now().Before(end); {
		f.clock.Advance(f.step)
		f.steps++
		for i, s := range f.servers {
			if f.up[i] && f.steps%5 == i%5 { // each at its own moment
				s.Exchange(context.Background())
			}
		}
		for _, e := range f.envoys {
			if e.str != nil && f.steps%10 == 0 {
				f.report(e, 500*time.Millisecond)
			}
		}
		for _, e := range f.envoys {
			if e.str != nil { // else cut off
				f.receive(e)
			}
		}
		sum := f.inForce()
		maxSum = math.Max(maxSum, sum)
		if !assert.LessOrEqual(f.t, sum, f.limit+1e-6, "at %v the shares in force pass the limit", time.Duration(f.steps)*f.step) {
			f.t.FailNow()
		}
	}
	return maxSum
}

// kill stops server i: its Envoys, after away, connect to the next
// server up; meanwhile they keep their assignment, until it expires.
func (f *fleetSim) kill(i int, away time.Duration) {
	f.up[i] = false
	var moved []*simEnvoy
	for _, e := range f.envoys {
		if e.server == i {
			e.str = nil
			moved = append(moved, e)
		}
	}
	if away > 0 {
		f.run(away)
	}
	for _, e := range moved {
		next := (i + 1) % len(f.servers)
		for !f.up[next] {
			next = (next + 1) % len(f.servers)
		}
		f.connect(e, next)
	}
}

// demand sets the Envoys' demands.
func (f *fleetSim) demand(ds ...float64) {
	for i, d := range ds {
		f.envoys[i].demand = d
	}
}

// shares returns the Envoys' shares.
func (f *fleetSim) shares() []float64 {
	out := make([]float64, len(f.envoys))
	for i, e := range f.envoys {
		out[i] = e.share
	}
	return out
}

// TestSharedLimit: three servers share a bucket's limit of 300 a second
// through one Owner, on a fake clock; at every step the Envoys' shares in
// force sum to at most the limit, and after two seconds each Envoy's share
// is within 5% of its max-min fair share over the whole fleet, whatever
// server it is on. Then the demand shifts, a server dies (its Envoys
// connect to the others), or the owner does (no grant for 2 s, then a new
// owner with no state): the limit holds at every step, and the shares
// come back to max-min fair within two reporting intervals (1 s) of a
// shift or of the Envoys' return, within the TTL (1.5 s) and an interval
// of a server's death (its share held that long), and within 1.5 s of a
// new owner (its first TTL/2 grants no rise).
func TestSharedLimit(t *testing.T) {
	tests := []struct {
		name    string
		demands []float64 // by Envoy; Envoy i is on server i%3
		fair    []float64 // with the margin of 10%
		event   func(f *fleetSim)
		within  time.Duration // from the event's end to fair shares
	}{
		{"equal", []float64{100, 100, 100, 100, 100, 100}, []float64{50, 50, 50, 50, 50, 50}, nil, 0},
		{"one server busy", []float64{200, 20, 20, 200, 20, 20}, []float64{106, 22, 22, 106, 22, 22}, nil, 0},
		{"under the limit", []float64{10, 20, 30, 10, 20, 30}, []float64{39, 50, 61, 39, 50, 61}, nil, 0},
		{"demand shifts", []float64{100, 100, 100, 100, 100, 100}, []float64{11, 244, 11, 11, 11, 11},
			func(f *fleetSim) {
				f.demand(300, 10, 10, 10, 10, 10)
				f.run(2 * time.Second)
				f.demand(10, 300, 10, 10, 10, 10)
			}, time.Second},
		{"a server killed", []float64{100, 100, 100, 100, 100, 100}, []float64{50, 50, 50, 50, 50, 50},
			func(f *fleetSim) { f.kill(2, 0) }, 2 * time.Second},
		{"a server killed, its Envoys back after 1 s", []float64{100, 100, 100, 100, 100, 100}, []float64{50, 50, 50, 50, 50, 50},
			func(f *fleetSim) { f.kill(2, time.Second) }, time.Second},
		{"the owner killed while demand shifts", []float64{10, 10, 300, 10, 10, 10}, []float64{244, 11, 11, 11, 11, 11},
			func(f *fleetSim) {
				f.owner = nil
				f.demand(300, 10, 10, 10, 10, 10)
				f.run(2 * time.Second)
				f.owner = NewOwner(f.clock.Now, 100)
			}, 1500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleetSim(t, 3, tt.demands)
			f.run(2 * time.Second)
			if tt.event == nil {
				assertFair(t, f.shares(), tt.fair, "steady")
			}
			if tt.event != nil {
				tt.event(f)
				f.run(f.step) // the assignments of the event's last moment
				took := f.step
				for !fair(f.shares(), tt.fair) && took < 3*time.Second {
					f.run(f.step)
					took += f.step
				}
				t.Logf("within 5%% of max-min fair in %v", took)
				assert.LessOrEqual(t, took, tt.within, "converged")
				f.run(time.Second)
				assertFair(t, f.shares(), tt.fair, "after")
			}
		})
	}
}

// fair reports whether every share of got is within 5% of want's.
func fair(got, want []float64) bool {
	for i := range want {
		if math.Abs(got[i]-want[i]) > 0.05*want[i] {
			return false
		}
	}
	return true
}

func assertFair(t *testing.T, got, want []float64, when string) {
	t.Helper()
	for i := range want {
		assert.InEpsilon(t, want[i], got[i], 0.05, "%s: Envoy %d: shares %v", when, i, got)
	}
}

// TestGroupWants: a bucket's wants go to the owner as at most MaxWants
// groups, equal rates together; more distinct rates are merged into runs
// of neighbours, keeping the Envoys and their wants summed.
func TestGroupWants(t *testing.T) {
	spread := func(n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(n - i) // unsorted
		}
		return out
	}
	tests := []struct {
		name   string
		rates  []float64
		groups int
	}{
		{"none", nil, 0},
		{"equal", []float64{5, 5, 5, 5}, 1},
		{"a few", []float64{3, 1, 3, 2}, 3},
		{"MaxWants distinct", spread(MaxWants), MaxWants},
		{"1000 distinct", spread(1000), 63},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum := 0.0
			for _, r := range tt.rates {
				sum += r
			}
			got := groupWants(append([]float64(nil), tt.rates...))
			assert.Len(t, got, tt.groups)
			assert.LessOrEqual(t, len(got), MaxWants)
			envoys, wants := 0, 0.0
			for i, w := range got {
				envoys += int(w.Envoys)
				wants += w.Rate * float64(w.Envoys)
				if i > 0 {
					assert.Greater(t, w.Rate, got[i-1].Rate, "sorted, distinct")
				}
			}
			assert.Equal(t, len(tt.rates), envoys, "every Envoy")
			assert.InDelta(t, sum, wants, 1e-6, "the wants summed")
		})
	}
}

// TestExchangeEvery: the exchange comes every 250 ms, or a quarter of the
// shortest TTL of a rule.
func TestExchangeEvery(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want time.Duration
	}{
		{"no rule", "domain: edge\n", DefaultExchangeEvery},
		{"TTL of 1.5 s", sharedYAML, DefaultExchangeEvery},
		{"TTL of 600 ms", sharedYAML + "      ttl: 600ms\n", 150 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(map[string][]byte{"edge.yaml": []byte(tt.yaml)})
			require.NoError(t, err)
			assert.Equal(t, tt.want, ExchangeEvery(cfg))
		})
	}
}
