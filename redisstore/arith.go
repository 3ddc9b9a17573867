package redisstore

import (
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// MaxSpan is the longest time a bucket (GCRA, token bucket, leaky bucket)
// may take to drain in this store: 2^52 ns, about 52 days, so that the
// scripts' doubles hold every span exactly. [algo.MaxSpan] is longer; a
// check beyond this one is refused with [ErrUnsupported].
const MaxSpan = time.Duration(1 << 52)

// maxExact is the largest Limit the scripts count exactly: sliding-window
// counts and bucket fractions are Lua doubles.
const maxExact = 1<<52 - 1

const ms = int64(time.Millisecond)

// grid is the table's slot arithmetic: time t (ns) is in slot
// floor(t*num/den), and a hit in slot j counts until slot j+window ends.
type grid struct{ num, den, window int64 }

// start returns the first nanosecond of slot j: ceil(j*den/num).
func (g grid) start(j int64) int64 {
	q := floorDiv(j, g.num)
	hi, lo := bits.Mul64(uint64(j-q*g.num), uint64(g.den))
	s, rem := bits.Div64(hi, lo, uint64(g.num))
	if rem > 0 {
		s++
	}
	return q*g.den + int64(s)
}

func (g grid) death(j int64) int64 { return g.start(j + g.window + 1) }

func gridOf(c *algo.Check) grid {
	if c.Algorithm == algo.SlidingLog {
		return grid{num: 1, den: ms, window: int64(c.Period) / ms}
	}
	return grid{num: 60, den: int64(c.Period), window: 60}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// span is ns + frac/limit nanoseconds.
type span struct {
	ns   int64
	frac uint64
}

func (v span) ceil() time.Duration {
	if v.frac > 0 {
		return time.Duration(v.ns + 1)
	}
	return time.Duration(v.ns)
}

// times returns n*period/limit, and false if that is more than MaxSpan.
func times(n, period, limit int64) (span, bool) {
	hi, lo := bits.Mul64(uint64(n), uint64(period))
	if hi >= uint64(limit) {
		return span{}, false
	}
	q, rem := bits.Div64(hi, lo, uint64(limit))
	if q > uint64(MaxSpan) {
		return span{}, false
	}
	return span{int64(q), rem}, true
}

// hits returns ceil(v*limit/period), saturated.
func hits(v span, period, limit int64) int64 {
	hi, lo := bits.Mul64(uint64(v.ns), uint64(limit))
	var c uint64
	lo, c = bits.Add64(lo, v.frac, 0)
	hi += c
	if hi >= uint64(period) {
		return math.MaxInt64
	}
	q, rem := bits.Div64(hi, lo, uint64(period))
	if rem > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// sub returns a-b, for b <= a, in units of 1/limit.
func sub(a, b span, limit int64) span {
	if a.frac < b.frac {
		return span{a.ns - b.ns - 1, a.frac + uint64(limit) - b.frac}
	}
	return span{a.ns - b.ns, a.frac - b.frac}
}

// add returns a+b, both in units of 1/limit below limit.
func add(a, b span, limit int64) span {
	v := span{a.ns + b.ns, a.frac + b.frac}
	if v.frac >= uint64(limit) {
		v.ns++
		v.frac -= uint64(limit)
	}
	return v
}

// less reports whether a < b.
func less(a, b span) bool { return a.ns < b.ns || (a.ns == b.ns && a.frac < b.frac) }

// reply reads the integers a script returned, as integers or strings.
type reply []any

func (r reply) int(i int) int64 {
	if i >= len(r) {
		return 0
	}
	switch v := r[i].(type) {
	case int64:
		return v
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return math.MaxInt64
		}
		return n
	}
	return 0
}

// now returns the time the script decided at, in Unix ns.
func (r reply) now() int64 { return r.int(0)*ms + r.int(1) }
