package table

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// packedByModel says whether the words (a, b, c) of a node of r in window
// w should be packed, computed in big integers from the packing's rules
// (state.go), independently of its int64 arithmetic.
func packedByModel(r *run, w, a, b, c int64) bool {
	bi := big.NewInt
	// The unit a window counts in: ms for a fixed window of whole ms, else
	// ns; slots for the sliding algorithms. w times it must be an int64.
	unit := r.scale
	switch {
	case r.codec == codecFixed && r.scale%int64(time.Millisecond) == 0:
		unit = r.scale / int64(time.Millisecond)
	case algo.Algorithm(r.kind) == algo.SlidingWindow:
		unit = algo.SubWindows
	case algo.Algorithm(r.kind) == algo.SlidingLog:
		unit = r.scale / int64(time.Millisecond)
	}
	if unit <= 0 || !new(big.Int).Mul(bi(w), bi(unit)).IsInt64() {
		return false
	}
	ref := new(big.Int).Mul(bi(w), bi(r.scale))
	switch r.codec {
	case codecFixed:
		// DivMod is Euclidean: the floor, for a positive divisor.
		ref, _ = new(big.Int).DivMod(ref, bi(int64(time.Millisecond)), new(big.Int))
	case codecSlots:
		ref = new(big.Int).Mul(bi(w), bi(unit))
	}
	in := func(v *big.Int, bits uint) bool {
		return v != nil && v.Sign() >= 0 && v.BitLen() <= int(bits)
	}
	// rel is v's place above ref-bias, which must be an int64, or nil.
	rel := func(v int64, bias int64) *big.Int {
		if new(big.Int).Sub(ref, bi(bias)).Cmp(bi(math.MinInt64)) < 0 {
			return nil
		}
		d := new(big.Int).Sub(bi(v), ref)
		return d.Add(d, bi(bias))
	}
	switch r.codec {
	case codecFixed:
		return in(bi(a), 32) && in(rel(b, fixedBias), 32) && in(rel(c, fixedBias), 32)
	case codecSlots:
		return in(bi(a), 32) && in(rel(b, slotsBias), 32) && in(rel(c, slotsBias), 32)
	}
	return in(bi(a), uint(r.rate)) && in(bi(b), uint(r.rate)) && in(new(big.Int).Sub(bi(c), ref), uint(r.off))
}

// TestPackedStates sets the words of nodes of every codec, at windows and
// values on both sides of every edge of the packing, and reads them back:
// every value comes back exactly, the node is packed exactly when the
// rules (in big integers) say it fits, and a node's wide state is freed
// when it fits again.
func TestPackedStates(t *testing.T) {
	const day = 24 * int64(time.Hour)
	scales := []int64{1, 999_999, ms, sec, 60 * sec, 3600 * sec, day, 37 * day, 40 * day, int64(algo.MaxSpan), math.MaxInt64}
	kinds := []uint8{uint8(algo.FixedWindow), uint8(algo.SlidingWindow), uint8(algo.GCRA), uint8(algo.TokenBucket), uint8(algo.LeakyBucket), uint8(algo.SlidingLog), 200}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC).UnixNano()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, kind := range kinds {
		for _, scale := range scales {
			tb := New(0)
			k := Key{Kind: kind, Scale: scale, ID: "id"}
			tb.Add(k, 0, 1, 0)
			i := tb.lookup(k)
			e := tb.at(i)
			r := tb.runs[e.run]
			nowW := algo.FloorDiv(now, scale)
			ref, _ := r.ref(nowW)
			windows := []int64{0, 1, -1, nowW, -nowW, r.minW, r.maxW, r.minW - 1, r.maxW + 1, math.MaxInt64, math.MinInt64}
			edges := func() []int64 {
				vs := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MaxUint32, math.MaxUint32 + 1, ref, ref - 1, ref + 1}
				for _, bias := range []int64{fixedBias, slotsBias} {
					vs = append(vs, ref-bias, ref-bias-1, ref-bias+math.MaxUint32, ref-bias+math.MaxUint32+1)
				}
				if r.codec == codecBucket {
					vs = append(vs, 1<<r.rate-1, 1<<r.rate, ref+1<<r.off-1, ref+1<<r.off)
				}
				return vs
			}
			wides := 0
			for _, w := range windows {
				e.Window = w
				ref, _ = r.ref(w)
				vs := edges()
				for range 300 {
					a, b, c := vs[rng.IntN(len(vs))], vs[rng.IntN(len(vs))], vs[rng.IntN(len(vs))]
					tb.setWords(e, r, a, b, c)
					ga, gb, gc := tb.words(e, r)
					if ga != a || gb != b || gc != c {
						t.Fatalf("kind %d scale %d window %d: set %d %d %d, read %d %d %d", kind, scale, w, a, b, c, ga, gb, gc)
					}
					if want := packedByModel(r, w, a, b, c); e.wide() == want {
						t.Fatalf("kind %d scale %d window %d, words %d %d %d: wide %v, the rules say packed %v", kind, scale, w, a, b, c, e.wide(), want)
					}
					if e.wide() {
						wides++
					}
				}
			}
			if wides == 0 {
				t.Errorf("kind %d scale %d: no state was wide", kind, scale)
			}
			if e.wide() && tb.wides.top != 2 || !e.wide() && tb.wides.free != 1 {
				t.Errorf("kind %d scale %d: the wide slab holds %d states, its free list starts at %d", kind, scale, tb.wides.top-1, tb.wides.free)
			}
			tb.Delete(k)
			if tb.wides.top > 1 && tb.wides.free != 1 {
				t.Errorf("kind %d scale %d: a deleted node kept its wide state", kind, scale)
			}
		}
	}
}

// TestStatesAgainstAlgo plays random hits of every algorithm on a few keys,
// with limits and periods from tiny to huge, a clock that jumps back and
// forth by up to 50 days and hits of up to MaxInt64, on the table and on
// states the test holds itself through package algo's pure functions: the
// table's decisions and its records must be those of the pure functions,
// whether its nodes hold their states packed or wide.
func TestStatesAgainstAlgo(t *testing.T) {
	const day = 24 * time.Hour
	periods := []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour, day, 30 * day, 45 * day}
	limits := []int64{1, 10, 1000, 1 << 24, 1 << 27, 1 << 33, 1 << 40}
	for a := algo.FixedWindow; a.Known(); a++ {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(a), 7))
			packed, wide := 0, 0
			for round := range 40 {
				tb := New(0)
				period := periods[rng.IntN(len(periods))]
				limit := limits[rng.IntN(len(limits))]
				if a == algo.SlidingLog {
					limit = min(limit, algo.MaxSlidingLogLimit)
				}
				burst := algo.Burst(limit, 0)
				if algo.Validate(a, limit, period, burst) != nil {
					continue
				}
				ids := []string{"a", "bb", fmt.Sprint("id-", round), "sixteen-bytes-id", "a-longer-id-than-sixteen"}
				states := make(map[string]any)
				now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC).UnixNano()
				for step := range 300 {
					switch rng.IntN(10) {
					case 0:
						now -= rng.Int64N(int64(50 * day))
					case 1, 2:
						now += rng.Int64N(int64(50 * day))
					default:
						now += rng.Int64N(int64(period)/10 + 1)
					}
					n := 1 + rng.Int64N(3)
					switch rng.IntN(20) {
					case 0:
						n = math.MaxInt64 - rng.Int64N(3)
					case 1:
						n = 1 << 32
					}
					id := ids[rng.IntN(len(ids))]
					c := algo.Check{Algorithm: a, ID: id, Period: period, Limit: limit, Burst: burst, N: n}
					want := pureHit(states, &c, now)
					got := tb.Apply(&c, now)
					if got != want {
						t.Fatalf("round %d step %d, %+v at %d: table %+v, pure %+v", round, step, c, now, got, want)
					}
					rec := tb.Record(&c)
					if st := pureState(states, id); !bytes.Equal(rec.State, st) {
						t.Fatalf("round %d step %d, %+v at %d: table's state %x, pure %x", round, step, c, now, rec.State, st)
					}
					if e := tb.lookup(Key{Kind: uint8(a), Scale: int64(period), ID: id}); e != 0 {
						if tb.at(e).wide() {
							wide++
						} else {
							packed++
						}
					}
				}
			}
			t.Logf("%d checks left their key packed, %d wide", packed, wide)
			if packed == 0 || wide == 0 {
				t.Errorf("packed %d, wide %d: both forms must be exercised", packed, wide)
			}
		})
	}
}

// pureHit decides c at now on the state states holds for c.ID, by package
// algo's functions alone, as the table's entries are meant to.
func pureHit(states map[string]any, c *algo.Check, now int64) algo.Decision {
	p := int64(c.Period)
	switch c.Algorithm {
	case algo.FixedWindow:
		s, _ := states[c.ID].(algo.FixedState)
		d := algo.FixedWindowHit(&s, p, c.Limit, c.N, now)
		states[c.ID] = s
		return d
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
		s, _ := states[c.ID].(algo.BucketState)
		var d algo.Decision
		var changed bool
		switch c.Algorithm {
		case algo.GCRA:
			d, changed = algo.GCRAHit(&s, p, c.Limit, c.Burst, c.N, now)
		case algo.TokenBucket:
			d, changed = algo.TokenBucketHit(&s, p, c.Limit, c.Burst, c.N, now)
		default:
			d, changed = algo.LeakyBucketHit(&s, p, c.Limit, c.Burst, c.N, now)
		}
		if changed {
			states[c.ID] = s
		}
		return d
	}
	s, _ := states[c.ID].(algo.SlotState)
	s.Pairs.Buf = bytes.Clone(s.Pairs.Buf)
	var d algo.Decision
	var changed bool
	if c.Algorithm == algo.SlidingLog {
		d, changed = algo.SlidingLogHit(&s, p, c.Limit, c.N, now)
	} else {
		d, changed = algo.SlidingWindowHit(&s, p, c.Limit, c.N, now)
	}
	if changed {
		states[c.ID] = s
	}
	return d
}

// pureState returns the encoding of the state states holds for id, or nil.
func pureState(states map[string]any, id string) []byte {
	var b []byte
	switch s := states[id].(type) {
	case algo.FixedState:
		b, _ = s.AppendBinary(nil)
	case algo.BucketState:
		b, _ = s.AppendBinary(nil)
	case algo.SlotState:
		b, _ = s.AppendBinary(nil)
	}
	return b
}
