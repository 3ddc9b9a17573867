package quota

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"
)

// Want is Envoys Envoys that each want Rate requests per second (their
// demand with the rule's margin, or the reserve while unknown).
type Want struct {
	Rate   float64
	Envoys uint32
}

// Demand is one bucket's demand on one server of a fleet, as the server
// sends it to the bucket's owner: its live Envoys' wants, the shares its
// Envoys that left still hold (Leaving), and the share it applies now
// (InForce), in requests per second, with the bucket's fleet-wide Limit
// and its assignments' TTL.
type Demand struct {
	Key              string
	Limit            float64
	TTL              time.Duration
	Wants            []Want
	Leaving, InForce float64
}

// Grant is a server's share of one bucket's limit, in requests per second,
// for the bucket's TTL; OK is false when the owner did not answer.
type Grant struct {
	Share float64
	OK    bool
}

// fleetHysteresis is the relative change of a server's share below which
// the owner keeps the share it granted (when the limit allows), so that
// steady demand does not move the servers' shares at every exchange.
const fleetHysteresis = 0.02

// server is one server's part of a FleetDivision.
type server struct {
	wants   []Want
	leaving float64
	limit   float64
	ttl     time.Duration
	inForce float64   // what it applies, as the owner knows it
	grantAt time.Time // when inForce was last set
	envoys  float64   // its Envoys: the wants' Envoys summed
}

// FleetDivision divides one bucket's limit among the servers of a fleet
// (actorlimitd processes) over the demand of every server's Envoys: it
// runs at the bucket's owner. It is a pure state machine: no goroutines,
// no clock of its own (every method takes now), not safe for concurrent
// use.
//
// The division is max-min fair over the Envoys, not over the servers: the
// owner water-fills the limit, less the leavers' shares every server
// reports, over every server's Envoys' wants, and grants a server its
// leavers' shares plus its Envoys' fair shares; the server divides its
// grant among its Envoys max-min (a [Division] whose capacity is the
// grant), which gives each Envoy the share the owner computed for it.
//
// Its invariant: the shares the servers apply sum to at most the limit. A
// server's share in force is what it last reported applying, then what
// it was granted; a rise is granted only up to what the others' shares in
// force leave (a server whose share falls is told at its next exchange,
// and the rise follows at the one after), and a server that stops
// reporting keeps its share, counted against the limit, for the TTL after
// it was last granted. For the first TTL/2 of a division (a new owner,
// which does not know yet what each server applies) no server is granted
// more than it applies.
//
// The water level is computed again once a round (when a server reports
// that has reported since the last computation, or the servers change),
// not at every report: each report's target takes the last level, with
// its own wants of now.
type FleetDivision struct {
	servers map[string]*server
	start   time.Time
	groups  []group // the fill's scratch

	// The last fill: the limit (the smallest the servers give), the level
	// and the extra; filled is false when it must be made again, and since
	// names the servers that reported after it.
	limit, level, extra float64
	filled              bool
	since               map[string]bool
	// total is the servers' shares in force, summed (made again at each
	// fill); next is when a server's share expires first, as far as
	// known.
	total float64
	next  time.Time
}

// group is Report's scratch: one want of one server.
type group struct {
	rate, n float64
}

// NewFleetDivision returns an empty division started at now.
func NewFleetDivision(now time.Time) *FleetDivision {
	return &FleetDivision{servers: map[string]*server{}, start: now, since: map[string]bool{}}
}

// Len returns how many servers the division holds.
func (f *FleetDivision) Len() int { return len(f.servers) }

// Empty reports whether every server's share has expired by now (and
// forgets them).
func (f *FleetDivision) Empty(now time.Time) bool {
	f.expire(now)
	return len(f.servers) == 0
}

func (f *FleetDivision) expire(now time.Time) {
	if now.Before(f.next) {
		return
	}
	f.next = time.Time{}
	for n, s := range f.servers {
		end := s.grantAt.Add(s.ttl)
		if !now.Before(end) {
			delete(f.servers, n)
			f.total -= s.inForce
			f.filled = false
			continue
		}
		if f.next.IsZero() || end.Before(f.next) {
			f.next = end
		}
	}
}

// Report records d, the demand of the server named node at now, and
// returns its share. d must be valid (a limit above 0, a TTL above 0,
// finite rates of at least 0).
func (f *FleetDivision) Report(node string, d Demand, now time.Time) float64 {
	f.expire(now)
	s := f.servers[node]
	if s == nil {
		s = &server{}
		f.servers[node] = s
		f.filled = false
	}
	s.wants = append(s.wants[:0], d.Wants...)
	s.leaving, s.limit, s.ttl = d.Leaving, d.Limit, d.TTL
	f.total += d.InForce - s.inForce
	s.inForce, s.grantAt = d.InForce, now
	if end := now.Add(d.TTL); f.next.IsZero() || end.Before(f.next) {
		f.next = end
	}
	s.envoys = 0
	for _, w := range d.Wants {
		s.envoys += float64(w.Envoys)
	}

	if !f.filled || f.since[node] {
		f.fill()
	}
	f.since[node] = true
	limit, level, extra := math.Min(f.limit, d.Limit), f.level, f.extra
	target := s.leaving + s.envoys*extra
	for _, w := range s.wants {
		target += float64(w.Envoys) * math.Min(w.Rate, level)
	}

	room := math.Max(limit-(f.total-s.inForce), 0)
	g := math.Min(target, room)
	if now.Sub(f.start) < s.ttl/2 {
		g = math.Min(g, d.InForce) // a new owner: no rise yet
	}
	equal := limit / float64(len(f.servers))
	if old := d.InForce; g > 0 && old <= room && math.Abs(g-old) <= math.Max(old, equal)*fleetHysteresis {
		g = old
	}
	f.total += g - s.inForce
	s.inForce = g
	return g
}

// fill makes the water level of every server's wants as they are now.
func (f *FleetDivision) fill() {
	// The limit is the smallest the servers give (they differ while a
	// reload reaches them one by one).
	limit := math.Inf(1)
	capacity := 0.0
	envoys := 0.0
	f.groups = f.groups[:0]
	f.total = 0
	for _, q := range f.servers {
		f.total += q.inForce
		limit = math.Min(limit, q.limit)
		capacity -= q.leaving
		envoys += q.envoys
		for _, w := range q.wants {
			f.groups = append(f.groups, group{w.Rate, float64(w.Envoys)})
		}
	}
	capacity = math.Max(capacity+limit, 0)
	f.limit = limit
	f.level, f.extra = fillLevel(f.groups, capacity, envoys)
	f.filled = true
	clear(f.since)
}

// fillLevel water-fills capacity over groups (each n Envoys wanting rate):
// it returns the level no Envoy gets more than, and the extra every Envoy
// gets when the wants leave part of capacity (capacity less the wants,
// divided by envoys, the groups' n in all).
func fillLevel(groups []group, capacity, envoys float64) (level, extra float64) {
	slices.SortFunc(groups, func(a, b group) int { return cmp.Compare(a.rate, b.rate) })
	left, n := capacity, envoys
	for _, g := range groups {
		l := left / n
		if g.rate > l {
			return l, 0
		}
		left -= g.rate * g.n
		n -= g.n
	}
	if envoys > 0 && left > 0 {
		extra = left / envoys
	}
	return math.Inf(1), extra
}

// FleetShare is one server's part of a fleet division, as Shares reports
// it.
type FleetShare struct {
	Node    string
	Envoys  float64
	Demand  float64 // its Envoys' wants, summed
	InForce float64
}

// Shares returns every server's part, sorted by name.
func (f *FleetDivision) Shares() []FleetShare {
	out := make([]FleetShare, 0, len(f.servers))
	for n, s := range f.servers {
		d := 0.0
		for _, w := range s.wants {
			d += w.Rate * float64(w.Envoys)
		}
		out = append(out, FleetShare{Node: n, Envoys: s.envoys, Demand: d, InForce: s.inForce})
	}
	slices.SortFunc(out, func(a, b FleetShare) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// Owner divides the buckets of a fleet that a server owns: one
// [FleetDivision] per bucket key, made at a bucket's first demand and
// forgotten once every server's share has expired. It is safe for
// concurrent use.
type Owner struct {
	clock func() time.Time
	max   int

	mu      sync.Mutex
	buckets map[string]*FleetDivision
	calls   int
}

// NewOwner returns an owner of at most maxBuckets buckets (a new bucket
// beyond it is not answered: its servers keep their fallback), reading
// the time from clock (time.Now if nil).
func NewOwner(clock func() time.Time, maxBuckets int) *Owner {
	if clock == nil {
		clock = time.Now
	}
	return &Owner{clock: clock, max: maxBuckets, buckets: map[string]*FleetDivision{}}
}

// Divide answers the demands of the server named node: out[i] is its
// share of demands[i]'s bucket.
func (o *Owner) Divide(node string, demands []Demand, out []Grant) {
	now := o.clock()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	if o.calls%64 == 0 { // not at every call when full: each sweep sees every bucket
		for k, f := range o.buckets {
			if f.Empty(now) {
				delete(o.buckets, k)
			}
		}
	}
	for i := range demands {
		d := &demands[i]
		f := o.buckets[d.Key]
		if f == nil {
			if len(o.buckets) >= o.max {
				out[i] = Grant{}
				continue
			}
			f = NewFleetDivision(now)
			o.buckets[d.Key] = f
		}
		out[i] = Grant{Share: f.Report(node, *d, now), OK: true}
	}
}

// Len returns how many buckets the owner divides.
func (o *Owner) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buckets)
}
