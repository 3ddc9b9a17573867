package table

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// algoStep is one call of a stateful sequence: a hit of n (a peek when n is 0)
// at offset at from the start, and what it must answer.
type algoStep struct {
	at   time.Duration
	n    int64
	want algo.Decision
}

// runAlgoSteps runs steps against a and fails at the first wrong answer,
// naming the step.
func runAlgoSteps(t *testing.T, a tableAlgo, tbl *Table, k Key, limit, burst int64, start int64, steps []algoStep) {
	t.Helper()
	for i, s := range steps {
		now := start + int64(s.at)
		var got algo.Decision
		if s.n == 0 {
			got = a.peek(tbl, k, limit, burst, now)
		} else {
			got = a.hit(tbl, k, limit, burst, s.n, now)
		}
		if got != s.want {
			t.Fatalf("step %d (n %d at %v): got %+v, want %+v", i, s.n, s.at, got, s.want)
		}
	}
}

func algoNamed(name string) tableAlgo {
	for _, a := range algos {
		if a.name == name {
			return a
		}
	}
	panic(name)
}

// The French article's GCRA: 10 per 60 s; 10 pass at once, the 11th is
// denied with RetryAfter 6 s, and after 6 s exactly one more passes.
func TestGCRAFrenchArticle(t *testing.T) {
	var steps []algoStep
	for i := range int64(10) {
		steps = append(steps, algoStep{0, 1, algo.Decision{Allowed: true, Count: i + 1, Remaining: 9 - i, ResetAfter: time.Duration(i+1) * 6 * time.Second}})
	}
	full := algo.Decision{Count: 10, ResetAfter: time.Minute, RetryAfter: 6 * time.Second}
	steps = append(steps,
		algoStep{0, 1, full},
		algoStep{6*time.Second - 1, 1, algo.Decision{Count: 10, ResetAfter: time.Minute - 6*time.Second + 1, RetryAfter: 1}},
		algoStep{6 * time.Second, 1, algo.Decision{Allowed: true, Count: 10, ResetAfter: time.Minute}},
		algoStep{6 * time.Second, 1, full},
	)
	runAlgoSteps(t, algoNamed("GCRA"), New(0), Key{Kind: 2, Scale: int64(time.Minute), ID: "admin"}, 10, 10, 0, steps)
}

// nginx's limit_req with burst=4 at 2 r/s: 5 hits at once pass, the k-th
// delayed by (k-1)*500ms; the 6th does not fit.
func TestLeakyBucketNginx(t *testing.T) {
	var steps []algoStep
	for i := range int64(5) {
		steps = append(steps, algoStep{0, 1, algo.Decision{
			Allowed: true, Count: i + 1, Remaining: 4 - i,
			ResetAfter: time.Duration(i+1) * 500 * time.Millisecond,
			Delay:      time.Duration(i) * 500 * time.Millisecond,
		}})
	}
	steps = append(steps,
		algoStep{0, 1, algo.Decision{Count: 5, ResetAfter: 2500 * time.Millisecond, RetryAfter: 500 * time.Millisecond}},
		algoStep{0, 0, algo.Decision{Count: 5, ResetAfter: 2500 * time.Millisecond, RetryAfter: 500 * time.Millisecond}},
		algoStep{500 * time.Millisecond, 0, algo.Decision{Allowed: true, Count: 4, Remaining: 1, ResetAfter: 2 * time.Second, Delay: 2 * time.Second}},
		algoStep{500 * time.Millisecond, 1, algo.Decision{Allowed: true, Count: 5, ResetAfter: 2500 * time.Millisecond, Delay: 2 * time.Second}},
	)
	runAlgoSteps(t, algoNamed("LeakyBucket"), New(0), Key{Kind: 4, Scale: int64(time.Second), ID: "ip"}, 2, 4, 0, steps)
}

// Figma's example: 5 per minute. A fixed window lets 5 hits at 11:00:59 and
// 5 more at 11:01:00 through; the sliding window lets none of the second 5
// through until the first are a Period (and a sub-window) old.
func TestSlidingWindowFigma(t *testing.T) {
	eleven := time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC).UnixNano()
	at := func(d time.Duration) int64 { return eleven + int64(d) }
	k := Key{Kind: 1, Scale: int64(time.Minute), ID: "user"}

	fixed, sliding := New(0), New(0)
	var fixedAllowed, slidingAllowed []int64
	for _, when := range []int64{at(59 * time.Second), at(60 * time.Second)} {
		for range 5 {
			if fixed.FixedWindow(k, 5, 1, when).Allowed {
				fixedAllowed = append(fixedAllowed, when)
			}
			if sliding.SlidingWindow(k, 5, 1, when).Allowed {
				slidingAllowed = append(slidingAllowed, when)
			}
		}
	}
	if len(fixedAllowed) != 10 {
		t.Errorf("fixed window allowed %d hits within a second, want 10 (its known flaw)", len(fixedAllowed))
	}
	if len(slidingAllowed) != 5 {
		t.Errorf("sliding window allowed %d hits within a second, want 5", len(slidingAllowed))
	}
	// The first five stop counting 61 sub-windows (61 s) after the start of
	// their own sub-window, 11:00:59: at 11:02:00.
	d := sliding.SlidingWindow(k, 5, 1, at(60*time.Second))
	if d.RetryAfter != 60*time.Second {
		t.Errorf("RetryAfter %v, want 60s", d.RetryAfter)
	}
	if sliding.SlidingWindow(k, 5, 1, at(120*time.Second-1)).Allowed {
		t.Error("allowed a hit less than 61 s after the sub-window of the first five")
	}
	if !sliding.SlidingWindow(k, 5, 1, at(120*time.Second)).Allowed {
		t.Error("denied a hit once the first five stopped counting")
	}
}

// The sliding log is exact to the millisecond: a hit counts for a Period
// after the end of its millisecond.
func TestSlidingLogMillisecond(t *testing.T) {
	a, ms := algoNamed("SlidingLog"), time.Millisecond
	runAlgoSteps(t, a, New(0), Key{Kind: 5, Scale: int64(time.Second), ID: "x"}, 2, 0, 0, []algoStep{
		{ms / 2, 1, algo.Decision{Allowed: true, Count: 1, Remaining: 1, ResetAfter: time.Second + ms/2}},
		{2 * ms, 1, algo.Decision{Allowed: true, Count: 2, ResetAfter: time.Second + ms}},
		{2 * ms, 1, algo.Decision{Count: 2, ResetAfter: time.Second + ms, RetryAfter: time.Second - ms}},
		{time.Second + ms - 1, 1, algo.Decision{Count: 2, ResetAfter: 2*ms + 1, RetryAfter: 1}},
		{time.Second + ms, 1, algo.Decision{Allowed: true, Count: 2, ResetAfter: time.Second + ms}},
		{time.Second + ms, 3, algo.Decision{Count: 2, ResetAfter: time.Second + ms, RetryAfter: algo.Never}},
	})
}

// A hit asking for more than the capacity is denied for ever and changes
// nothing; so is every hit under a Limit of 0.
func TestNeverAllowed(t *testing.T) {
	for _, a := range algos {
		t.Run(a.name, func(t *testing.T) {
			tbl := New(0)
			k := Key{Kind: 9, Scale: int64(time.Second), ID: "x"}
			for _, c := range []struct{ limit, n int64 }{{3, 100}, {0, 1}} {
				d := a.hit(tbl, k, c.limit, c.limit, c.n, 0)
				if d.Allowed || d.RetryAfter != algo.Never || tbl.Len() != 0 {
					t.Errorf("limit %d n %d: %+v with %d entries, want denied for ever and no entry", c.limit, c.n, d, tbl.Len())
				}
			}
		})
	}
}

// snapshot returns every entry of tbl, with its variable-size state (but
// not its chances against eviction, which a denied hit raises).
func snapshot(tbl *Table) []string {
	var s []string
	tbl.ascend(func(i uint32) bool {
		x := ""
		if ext := tbl.ext[i]; ext != nil {
			x = fmt.Sprintf("%x@%d/%d", ext.Buf[ext.Head:], ext.Head, ext.Last)
		}
		e := tbl.at(i)
		s = append(s, fmt.Sprintf("%+v %s", tbl.entry(e, tbl.idOf(e)), x))
		return true
	})
	return s
}

// Peeks never change anything, and neither do denied hits (under an
// unchanged Limit).
func TestPeekAndDenialChangeNothing(t *testing.T) {
	for _, a := range algos {
		t.Run(a.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(2, 3))
			period := int64(time.Second)
			for range 50 {
				tbl := New(0)
				k := Key{Kind: 1, Scale: period, ID: "x"}
				limit, burst := 1+r.Int64N(8), 1+r.Int64N(8)
				now := r.Int64N(1 << 50)
				for range 100 {
					now += randomGap(r, period)
					before := snapshot(tbl)
					a.peek(tbl, k, limit, burst, now)
					if after := snapshot(tbl); !slices.Equal(before, after) {
						t.Fatalf("peek changed %v into %v", before, after)
					}
					p := a.peek(tbl, k, limit, burst, now)
					if d := a.hit(tbl, k, limit, burst, 1+r.Int64N(3), now); !d.Allowed {
						// The window algorithms may drop slots that no longer
						// count; what a peek sees must not change.
						after := snapshot(tbl)
						if !a.window && !slices.Equal(before, after) {
							t.Fatalf("denied hit changed %v into %v", before, after)
						}
						if q := a.peek(tbl, k, limit, burst, now); q != p {
							t.Fatalf("denied hit changed the state: peek %+v, then %+v", p, q)
						}
					}
				}
			}
		})
	}
}

// Expire removes an entry exactly when its state is back to full capacity
// (at the end of the bucket its death falls in), never before; hits moving
// the death forward move the entry at most once per Scale.
func TestExpireAtDeath(t *testing.T) {
	for _, a := range algos {
		t.Run(a.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(4, 5))
			for range 200 {
				period := randomPeriod(r, a)
				tbl := New(0)
				k := Key{Kind: 1, Scale: period, ID: "x"}
				limit, burst := 1+r.Int64N(8), 1+r.Int64N(8)
				now := r.Int64N(1 << 60)
				start := now
				var moves, hits int
				var last algo.Decision
				var lastAt int64
				for range 1 + r.IntN(30) {
					now += randomGap(r, period) / 4
					bucket := int64(0)
					if e, ok := tbl.Get(k); ok {
						bucket = e.Bucket
					}
					if d := a.hit(tbl, k, limit, burst, 1, now); d.Allowed {
						last, lastAt, hits = d, now, hits+1
						if e, _ := tbl.Get(k); hits > 1 && e.Bucket != bucket {
							moves++
						}
					}
				}
				if hits == 0 {
					continue
				}
				// The death moves by at most the time elapsed plus a full
				// bucket's drain time (burst+1 hits at limit per period).
				if bound := (now-start)/period + 3 + (burst+1)/limit; int64(moves) > bound {
					t.Errorf("%d moves in %v with period %v", moves, time.Duration(now-start), time.Duration(period))
				}
				death := lastAt + int64(last.ResetAfter)
				e, _ := tbl.Get(k)
				if e.End() < death || e.End()-death >= period {
					t.Fatalf("entry ends at %d, its state is empty at %d: not the bucket of its death", e.End(), death)
				}
				if n, _ := tbl.Expire(death-1, 0); n != 0 {
					t.Fatalf("expired a live entry: %d", n)
				}
				if p := a.peek(tbl, k, limit, burst, death); p.Count != 0 || p.ResetAfter != 0 {
					t.Fatalf("state not empty at its death: %+v", p)
				}
				if n, _ := tbl.Expire(e.End(), 0); n != 1 || tbl.Len() != 0 || len(tbl.ext) != 0 {
					t.Fatalf("expired %d at the end of its bucket; %d entries and %d extensions left", n, tbl.Len(), len(tbl.ext))
				}
			}
		})
	}
}
