package algo

import (
	"math"
	"math/bits"
	"time"
)

// The three bucket algorithms (GCRA, token bucket, leaky bucket) share one
// state and one piece of arithmetic. The state is the time F at which the
// bucket will be empty again (GCRA's theoretical arrival time); at now the
// bucket holds (F-now)/T hits, T = Period/Limit, and n more fit iff
// max(F-now, 0) + n*T <= capacity*T. Times are kept exactly, as mixed numbers
// ns + frac/Limit, so that no rounding of T drifts the long-run rate.

// BucketState is one key's state under [GCRA], [TokenBucket] and
// [LeakyBucket]: the time F at which the bucket will be empty again (for a
// token bucket, full of tokens again), kept exactly as Empty + Frac/Rate
// Unix nanoseconds. The zero BucketState is an empty bucket.
type BucketState struct {
	// Empty is F's whole nanoseconds, Unix ns.
	Empty int64
	// Frac is the numerator of F's fraction of a nanosecond, in units of
	// 1/Rate ns: 0 <= Frac < Rate.
	Frac int64
	// Rate is the Limit (hits per Period) of the last change of the state,
	// the denominator of Frac; 0 only for the empty bucket. Under a new
	// Limit the bucket keeps the hits it holds, at most its new capacity,
	// which then drain at the new rate: a changed limit leaves a client
	// waiting at most what the new policy allows from a full bucket.
	// Under the same Limit the bucket holds at most twice its capacity:
	// full, plus at most one capacity of debt, which only hits charged past
	// the capacity (see [ChargeBucket]) or a lowered burst can make.
	Rate int64
}

// Death returns when s is back to full capacity: F rounded up to a whole
// nanosecond, Unix ns.
func (s *BucketState) Death() int64 {
	return vtime{s.Empty, uint64(s.Frac)}.ceil()
}

// vtime is ns + frac/l nanoseconds, for the l of the drain it belongs to;
// 0 <= frac < l.
type vtime struct {
	ns   int64
	frac uint64
}

// ceil returns the least whole nanosecond at or after v.
func (v vtime) ceil() int64 {
	if v.frac > 0 {
		return v.ns + 1
	}
	return v.ns
}

func (v vtime) less(w vtime) bool {
	return v.ns < w.ns || v.ns == w.ns && v.frac < w.frac
}

// drain is a bucket's rate: it drains limit hits per period ns, one every
// T = period/limit ns.
type drain struct {
	period, limit int64
}

// times returns n*T, and false if that is more than MaxSpan.
func (r drain) times(n int64) (vtime, bool) {
	hi, lo := bits.Mul64(uint64(n), uint64(r.period))
	if hi >= uint64(r.limit) {
		return vtime{}, false
	}
	q, rem := bits.Div64(hi, lo, uint64(r.limit))
	if q > uint64(MaxSpan) {
		return vtime{}, false
	}
	return vtime{int64(q), rem}, true
}

func (r drain) add(a, b vtime) vtime {
	v := vtime{a.ns + b.ns, a.frac + b.frac}
	if v.frac >= uint64(r.limit) {
		v.frac -= uint64(r.limit)
		v.ns++
	}
	return v
}

// sub returns a-b for b <= a.
func (r drain) sub(a, b vtime) vtime {
	if a.frac < b.frac {
		return vtime{a.ns - b.ns - 1, a.frac + uint64(r.limit) - b.frac}
	}
	return vtime{a.ns - b.ns, a.frac - b.frac}
}

// hits returns ceil(v/T): the hits a bucket that takes v to drain holds.
func (r drain) hits(v vtime) int64 {
	hi, lo := bits.Mul64(uint64(v.ns), uint64(r.limit))
	var c uint64
	lo, c = bits.Add64(lo, v.frac, 0)
	hi += c
	if hi >= uint64(r.period) {
		return math.MaxInt64
	}
	q, rem := bits.Div64(hi, lo, uint64(r.period))
	if rem > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// backlog returns s's time left to drain at now, max(F-now, 0), in units of
// r: a bucket whose Limit changed keeps the hits it holds, which then drain
// at the new rate.
func (r drain) backlog(s *BucketState, now int64) vtime {
	f := vtime{s.Empty, uint64(s.Frac)}
	if s.Rate == 0 || f.ns < now || f.ns == now && f.frac == 0 {
		return vtime{}
	}
	b := vtime{f.ns - now, f.frac}
	if s.Rate == r.limit {
		return b
	}
	// b*l0/l = (ns*l0 + frac)/l, exactly; clamped to MaxSpan.
	hi, lo := bits.Mul64(uint64(b.ns), uint64(s.Rate))
	var c uint64
	lo, c = bits.Add64(lo, b.frac, 0)
	hi += c
	if hi >= uint64(r.limit) {
		return vtime{int64(MaxSpan), 0}
	}
	q, rem := bits.Div64(hi, lo, uint64(r.limit))
	if q > uint64(MaxSpan) {
		return vtime{int64(MaxSpan), 0}
	}
	return vtime{int64(q), rem}
}

// held returns s's backlog at now under r, bounded so that the bucket never
// holds more than a policy allows (see [BucketState]): capacity hits under a
// Limit other than the state's (a changed policy), else capacity plus at
// most capacity of debt (hits charged past the capacity, or a lowered
// burst). It reports whether the bound cut the backlog.
func (r drain) held(s *BucketState, capacity, now int64) (vtime, bool) {
	back := r.backlog(s, now)
	if bound := r.bound(capacity, s.Rate == r.limit); bound.less(back) {
		return bound, true
	}
	return back, false
}

// bound returns the most a bucket of capacity hits may take to drain:
// capacity*T, twice that when it may be in debt, at most [MaxSpan].
func (r drain) bound(capacity int64, debt bool) vtime {
	most, ok := r.times(capacity)
	if !ok {
		return vtime{int64(MaxSpan), 0}
	}
	if debt {
		if most = r.add(most, most); most.ns > int64(MaxSpan) {
			return vtime{int64(MaxSpan), 0}
		}
	}
	return most
}

// set makes s a bucket of rate r that will be empty at now+back.
func (s *BucketState) set(r drain, now int64, back vtime) {
	s.Empty, s.Frac, s.Rate = now+back.ns, int64(back.frac), r.limit
}

// bucketHit decides n hits against s, a bucket that drains limit per period
// ns and holds burst hits, or burst+1 for a leaky bucket (the one served and
// the burst that wait); when peek is false and they are allowed it adds
// them. For allowed hits of a leaky bucket, Delay is the wait before the
// first of them can be served. It reports whether it changed s: an allowed
// hit, or the first hit under a new Limit of a bucket that holds hits.
func bucketHit(s *BucketState, period, limit, burst, n, now int64, peek, leaky bool) (Decision, bool) {
	capacity := burst
	if leaky {
		capacity = queue(burst)
	}
	if limit <= 0 || capacity <= 0 {
		return Decision{RetryAfter: Never}, false
	}
	r := drain{period, limit}
	back, clamped := r.held(s, capacity, now)
	changed := false
	if !peek && (clamped || s.Rate != limit && back != (vtime{})) {
		s.set(r, now, back) // the new Limit drains from now on
		changed = true
	}
	d := Decision{Count: r.hits(back), ResetAfter: time.Duration(back.ceil())}
	d.Remaining = max(0, capacity-d.Count)
	full, ok := r.times(capacity)
	need, okn := r.times(n)
	need = r.add(back, need) // back alone when n*T does not fit
	switch {
	case !ok || !okn || n > capacity:
		d.RetryAfter = Never
	case full.less(need):
		d.RetryAfter = time.Duration(r.sub(need, full).ceil())
	default:
		d.Allowed = true
		if leaky {
			d.Delay = time.Duration(back.ceil())
		}
	}
	if peek || !d.Allowed {
		return d, changed
	}
	s.set(r, now, need)
	d.Count = r.hits(need)
	d.Remaining = max(0, capacity-d.Count)
	d.ResetAfter = time.Duration(need.ceil())
	return d, true
}
