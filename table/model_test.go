package table

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// The reference models: each keeps its state the obvious way (a list of
// timestamps, or a rational number of hits) and decides with exact rational
// arithmetic. TestModels compares the table with them over many random
// arrival sequences and policies.

// algoModel decides hits like one algorithm of the table.
type algoModel interface {
	hit(now, limit, burst, n int64, peek bool) algo.Decision
}

func rat(a, b int64) *big.Rat { return big.NewRat(a, b) }

func ratInt(a int64) *big.Rat { return new(big.Rat).SetInt64(a) }

// floorRat returns floor(r); big.Int.Div rounds toward minus infinity for
// positive divisors, and a Rat's denominator is positive.
func floorRat(r *big.Rat) int64 {
	return new(big.Int).Div(r.Num(), r.Denom()).Int64()
}

func ceilRat(r *big.Rat) int64 { return -floorRat(new(big.Rat).Neg(r)) }

func ratMax0(r *big.Rat) *big.Rat {
	if r.Sign() < 0 {
		return new(big.Rat)
	}
	return r
}

// tatModel is GCRA as the French article writes it, in rationals: TAT, and
// T = period/limit. A changed Limit keeps the hits the bucket holds.
type tatModel struct {
	period int64
	tat    *big.Rat // nil before the first allowed hit
	l0     int64
}

func (m *tatModel) hit(now, limit, burst, n int64, peek bool) algo.Decision {
	T := rat(m.period, limit)
	nowR := ratInt(now)
	back := new(big.Rat)
	if m.tat != nil {
		back = ratMax0(new(big.Rat).Sub(m.tat, nowR))
	}
	if back.Sign() > 0 && m.l0 != limit {
		back.Mul(back, rat(m.l0, limit))
		if !peek {
			m.tat, m.l0 = new(big.Rat).Add(nowR, back), limit
		}
	}
	count := ceilRat(new(big.Rat).Quo(back, T))
	d := algo.Decision{Count: count, Remaining: max(0, burst-count), ResetAfter: time.Duration(ceilRat(back))}
	if n > burst {
		d.RetryAfter = algo.Never
		return d
	}
	// allowed iff max(TAT, now) + n*T - now <= burst*T
	need := new(big.Rat).Add(back, new(big.Rat).Mul(ratInt(n), T))
	full := new(big.Rat).Mul(ratInt(burst), T)
	if need.Cmp(full) > 0 {
		d.RetryAfter = time.Duration(ceilRat(new(big.Rat).Sub(need, full)))
		return d
	}
	d.Allowed = true
	if peek {
		return d
	}
	m.tat, m.l0 = new(big.Rat).Add(nowR, need), limit
	d.Count = ceilRat(new(big.Rat).Quo(need, T))
	d.Remaining = max(0, burst-d.Count)
	d.ResetAfter = time.Duration(ceilRat(need))
	return d
}

// levelModel is a bucket kept as a level: the tokens missing from a token
// bucket, or the hits queued in a leaky bucket (nginx's excess), drained at
// the Limit in force since the last call.
type levelModel struct {
	period int64
	leaky  bool // capacity burst+1, and a Delay
	level  *big.Rat
	last   int64
	l0     int64
}

func (m *levelModel) hit(now, limit, burst, n int64, peek bool) algo.Decision {
	c := burst
	if m.leaky {
		c = burst + 1
	}
	level := new(big.Rat)
	if m.level != nil {
		drained := new(big.Rat).Mul(ratInt(now-m.last), rat(m.l0, m.period))
		level = ratMax0(new(big.Rat).Sub(m.level, drained))
	}
	if !peek {
		m.level, m.last, m.l0 = level, now, limit
	}
	wait := func(hits *big.Rat) time.Duration { // time to drain hits
		return time.Duration(ceilRat(new(big.Rat).Mul(hits, rat(m.period, limit))))
	}
	count := ceilRat(level)
	d := algo.Decision{Count: count, Remaining: max(0, c-count), ResetAfter: wait(level)}
	if n > c {
		d.RetryAfter = algo.Never
		return d
	}
	after := new(big.Rat).Add(level, ratInt(n))
	if after.Cmp(ratInt(c)) > 0 {
		d.RetryAfter = wait(new(big.Rat).Sub(after, ratInt(c)))
		return d
	}
	d.Allowed = true
	if m.leaky {
		d.Delay = wait(level)
	}
	if peek {
		return d
	}
	m.level = after
	d.Count = ceilRat(after)
	d.Remaining = max(0, c-d.Count)
	d.ResetAfter = wait(after)
	return d
}

// logModel is a list of the allowed hits and when each stops counting.
type logModel struct {
	death func(t int64) int64
	hits  []loggedHit
}

type loggedHit struct{ t, n, death int64 }

// slidingDeath is when a hit at t stops counting in a sliding window of
// period p: at the start of the 61st sub-window after its own.
func slidingDeath(p int64) func(int64) int64 {
	return func(t int64) int64 {
		sub := new(big.Int).Div(new(big.Int).Mul(big.NewInt(t), big.NewInt(60)), big.NewInt(p))
		end := new(big.Rat).SetFrac(new(big.Int).Mul(new(big.Int).Add(sub, big.NewInt(61)), big.NewInt(p)), big.NewInt(60))
		return ceilRat(end)
	}
}

// logDeath is when a hit at t stops counting in a sliding log of period p:
// a Period after the end of its millisecond.
func logDeath(p int64) func(int64) int64 {
	ms := int64(time.Millisecond)
	return func(t int64) int64 { return (algo.FloorDiv(t, ms)+1)*ms + p }
}

func (m *logModel) hit(now, limit, _, n int64, peek bool) algo.Decision {
	var alive []loggedHit
	var count, last int64
	for _, h := range m.hits {
		if h.death > now {
			alive = append(alive, h)
			count += h.n
			last = max(last, h.death)
		}
	}
	d := algo.Decision{Count: count, Remaining: max(0, limit-count)}
	if count > 0 {
		d.ResetAfter = time.Duration(last - now)
	}
	if n > limit {
		d.RetryAfter = algo.Never
		return d
	}
	if count+n > limit {
		slices.SortFunc(alive, func(a, b loggedHit) int { return int(a.death - b.death) })
		for _, h := range alive {
			count -= h.n
			if count+n <= limit {
				d.RetryAfter = time.Duration(h.death - now)
				break
			}
		}
		return d
	}
	d.Allowed = true
	if peek {
		return d
	}
	h := loggedHit{now, n, m.death(now)}
	m.hits = append(alive, h)
	d.Count += n
	d.Remaining = max(0, limit-d.Count)
	d.ResetAfter = time.Duration(max(last, h.death) - now)
	return d
}

// tableAlgo is one algorithm of the table, as the tests see it.
type tableAlgo struct {
	name   string
	alg    algo.Algorithm // its Kind in the tests that give keys their own algorithm's
	window bool           // whole-millisecond periods, no burst
	hit    func(t *Table, k Key, limit, burst, n, now int64) algo.Decision
	peek   func(t *Table, k Key, limit, burst, now int64) algo.Decision
	model  func(period int64) algoModel
}

var algos = []tableAlgo{
	{
		name: "SlidingWindow", alg: algo.SlidingWindow, window: true,
		hit:   func(t *Table, k Key, l, _, n, now int64) algo.Decision { return t.SlidingWindow(k, l, n, now) },
		peek:  func(t *Table, k Key, l, _, now int64) algo.Decision { return t.PeekSlidingWindow(k, l, now) },
		model: func(p int64) algoModel { return &logModel{death: slidingDeath(p)} },
	},
	{
		name: "SlidingLog", alg: algo.SlidingLog, window: true,
		hit:   func(t *Table, k Key, l, _, n, now int64) algo.Decision { return t.SlidingLog(k, l, n, now) },
		peek:  func(t *Table, k Key, l, _, now int64) algo.Decision { return t.PeekSlidingLog(k, l, now) },
		model: func(p int64) algoModel { return &logModel{death: logDeath(p)} },
	},
	{
		name: "GCRA", alg: algo.GCRA,
		hit:   func(t *Table, k Key, l, b, n, now int64) algo.Decision { return t.GCRA(k, l, b, n, now) },
		peek:  func(t *Table, k Key, l, b, now int64) algo.Decision { return t.PeekGCRA(k, l, b, now) },
		model: func(p int64) algoModel { return &tatModel{period: p} },
	},
	{
		name: "TokenBucket", alg: algo.TokenBucket,
		hit:   func(t *Table, k Key, l, b, n, now int64) algo.Decision { return t.TokenBucket(k, l, b, n, now) },
		peek:  func(t *Table, k Key, l, b, now int64) algo.Decision { return t.PeekTokenBucket(k, l, b, now) },
		model: func(p int64) algoModel { return &levelModel{period: p} },
	},
	{
		name: "LeakyBucket", alg: algo.LeakyBucket,
		hit:   func(t *Table, k Key, l, b, n, now int64) algo.Decision { return t.LeakyBucket(k, l, b, n, now) },
		peek:  func(t *Table, k Key, l, b, now int64) algo.Decision { return t.PeekLeakyBucket(k, l, b, now) },
		model: func(p int64) algoModel { return &levelModel{period: p, leaky: true} },
	},
}

// randomPeriod returns a Period for a: whole milliseconds for the window
// algorithms (some not a multiple of 60 ms, so sub-windows end inside a
// nanosecond), anything for the buckets, down to a few nanoseconds (T under
// one nanosecond).
func randomPeriod(r *rand.Rand, a tableAlgo) int64 {
	if a.window {
		switch r.IntN(3) {
		case 0:
			return int64(1+r.IntN(10)) * int64(time.Millisecond)
		case 1:
			return int64(1+r.IntN(120)) * int64(time.Second)
		}
		return int64(1+r.IntN(100_000)) * int64(time.Millisecond)
	}
	switch r.IntN(3) {
	case 0:
		return 1 + r.Int64N(50)
	case 1:
		return 1 + r.Int64N(int64(time.Second))
	}
	return int64(1+r.IntN(3600)) * int64(time.Second)
}

// randomGap returns the time to the next call: often none, often a little,
// sometimes a whole Period or more.
func randomGap(r *rand.Rand, period int64) int64 {
	switch x := r.IntN(20); {
	case x < 6:
		return 0
	case x < 16:
		return r.Int64N(period/20 + 1)
	case x < 19:
		return r.Int64N(period + 1)
	}
	return r.Int64N(3*period + 1)
}

func TestModels(t *testing.T) {
	for _, a := range algos {
		t.Run(a.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(len(a.name))))
			for seq := range 300 {
				runModelSequence(t, r, a, seq)
			}
		})
	}
}

func runModelSequence(t *testing.T, r *rand.Rand, a tableAlgo, seq int) {
	t.Helper()
	period := randomPeriod(r, a)
	limit := 1 + r.Int64N(12)
	burst := 1 + r.Int64N(15)
	if a.name == "LeakyBucket" {
		burst--
	}
	now := int64(1_700_000_000)*int64(time.Second) + r.Int64N(int64(time.Hour))
	tbl := New(0)
	// Every other sequence keys its entry by its own algorithm, whose
	// nodes pack their states; the others by a kind of no algorithm, whose
	// packing does not suit them, so that their states are mostly wide.
	kind := uint8(a.alg)
	if seq%2 == 1 {
		kind = 200
	}
	k := Key{Kind: kind, Scale: period, ID: "k"}
	m := a.model(period)
	for step := range 200 {
		now += randomGap(r, period)
		if r.IntN(15) == 0 {
			limit = 1 + r.Int64N(12)
		}
		n := int64(1)
		if r.IntN(5) == 0 {
			n = 1 + r.Int64N(limit+3)
		}
		peek := r.IntN(6) == 0
		var got algo.Decision
		if peek {
			got, n = a.peek(tbl, k, limit, burst, now), 1
		} else {
			got = a.hit(tbl, k, limit, burst, n, now)
		}
		want := m.hit(now, limit, burst, n, peek)
		if got != want {
			t.Fatalf("seq %d step %d: period %v limit %d burst %d n %d peek %v at +%v:\n got %+v\nwant %+v",
				seq, step, time.Duration(period), limit, burst, n, peek, time.Duration(now%int64(time.Hour)), got, want)
		}
	}
}
