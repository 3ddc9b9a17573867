package actorlimit_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
)

// reference is what the limiter must answer: each algorithm's pure
// function in package algo, over typed states of its own, one per id, with
// Burst 0 meaning Limit. The table's own tests compare each algorithm with
// a reference model; this one checks that the limiter, through its store,
// serves the algorithms' functions for every policy.
type reference struct {
	fixed  map[string]*algo.FixedState
	bucket map[string]*algo.BucketState
	slots  map[string]*algo.SlotState
}

func newReference() *reference {
	return &reference{fixed: map[string]*algo.FixedState{}, bucket: map[string]*algo.BucketState{}, slots: map[string]*algo.SlotState{}}
}

// state returns the state of id in m, made empty on first use.
func state[S any](m map[string]*S, id string) *S {
	s := m[id]
	if s == nil {
		s = new(S)
		m[id] = s
	}
	return s
}

func (ref *reference) decide(p actorlimit.Policy, id string, n int64, peek bool, now time.Time) algo.Decision {
	period, b, t := int64(p.Period), algo.Burst(p.Limit, p.Burst), now.UnixNano()
	switch p.Algorithm {
	case actorlimit.SlidingWindow, actorlimit.SlidingLog:
		s := state(ref.slots, id)
		log := p.Algorithm == actorlimit.SlidingLog
		switch {
		case peek && log:
			return algo.SlidingLogPeek(*s, period, p.Limit, t)
		case peek:
			return algo.SlidingWindowPeek(*s, period, p.Limit, t)
		case log:
			d, _ := algo.SlidingLogHit(s, period, p.Limit, n, t)
			return d
		}
		d, _ := algo.SlidingWindowHit(s, period, p.Limit, n, t)
		return d
	case actorlimit.GCRA, actorlimit.TokenBucket, actorlimit.LeakyBucket:
		s := state(ref.bucket, id)
		var d algo.Decision
		switch {
		case p.Algorithm == actorlimit.GCRA && peek:
			d = algo.GCRAPeek(*s, period, p.Limit, b, t)
		case p.Algorithm == actorlimit.GCRA:
			d, _ = algo.GCRAHit(s, period, p.Limit, b, n, t)
		case p.Algorithm == actorlimit.TokenBucket && peek:
			d = algo.TokenBucketPeek(*s, period, p.Limit, b, t)
		case p.Algorithm == actorlimit.TokenBucket:
			d, _ = algo.TokenBucketHit(s, period, p.Limit, b, n, t)
		case peek:
			d = algo.LeakyBucketPeek(*s, period, p.Limit, b, t)
		default:
			d, _ = algo.LeakyBucketHit(s, period, p.Limit, b, n, t)
		}
		return d
	}
	s := state(ref.fixed, id)
	if peek {
		return algo.FixedWindowPeek(*s, period, p.Limit, t)
	}
	return algo.FixedWindowHit(s, period, p.Limit, n, t)
}

// The limiter answers every algorithm as its function in algo does, over
// random policies (Burst 0 included) and arrivals, on a fake clock.
func TestLimiterServesAlgorithms(t *testing.T) {
	ctx := context.Background()
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(alg)))
			lim, clock := startAt(t, time.Unix(1_800_000_000, 0).Add(time.Duration(r.Int64N(int64(time.Hour)))))
			ref := newReference()
			for seq := range 20 {
				id := string(rune('a' + seq))
				p := actorlimit.Policy{Algorithm: alg, Limit: 1 + r.Int64N(10), Period: time.Duration(1+r.Int64N(5000)) * time.Millisecond, Burst: r.Int64N(6)}
				for step := range 60 {
					clock.Advance(time.Duration(r.Int64N(int64(p.Period) / 8)))
					n, peek := 1+r.Int64N(3), r.IntN(5) == 0
					var res actorlimit.Result
					var err error
					if peek {
						res, err = lim.Peek(ctx, id, p)
					} else {
						res, err = lim.HitN(ctx, id, p, n)
					}
					require.NoError(t, err)
					d := ref.decide(p, id, n, peek, clock.Now())
					want := actorlimit.Result{Allowed: d.Allowed, Limit: p.Limit, Count: d.Count, Remaining: d.Remaining,
						RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter, Delay: d.Delay}
					require.Equal(t, want, res, "seq %d step %d: %+v n %d peek %v", seq, step, p, n, peek)
				}
			}
		})
	}
}
