package table

import (
	"math"
	"math/bits"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// MaxSpan is the longest Period, and the longest time a full bucket may take
// to drain, that the algorithms other than the fixed window accept:
// [algo.MaxSpan].
const MaxSpan = algo.MaxSpan

// DrainTime returns how long a bucket that holds capacity hits takes to drain
// at limit hits per period (ns), rounded up, and whether that is at most
// [MaxSpan]. limit and period must be positive, capacity not negative.
func DrainTime(period, limit, capacity int64) (time.Duration, bool) {
	v, ok := drain{period, limit}.times(capacity)
	if !ok {
		return 0, false
	}
	return time.Duration(v.ceil()), true
}

// GCRA decides n hits for k at now (Unix ns) by the generic cell rate
// algorithm: with the emission interval T = k.Scale/limit, the hits are
// allowed iff max(TAT, now) + n*T - now <= burst*T, and then TAT becomes
// max(TAT, now) + n*T. Denied hits change nothing. limit and burst must be
// positive and burst*T at most [MaxSpan].
func (t *Table) GCRA(k Key, limit, burst, n, now int64) Decision {
	d := t.drainHit(k, limit, burst, n, now, false)
	d.Delay = 0
	return d
}

// PeekGCRA reports k's state at now as [Table.GCRA] sees it, and whether one
// more hit would be allowed, without changing anything.
func (t *Table) PeekGCRA(k Key, limit, burst, now int64) Decision {
	d := t.drainHit(k, limit, burst, 1, now, true)
	d.Delay = 0
	return d
}

// The three bucket algorithms (GCRA, token bucket, leaky bucket) share one
// state and one piece of arithmetic. The state is the time F at which the
// bucket will be empty again (GCRA's theoretical arrival time); at now the
// bucket holds (F-now)/T hits, T = Period/Limit, and n more fit iff
// max(F-now, 0) + n*T <= capacity*T. Times are kept exactly, as mixed numbers
// ns + frac/Limit, so that no rounding of T drifts the long-run rate.

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

// Entry fields of the bucket algorithms: Modified holds F's whole
// nanoseconds, Created its fraction's numerator, Count its denominator (the
// Limit of the last allowed hit).

// backlog returns e's time left to drain at now, max(F-now, 0), in units of
// r: a bucket whose Limit changed keeps the hits it holds, which then drain
// at the new rate.
func (r drain) backlog(e *node, now int64) vtime {
	f := vtime{e.Modified, uint64(e.Created)}
	if f.ns < now || f.ns == now && f.frac == 0 {
		return vtime{}
	}
	b := vtime{f.ns - now, f.frac}
	if e.Count == r.limit {
		return b
	}
	// b*l0/l = (ns*l0 + frac)/l, exactly; clamped to MaxSpan.
	hi, lo := bits.Mul64(uint64(b.ns), uint64(e.Count))
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

// setDrain stores in e a bucket of rate r that will be empty at now+back,
// and files e under the bucket in which it will be.
func (t *Table) setDrain(e *node, r drain, now int64, back vtime) {
	e.Modified, e.Created, e.Count = now+back.ns, int64(back.frac), r.limit
	t.move(e, deathBucket(now+back.ceil(), r.period))
}

// drainHit decides n hits for k against a bucket that holds capacity hits
// and drains limit per k.Scale ns; when peek is false and they are allowed it
// adds them. When they are allowed, Delay is the wait before the first of
// them can be served.
func (t *Table) drainHit(k Key, limit, capacity, n, now int64, peek bool) Decision {
	if limit <= 0 || capacity <= 0 {
		return Decision{RetryAfter: Never}
	}
	r := drain{k.Scale, limit}
	e := t.lookup(k)
	var back vtime
	if e != nil {
		back = r.backlog(e, now)
		if !peek && e.Count != limit && back != (vtime{}) {
			t.setDrain(e, r, now, back) // the new Limit drains from now on
		}
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
		d.Delay = time.Duration(back.ceil())
	}
	if peek || !d.Allowed {
		if !peek && e != nil {
			record(e, false)
		}
		return d
	}
	if e == nil {
		e = t.insert(k, deathBucket(now+need.ceil(), k.Scale))
	} else {
		record(e, true)
	}
	t.setDrain(e, r, now, need)
	d.Count = r.hits(need)
	d.Remaining = max(0, capacity-d.Count)
	d.ResetAfter = time.Duration(need.ceil())
	return d
}
