package actorlimit_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/table"
)

// tableDecide is what the limiter must answer for p: the table's algorithm,
// with Burst 0 meaning Limit. The table's own tests compare each algorithm
// with a reference model; this one checks that the limiter serves the
// table's algorithm for every policy.
func tableDecide(tbl *table.Table, p actorlimit.Policy, id string, n int64, peek bool, now time.Time) table.Decision {
	k := table.Key{Kind: uint8(p.Algorithm), Scale: int64(p.Period), ID: id}
	b, t := p.Burst, now.UnixNano()
	if b == 0 {
		b = p.Limit
	}
	switch p.Algorithm {
	case actorlimit.SlidingWindow:
		if peek {
			return tbl.PeekSlidingWindow(k, p.Limit, t)
		}
		return tbl.SlidingWindow(k, p.Limit, n, t)
	case actorlimit.SlidingLog:
		if peek {
			return tbl.PeekSlidingLog(k, p.Limit, t)
		}
		return tbl.SlidingLog(k, p.Limit, n, t)
	case actorlimit.GCRA:
		if peek {
			return tbl.PeekGCRA(k, p.Limit, b, t)
		}
		return tbl.GCRA(k, p.Limit, b, n, t)
	case actorlimit.TokenBucket:
		if peek {
			return tbl.PeekTokenBucket(k, p.Limit, b, t)
		}
		return tbl.TokenBucket(k, p.Limit, b, n, t)
	case actorlimit.LeakyBucket:
		if peek {
			return tbl.PeekLeakyBucket(k, p.Limit, b, t)
		}
		return tbl.LeakyBucket(k, p.Limit, b, n, t)
	}
	if peek {
		return tbl.PeekFixedWindow(k, p.Limit, t)
	}
	return tbl.FixedWindow(k, p.Limit, n, t)
}

// The limiter answers every algorithm as its table algorithm does, over
// random policies (Burst 0 included) and arrivals, on a fake clock.
func TestLimiterServesTableAlgorithms(t *testing.T) {
	ctx := context.Background()
	for _, alg := range allAlgorithms {
		t.Run(alg.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(alg)))
			lim, clock := startAt(t, time.Unix(1_800_000_000, 0).Add(time.Duration(r.Int64N(int64(time.Hour)))))
			tbl := table.New(0)
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
					d := tableDecide(tbl, p, id, n, peek, clock.Now())
					want := actorlimit.Result{Allowed: d.Allowed, Limit: p.Limit, Count: d.Count, Remaining: d.Remaining,
						RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter, Delay: d.Delay}
					require.Equal(t, want, res, "seq %d step %d: %+v n %d peek %v", seq, step, p, n, peek)
				}
			}
		})
	}
}
