package table

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// The fuzz targets drive one key of one algorithm with a script of hits and
// peeks, then check the invariants the issue asks for:
//
//   - every decision: Count and Remaining never negative, RetryAfter 0 iff
//     allowed, ResetAfter and Delay never negative, Delay 0 outside the leaky
//     bucket, a peek agrees with the hit that follows it;
//   - RetryAfter is honest: the denied hit, made again after exactly
//     RetryAfter (the script asks for it), is allowed;
//   - SlidingWindow and SlidingLog never allow more than Limit hits in any
//     interval of length Period;
//   - GCRA, TokenBucket and LeakyBucket never allow more than the capacity
//     plus Limit per Period in any interval, and under saturating demand
//     allow exactly that rate, give or take two hits, however long the run;
//   - LeakyBucket's Delays serve the allowed hits at most Limit per Period,
//     none waiting more than Burst*Period/Limit;
//   - a huge hit (n near MaxInt64, which the script asks for) is denied for
//     ever and leaves the state deciding the next hits as before;
//   - FixedWindow (FuzzFixedWindow, with Limits up to MaxInt64) counts
//     exactly, saturating at MaxInt64, and allows iff the window's true
//     count is at most Limit.
//
// Run one at a time, e.g.
//
//	go test -run='^$' -fuzz='^FuzzGCRA$' -fuzztime=10s ./table

func FuzzSlidingWindow(f *testing.F) { fuzzAlgo(f, "SlidingWindow") }
func FuzzSlidingLog(f *testing.F)    { fuzzAlgo(f, "SlidingLog") }
func FuzzGCRA(f *testing.F)          { fuzzAlgo(f, "GCRA") }
func FuzzTokenBucket(f *testing.F)   { fuzzAlgo(f, "TokenBucket") }
func FuzzLeakyBucket(f *testing.F)   { fuzzAlgo(f, "LeakyBucket") }

func fuzzAlgo(f *testing.F, name string) {
	a := algoNamed(name)
	f.Add(uint8(4), uint8(4), uint64(60_000), int64(1_800_000_000_000_000_000), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0})
	f.Add(uint8(10), uint8(10), uint64(60_000), int64(0), []byte{0, 1, 0, 0, 2, 0, 64, 3, 9, 64, 0x80, 1, 200, 0x41, 5, 1, 0x43, 17})
	f.Add(uint8(1), uint8(0), uint64(7), int64(-5), []byte{1, 0, 1, 1, 0x40, 0, 3, 0x80, 7, 255, 3, 255, 0, 0x80, 0})
	f.Add(uint8(19), uint8(2), uint64(1), int64(1<<40), []byte{0, 3, 0, 0, 3, 0, 0, 3, 0, 0, 0x80, 0, 128, 2, 99})
	f.Add(uint8(3), uint8(3), uint64(1_000), int64(0), []byte{0, 0, 0, 0, 0x20, 0, 0, 0x20, 7, 0, 0x60, 0, 1, 0, 0, 200, 0x20, 0})
	f.Fuzz(func(t *testing.T, limit, burst uint8, period uint64, start int64, script []byte) {
		p := newFuzzPolicy(a, limit, burst, period)
		run := fuzzRun(t, a, p, start%(1<<61), script)
		if a.window {
			checkWindow(t, p, run)
			return
		}
		checkRate(t, p, run)
		if a.name == "LeakyBucket" {
			checkShaping(t, p, run)
		}
		checkSaturation(t, a, p, run)
	})
}

// fuzzPolicy is a small policy: Limit 1..20, Burst 1..20 (0..19 for the
// leaky bucket's waiting hits), Period whole ms up to 2 min for the window
// algorithms, any ns up to an hour for the buckets.
type fuzzPolicy struct {
	limit, burst, capacity, period int64
}

func newFuzzPolicy(a tableAlgo, limit, burst uint8, period uint64) fuzzPolicy {
	p := fuzzPolicy{limit: 1 + int64(limit%20), burst: 1 + int64(burst%20)}
	p.capacity = p.burst
	if a.name == "LeakyBucket" {
		p.burst--
		p.capacity = p.burst + 1
	}
	if a.window {
		p.period = (1 + int64(period%120_000)) * int64(time.Millisecond)
		p.capacity = p.limit
	} else {
		p.period = 1 + int64(period%uint64(time.Hour))
	}
	return p
}

// allowedHit is one allowed decision of a run.
type allowedHit struct {
	at, n int64
	delay time.Duration
}

type fuzzResult struct {
	tbl  *Table
	k    Key
	now  int64
	hits []allowedHit
}

// fuzzRun plays script, three bytes a call: a gap (the first byte in
// 128ths of a Period plus the third in ns), and n (1..4 from the low bits of
// the second) with three flags: 0x80 retries the last denied hit after
// exactly its RetryAfter, 0x40 peeks before a hit of 1, 0x20 makes n huge:
// MaxInt64 less the third byte. A huge hit must be denied for ever and
// change nothing a peek sees.
func fuzzRun(t *testing.T, a tableAlgo, p fuzzPolicy, now int64, script []byte) fuzzResult {
	tbl := New(0)
	k := Key{Kind: uint8(a.alg), Scale: p.period, ID: "f"}
	var hits []allowedHit
	var denied algo.Decision
	deniedN := int64(0)
	for i := 0; i+2 < len(script) && i < 1500; i += 3 {
		gap := p.period/128*int64(script[i]) + int64(script[i+2])
		n := 1 + int64(script[i+1]&3)
		retry := script[i+1]&0x80 != 0 && deniedN > 0 && denied.RetryAfter >= 0
		if retry {
			gap, n = int64(denied.RetryAfter), deniedN
		}
		now += gap
		if script[i+1]&0x20 != 0 && !retry {
			fuzzHuge(t, a, p, tbl, k, math.MaxInt64-int64(script[i+2]), now)
		}
		var peek algo.Decision
		if script[i+1]&0x40 != 0 {
			n = 1
			peek = a.peek(tbl, k, p.limit, p.burst, now)
			checkDecision(t, a, peek)
		}
		d := a.hit(tbl, k, p.limit, p.burst, n, now)
		checkDecision(t, a, d)
		if retry && !d.Allowed {
			t.Fatalf("call %d: denied after the RetryAfter %v of the same hit: %+v", i/3, denied.RetryAfter, d)
		}
		if script[i+1]&0x40 != 0 {
			checkPeek(t, peek, d)
		}
		deniedN = 0
		if d.Allowed {
			hits = append(hits, allowedHit{now, n, d.Delay})
		} else {
			denied, deniedN = d, n
		}
	}
	return fuzzResult{tbl, k, now, hits}
}

// fuzzHuge makes a hit of n, far more than any capacity of a fuzzPolicy,
// and checks that it is denied for ever and that a peek sees the same state
// before and after it.
func fuzzHuge(t *testing.T, a tableAlgo, p fuzzPolicy, tbl *Table, k Key, n, now int64) {
	t.Helper()
	before := a.peek(tbl, k, p.limit, p.burst, now)
	d := a.hit(tbl, k, p.limit, p.burst, n, now)
	checkDecision(t, a, d)
	if d.Allowed || d.RetryAfter != algo.Never {
		t.Fatalf("a hit of %d: %+v, want denied for ever", n, d)
	}
	if after := a.peek(tbl, k, p.limit, p.burst, now); after != before {
		t.Fatalf("a hit of %d changed the state: peek %+v, then %+v", n, before, after)
	}
}

func checkDecision(t *testing.T, a tableAlgo, d algo.Decision) {
	t.Helper()
	switch {
	case d.Count < 0 || d.Remaining < 0:
		t.Fatalf("negative Count or Remaining: %+v", d)
	case d.Allowed != (d.RetryAfter == 0):
		t.Fatalf("RetryAfter %v for Allowed %v", d.RetryAfter, d.Allowed)
	case d.ResetAfter < 0 || d.Delay < 0:
		t.Fatalf("negative ResetAfter or Delay: %+v", d)
	case d.Delay != 0 && a.name != "LeakyBucket":
		t.Fatalf("Delay outside the leaky bucket: %+v", d)
	}
}

// checkPeek compares a peek with the hit of 1 made right after it.
func checkPeek(t *testing.T, peek, hit algo.Decision) {
	t.Helper()
	if !hit.Allowed {
		if peek != hit {
			t.Fatalf("peek %+v, then the hit %+v", peek, hit)
		}
		return
	}
	if !peek.Allowed || hit.Count != peek.Count+1 || hit.Remaining != max(0, peek.Remaining-1) || hit.Delay != peek.Delay {
		t.Fatalf("peek %+v, then the hit %+v", peek, hit)
	}
}

// checkWindow: no interval of length Period holds more than Limit allowed
// hits.
func checkWindow(t *testing.T, p fuzzPolicy, r fuzzResult) {
	var sum int64
	first := 0
	for _, h := range r.hits {
		sum += h.n
		for r.hits[first].at <= h.at-p.period {
			sum -= r.hits[first].n
			first++
		}
		if sum > p.limit {
			t.Fatalf("%d hits allowed in (%d, %d], more than the limit %d", sum, h.at-p.period, h.at, p.limit)
		}
	}
}

// checkRate: the hits allowed at times in [a, b] are at most capacity +
// (b-a)*Limit/Period.
func checkRate(t *testing.T, p fuzzPolicy, r fuzzResult) {
	for i := range r.hits {
		var sum int64
		for j := i; j < len(r.hits); j++ {
			sum += r.hits[j].n
			if span := r.hits[j].at - r.hits[i].at; (sum-p.capacity)*p.period > span*p.limit {
				t.Fatalf("%d hits allowed in %v, more than %d + %d per %v", sum, time.Duration(span), p.capacity, p.limit, time.Duration(p.period))
			}
		}
	}
}

// checkShaping: served at their Delays, the allowed hits leave at most
// Limit per Period (each n hits take n*Period/Limit; Delays are rounded up
// to the ns) and none waits longer than Burst*Period/Limit.
func checkShaping(t *testing.T, p fuzzPolicy, r fuzzResult) {
	for i, h := range r.hits {
		if (int64(h.delay)-1)*p.limit > p.burst*p.period {
			t.Fatalf("Delay %v longer than %d hits at %d per %v", h.delay, p.burst, p.limit, time.Duration(p.period))
		}
		if i == 0 {
			continue
		}
		prev := r.hits[i-1]
		gap := h.at + int64(h.delay) - (prev.at + int64(prev.delay))
		if (gap+1)*p.limit < prev.n*p.period {
			t.Fatalf("hits served %v apart, %d of them before at %d per %v", time.Duration(gap), prev.n, p.limit, time.Duration(p.period))
		}
	}
}

// checkSaturation: from a full bucket, one hit offered every T/2 for some
// Periods is allowed at exactly Limit per Period on top of the capacity:
// A*T = elapsed + what the bucket holds at the end, which is within a hit
// and a half of full.
func checkSaturation(t *testing.T, a tableAlgo, p fuzzPolicy, r fuzzResult) {
	if p.period < 2*p.limit || p.capacity < 2 {
		return // offers cannot come every T/2, or the bucket empties between them
	}
	now := r.now + int64(a.peek(r.tbl, r.k, p.limit, p.burst, r.now).ResetAfter)
	step := p.period / (2 * p.limit)
	first, allowed := now, int64(0)
	for range 10*p.limit + 6*p.capacity {
		if a.hit(r.tbl, r.k, p.limit, p.burst, 1, now).Allowed {
			allowed++
		}
		now += step
	}
	span := now - step - first
	if allowed*p.period > span*p.limit+p.capacity*p.period || allowed*p.period < span*p.limit+(p.capacity-2)*p.period {
		t.Fatalf("%d hits allowed in %v of saturating demand at %d per %v with capacity %d", allowed, time.Duration(span), p.limit, time.Duration(p.period), p.capacity)
	}
}

// FuzzFixedWindow plays a script (as fuzzRun reads it, without retries) on
// one fixed-window key and holds every decision to the exact count of the
// window in big integers: Count is that count, or MaxInt64 if it is more;
// the hits are allowed iff it is at most Limit; a peek allows one more hit
// iff count+1 is. A limit byte of 200 or more gives a Limit near MaxInt64.
func FuzzFixedWindow(f *testing.F) {
	f.Add(uint8(3), uint64(1_000), int64(0), []byte{0, 0, 0, 0, 1, 0, 0, 0x20, 0, 0, 0x40, 0, 128, 0, 0})
	f.Add(uint8(255), uint64(60_000), int64(-7), []byte{0, 0x20, 0, 0, 0x20, 55, 0, 0x40, 0, 1, 0x21, 0, 200, 0x20, 0})
	f.Add(uint8(0), uint64(1), int64(1<<40), []byte{0, 0x40, 0, 0, 0x20, 0})
	f.Fuzz(func(t *testing.T, limitSel uint8, period uint64, start int64, script []byte) {
		limit := int64(limitSel % 21)
		if limitSel >= 200 {
			limit = math.MaxInt64 - int64(limitSel-200)
		}
		scale := (1 + int64(period%120_000)) * int64(time.Millisecond)
		tbl, k := New(0), Key{Scale: scale, ID: "f"}
		now, window, exact := start%(1<<61), int64(math.MinInt64), new(big.Int)
		for i := 0; i+2 < len(script) && i < 1500; i += 3 {
			now += scale/128*int64(script[i]) + int64(script[i+2])
			if w := algo.FloorDiv(now, scale); w > window {
				window, exact = w, new(big.Int)
			}
			n := 1 + int64(script[i+1]&3)
			if script[i+1]&0x20 != 0 {
				n = math.MaxInt64 - int64(script[i+2])
			}
			if script[i+1]&0x40 != 0 {
				p := tbl.PeekFixedWindow(k, limit, now)
				checkFixed(t, "peek", p, exact, 1, limit)
			}
			exact.Add(exact, big.NewInt(n))
			checkFixed(t, "hit", tbl.FixedWindow(k, limit, n, now), exact, 0, limit)
		}
	})
}

// checkFixed holds d to the window's exact count: d.Count is count, or
// MaxInt64 if count is more, and d allows iff count+more is at most limit.
func checkFixed(t *testing.T, what string, d algo.Decision, count *big.Int, more, limit int64) {
	t.Helper()
	want := int64(math.MaxInt64)
	if count.IsInt64() {
		want = count.Int64()
	}
	allowed := new(big.Int).Add(count, big.NewInt(more)).Cmp(big.NewInt(limit)) <= 0
	if d.Count != want || d.Allowed != allowed || d.Remaining != max(0, limit-want) {
		t.Fatalf("%s: %+v with %v counted under limit %d, want Count %d, allowed %v", what, d, count, limit, want, allowed)
	}
}
