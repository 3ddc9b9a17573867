package quota

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"
)

// DefaultExchangeEvery is how often a server of a fleet sends its buckets'
// demand to their owners by default: well within a TTL/2 (the owner's
// first TTL/2 grants no rise), and a fraction of the reporting interval,
// so that a change of demand reaches the shares within about one interval.
const DefaultExchangeEvery = 250 * time.Millisecond

// ExchangeEvery returns how often a server of a fleet should exchange
// with the owners under the rules of c: DefaultExchangeEvery, or a quarter
// of the shortest TTL of a rule if that is shorter (a grant lives a TTL,
// and a new owner grants no rise for its first TTL/2, in which every
// server must have reported once).
func ExchangeEvery(c *Config) time.Duration {
	every := DefaultExchangeEvery
	for _, r := range c.Rules() {
		every = min(every, r.TTL/4)
	}
	return max(every, time.Millisecond)
}

// MaxWants is the most groups of Envoys' wants a bucket's demand carries:
// a server with more distinct wants merges neighbours (sorted) into
// MaxWants groups of about as many Envoys each, each group wanting its
// mean. It is the cluster's bound on a demand (cluster.MaxQuotaWants).
const MaxWants = 64

// Link is how a Server shares its buckets' limits with the other servers
// of a fleet: each bucket's owner divides the limit over every server's
// demand (an [Owner] there). actorlimitd's cluster members link through
// the cluster. Its methods are safe for concurrent use.
type Link interface {
	// Divide sends each bucket's demand to the bucket's owner and returns
	// the grants in order; a grant not OK means the owner did not answer.
	Divide(ctx context.Context, demands []Demand) []Grant
	// Members is how many servers share the limits, this one among them
	// (at least 1): a bucket with no grant in force divides limit/Members.
	Members() int
}

// linkBox holds a Link in an atomic.Pointer.
type linkBox struct{ l Link }

// fleetBucket is a bucket's part of a limit shared by a fleet: the share
// its division divides. b.mu guards it.
type fleetBucket struct {
	share float64
	until time.Time // when the grant ends; zero: no grant in force (a fallback)
}

// Share makes s divide, from now on, each bucket's share of its limit,
// which the bucket's owner in l grants from the demand of every server's
// Envoys, in place of the whole limit; it sends its buckets' demand every
// every (DefaultExchangeEvery if 0) until ctx ends. A bucket made before
// its first grant, or whose grant has expired (its owner did not answer
// for a TTL), divides limit/Members, or its last grant if smaller.
func (s *Server) Share(ctx context.Context, l Link, every time.Duration) {
	s.Link(l)
	if every <= 0 {
		every = DefaultExchangeEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, every)
			s.Exchange(rctx)
			cancel()
		}
	}
}

// Link makes s share its buckets' limits through l, with no exchange yet:
// new buckets divide limit/Members until Exchange brings their grants. A
// test calls Exchange itself, on its own clock; Share does both.
func (s *Server) Link(l Link) { s.link.Store(&linkBox{l}) }

// fleetStart gives a new bucket b its first share: limit/Members when s
// shares its limits.
func (s *Server) fleetStart(b *bucket) {
	if lb := s.link.Load(); lb != nil {
		b.fleet.share = b.rule.Rate() / float64(max(lb.l.Members(), 1))
		b.div.setCapacity(b.fleet.share)
	}
}

// Exchange sends every bucket's demand to its owner once, at the server's
// clock, and gives each bucket its grant (or, once its grant has expired,
// its fallback), sending the Envoys the shares that change.
func (s *Server) Exchange(ctx context.Context) {
	lb := s.link.Load()
	if lb == nil {
		return
	}
	start := s.opts.Clock()
	s.mu.Lock()
	bs := make([]*bucket, 0, len(s.buckets))
	for _, b := range s.buckets {
		bs = append(bs, b)
	}
	s.mu.Unlock()
	demands := make([]Demand, 0, len(bs))
	sent := bs[:0]
	for _, b := range bs {
		b.mu.Lock()
		if !b.div.Empty(start) || b.fleet.share > 0 {
			demands = append(demands, b.demand())
			sent = append(sent, b)
		}
		b.mu.Unlock()
	}
	if len(demands) == 0 {
		return
	}
	grants := lb.l.Divide(ctx, demands)
	members := float64(max(lb.l.Members(), 1))
	now := s.opts.Clock()
	for i, b := range sent {
		b.mu.Lock()
		f := &b.fleet
		switch {
		case i < len(grants) && grants[i].OK:
			f.share, f.until = grants[i].Share, start.Add(b.rule.TTL)
		case !f.until.IsZero() && !now.Before(f.until):
			f.share, f.until = math.Min(f.share, b.rule.Rate()/members), time.Time{}
		}
		b.div.setCapacity(f.share)
		b.div.Assign(now, func(member uint64, share float64) {
			if m := b.members[member]; m != nil {
				m.post(b.key, b.assignment(share))
			}
		})
		b.mu.Unlock()
	}
}

// demand returns b's demand for its owner. b.mu is held.
func (b *bucket) demand() Demand {
	d := Demand{Key: b.key, Limit: b.rule.Rate(), TTL: b.rule.TTL, InForce: b.fleet.share}
	var rates []float64
	for _, m := range b.div.members {
		if m.live {
			rates = append(rates, b.div.want(m))
		} else {
			d.Leaving += m.share
		}
	}
	d.Wants = groupWants(rates)
	return d
}

// groupWants returns rates as at most MaxWants groups: each distinct rate a
// group while they are few enough, else runs of neighbours (sorted), each
// wanting its mean.
func groupWants(rates []float64) []Want {
	if len(rates) == 0 {
		return nil
	}
	slices.SortFunc(rates, cmp.Compare[float64])
	var out []Want
	for _, r := range rates {
		if n := len(out); n > 0 && out[n-1].Rate == r {
			out[n-1].Envoys++
			continue
		}
		out = append(out, Want{Rate: r, Envoys: 1})
	}
	if len(out) <= MaxWants {
		return out
	}
	out = out[:0]
	per := (len(rates) + MaxWants - 1) / MaxWants
	for i := 0; i < len(rates); i += per {
		run := rates[i:min(i+per, len(rates))]
		sum := 0.0
		for _, r := range run {
			sum += r
		}
		out = append(out, Want{Rate: sum / float64(len(run)), Envoys: uint32(len(run))})
	}
	return out
}

// setCapacity makes capacity, not the limit, what Assign divides from now
// on: the division's part of a limit shared by a fleet. Demands are still
// capped at the limit.
func (d *Division) setCapacity(capacity float64) {
	d.capped, d.capacity = true, math.Max(capacity, 0)
}

// divided returns what Assign divides: the capacity set, else the limit.
func (d *Division) divided() float64 {
	if d.capped {
		return math.Min(d.capacity, d.cfg.Limit)
	}
	return d.cfg.Limit
}
