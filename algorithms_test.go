package actorlimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/redisstore"
)

// startAt starts a limiter on a fake clock at t, without a janitor.
func startAt(t *testing.T, at time.Time) (*actorlimit.Limiter, *fakeClock) {
	t.Helper()
	clock := testkit.NewClock(at)
	lim, err := actorlimit.Start(actorlimit.WithClock(clock), actorlimit.WithJanitor(0, 0))
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	return lim, clock
}

// starter starts a limiter on a fake clock at a time, as startAt does.
type starter func(t *testing.T, at time.Time) (*actorlimit.Limiter, *fakeClock)

// onEachStore runs the same cases as subtests store=table, on the embedded
// table (startAt), and store=redis, on redisstore with a real redis-server
// and the limiter's clock (WithCallerTime; FailError, so that a Redis that
// does not answer fails the case instead of falling back to a table). Each
// limiter it starts has a key prefix of its own.
func onEachStore(t *testing.T, run func(t *testing.T, startAt starter)) {
	t.Run("store=table", func(t *testing.T) { run(t, startAt) })
	t.Run("store=redis", func(t *testing.T) {
		srv := redistest.Start(t)
		n := 0
		run(t, func(t *testing.T, at time.Time) (*actorlimit.Limiter, *fakeClock) {
			t.Helper()
			n++
			clock := testkit.NewClock(at)
			sopts := []redisstore.Option{redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError),
				redisstore.WithPrefix(fmt.Sprintf("case%d:", n))}
			lim, _ := startOnRedis(t, srv, sopts, actorlimit.WithClock(clock), actorlimit.WithJanitor(0, 0))
			return lim, clock
		})
	})
}

// allAlgorithms is every algorithm by its root constant, for the tests that
// run them all; TestEveryAlgorithmHasItsConstant keeps it the whole list.
var allAlgorithms = []actorlimit.Algorithm{
	actorlimit.FixedWindow, actorlimit.SlidingWindow, actorlimit.GCRA,
	actorlimit.TokenBucket, actorlimit.LeakyBucket, actorlimit.SlidingLog,
}

// TestEveryAlgorithmHasItsConstant: every algorithm of the one list
// (algo.All) has its constant in the root, and the tests that run every
// algorithm run it too.
func TestEveryAlgorithmHasItsConstant(t *testing.T) {
	assert.ElementsMatch(t, algo.All(), allAlgorithms)
}

// countAllowed makes n hits at once and returns how many were allowed.
func countAllowed(t *testing.T, lim *actorlimit.Limiter, id string, p actorlimit.Policy, n int) int {
	t.Helper()
	allowed := 0
	for range n {
		res, err := lim.Hit(context.Background(), id, p)
		require.NoError(t, err)
		if res.Allowed {
			allowed++
		}
	}
	return allowed
}

// The French article, time-bucketed: 20 per 30 s, 25 requests at once: the
// first 20 pass, 5 are limited, and nothing passes until the window is over.
func TestFrenchArticleTimeBucketed(t *testing.T) {
	onEachStore(t, func(t *testing.T, startAt starter) {
		lim, clock := startAt(t, time.Unix(1_800_000_000, 0)) // a 30 s window starts here
		p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 20, Period: 30 * time.Second}
		ctx := context.Background()
		for i := range 25 {
			res, err := lim.Hit(ctx, "admin", p)
			require.NoError(t, err)
			assert.Equal(t, i < 20, res.Allowed, "request %d", i+1)
		}
		clock.Advance(30*time.Second - time.Nanosecond)
		res, err := lim.Hit(ctx, "admin", p)
		require.NoError(t, err)
		assert.False(t, res.Allowed, "a request before the window is over")
		clock.Advance(time.Nanosecond)
		res, err = lim.Hit(ctx, "admin", p)
		require.NoError(t, err)
		assert.True(t, res.Allowed, "the first request of the next window")
	})
}

// The French article, GCRA: 10 per 60 s: 10 pass at once, the 11th is denied
// with RetryAfter 6 s, and after 6 s exactly one more passes.
func TestFrenchArticleGCRA(t *testing.T) {
	onEachStore(t, func(t *testing.T, startAt starter) {
		lim, clock := startAt(t, time.Unix(1_800_000_007, 123))
		p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 10, Period: time.Minute}
		assert.Equal(t, 10, countAllowed(t, lim, "admin", p, 10))
		res, err := lim.Hit(context.Background(), "admin", p)
		require.NoError(t, err)
		assert.Equal(t, actorlimit.Result{Limit: 10, Count: 10, RetryAfter: 6 * time.Second, ResetAfter: time.Minute}, res)
		clock.Advance(6 * time.Second)
		assert.Equal(t, 1, countAllowed(t, lim, "admin", p, 5))
	})
}

// The Figma article: with 5 per minute, a fixed window lets 10 through
// between 11:00:59 and 11:01:00; the sliding window lets at most 5 through in
// any 60 s.
func TestFigmaArticle(t *testing.T) {
	onEachStore(t, func(t *testing.T, startAt starter) {
		for _, c := range []struct {
			alg  actorlimit.Algorithm
			want int
		}{{actorlimit.FixedWindow, 10}, {actorlimit.SlidingWindow, 5}, {actorlimit.SlidingLog, 5}} {
			t.Run(c.alg.String(), func(t *testing.T) {
				lim, clock := startAt(t, time.Date(2026, 11, 22, 11, 0, 59, 0, time.UTC))
				p := actorlimit.Policy{Algorithm: c.alg, Limit: 5, Period: time.Minute}
				got := countAllowed(t, lim, "user", p, 5)
				clock.Advance(time.Second) // 11:01:00
				got += countAllowed(t, lim, "user", p, 5)
				assert.Equal(t, c.want, got)
			})
		}
	})
}

// Every algorithm answers Hit, HitN, Peek, Reset and HitMany, with Results
// that mean the same thing.
func TestEveryAlgorithm(t *testing.T) {
	onEachStore(t, func(t *testing.T, startAt starter) {
		ctx := context.Background()
		for _, alg := range allAlgorithms {
			t.Run(alg.String(), func(t *testing.T) {
				lim, clock := startAt(t, time.Unix(1_800_000_000, 0))
				p := actorlimit.Policy{Algorithm: alg, Limit: 4, Period: time.Second, Burst: 4}
				if alg == actorlimit.LeakyBucket {
					p.Burst = 3 // 4 at once
				}
				peek, err := lim.Peek(ctx, "id", p)
				require.NoError(t, err)
				assert.Equal(t, actorlimit.Result{Allowed: true, Limit: 4, Remaining: 4}, peek, "a new key is at full capacity")

				res, err := lim.HitN(ctx, "id", p, 3)
				require.NoError(t, err)
				assert.True(t, res.Allowed)
				assert.Equal(t, int64(3), res.Count)
				assert.Equal(t, int64(1), res.Remaining)
				assert.Zero(t, res.RetryAfter)
				assert.Positive(t, res.ResetAfter)
				assert.Zero(t, res.Delay)

				res, err = lim.HitN(ctx, "id", p, 2)
				require.NoError(t, err)
				assert.False(t, res.Allowed)
				assert.Positive(t, res.RetryAfter)
				if alg != actorlimit.FixedWindow { // denied hits consume nothing
					peek, err = lim.Peek(ctx, "id", p)
					require.NoError(t, err)
					assert.Equal(t, int64(1), peek.Remaining, "after a denied HitN")
				}

				res, err = lim.HitN(ctx, "id", p, 5)
				require.NoError(t, err)
				assert.False(t, res.Allowed)
				assert.Equal(t, actorlimit.Never, res.RetryAfter, "more than the capacity")

				// After the announced wait, the denied hits pass.
				clock.Advance(time.Second)
				require.NoError(t, lim.Reset(ctx, "id", p))
				res, err = lim.HitN(ctx, "id", p, 4)
				require.NoError(t, err)
				assert.True(t, res.Allowed, "a reset key is at full capacity")

				hits := []actorlimit.HitRequest{{ID: "a", Policy: p}, {ID: "b", Policy: p, N: 4}, {ID: "a", Policy: p, N: 4}}
				results := make([]actorlimit.Result, len(hits))
				require.NoError(t, lim.HitMany(ctx, hits, results))
				assert.True(t, results[0].Allowed)
				assert.True(t, results[1].Allowed)
				assert.False(t, results[2].Allowed)
			})
		}
	})
}

// RetryAfter is honest: the denied hit made after it passes, and not a
// nanosecond before.
func TestRetryAfterIsHonest(t *testing.T) {
	onEachStore(t, func(t *testing.T, startAt starter) {
		ctx := context.Background()
		for _, alg := range allAlgorithms {
			t.Run(alg.String(), func(t *testing.T) {
				lim, clock := startAt(t, time.Unix(1_800_000_000, 0).Add(123456789))
				p := actorlimit.Policy{Algorithm: alg, Limit: 3, Period: 7 * time.Second}
				countAllowed(t, lim, "id", p, 5)
				res, err := lim.Hit(ctx, "id", p)
				require.NoError(t, err)
				require.False(t, res.Allowed)
				require.Positive(t, res.RetryAfter)
				clock.Advance(res.RetryAfter - time.Nanosecond)
				peek, err := lim.Peek(ctx, "id", p)
				require.NoError(t, err)
				assert.False(t, peek.Allowed, "a nanosecond before RetryAfter")
				clock.Advance(time.Nanosecond)
				res, err = lim.Hit(ctx, "id", p)
				require.NoError(t, err)
				assert.True(t, res.Allowed, "at RetryAfter")
			})
		}
	})
}

// LeakyBucket shapes: Burst+1 hits at once pass, the k-th with Delay
// (k-1)*Period/Limit; the next does not fit.
func TestLeakyBucketDelay(t *testing.T) {
	onEachStore(t, func(t *testing.T, startAt starter) {
		lim, _ := startAt(t, time.Unix(1_800_000_000, 0))
		p := actorlimit.Policy{Algorithm: actorlimit.LeakyBucket, Limit: 10, Period: time.Second, Burst: 5}
		for k := range 6 {
			res, err := lim.Hit(context.Background(), "ip", p)
			require.NoError(t, err)
			assert.True(t, res.Allowed)
			assert.Equal(t, time.Duration(k)*100*time.Millisecond, res.Delay, "hit %d", k+1)
		}
		res, err := lim.Hit(context.Background(), "ip", p)
		require.NoError(t, err)
		assert.Equal(t, actorlimit.Result{Limit: 10, Count: 6, RetryAfter: 100 * time.Millisecond, ResetAfter: 600 * time.Millisecond}, res)
	})
}

// State is kept per (algorithm, Period, id); a changed Limit or Burst applies
// at once to the same state.
func TestStateKeys(t *testing.T) {
	ctx := context.Background()
	lim, _ := startAt(t, time.Unix(1_800_000_000, 0))
	for _, alg := range allAlgorithms {
		p := actorlimit.Policy{Algorithm: alg, Limit: 2, Period: time.Minute}
		if alg == actorlimit.LeakyBucket {
			p.Burst = 1 // 2 at once
		}
		assert.Equal(t, 2, countAllowed(t, lim, "id", p, 3), "%v: separate from the other algorithms", alg)
		p.Period = 2 * time.Minute
		assert.Equal(t, 2, countAllowed(t, lim, "id", p, 3), "%v: separate from the other Period", alg)
		p.Limit, p.Burst = 3, 3
		if alg == actorlimit.LeakyBucket {
			p.Burst = 2
		}
		want := 1
		if alg == actorlimit.FixedWindow {
			want = 0 // it counted the denied hit too: 3 of 3
		}
		assert.Equal(t, want, countAllowed(t, lim, "id", p, 3), "%v: a raised Limit applies to the same state", alg)
	}
	st, err := lim.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2*len(allAlgorithms), st.Entries)
}

// The janitor removes every algorithm's state once it is back to full
// capacity, and not before.
func TestSweepEveryAlgorithm(t *testing.T) {
	ctx := context.Background()
	lim, clock := startAt(t, time.Unix(1_800_000_000, 0).Add(time.Millisecond))
	var longest time.Duration
	for _, alg := range allAlgorithms {
		p := actorlimit.Policy{Algorithm: alg, Limit: 5, Period: time.Second}
		res, err := lim.HitN(ctx, "id", p, 3)
		require.NoError(t, err)
		longest = max(longest, res.ResetAfter)
	}
	n, err := lim.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "live state")
	clock.Advance(longest + time.Second) // past the end of the bucket of each death
	n, err = lim.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, len(allAlgorithms), n)
}

func TestBadPolicies(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		p      actorlimit.Policy
		reason string
	}{
		{actorlimit.Policy{Algorithm: 6, Limit: 1, Period: ms}, "unknown Policy.Algorithm Algorithm(6)"},
		{actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1, Period: ms, Burst: -1}, "Burst is -1"},
		{actorlimit.Policy{Algorithm: actorlimit.SlidingWindow, Limit: 1, Period: ms + 1}, "not a whole number of milliseconds"},
		{actorlimit.Policy{Algorithm: actorlimit.SlidingLog, Limit: 1, Period: 1500 * time.Microsecond}, "not a whole number of milliseconds"},
		{actorlimit.Policy{Algorithm: actorlimit.SlidingLog, Limit: actorlimit.MaxSlidingLogLimit + 1, Period: ms}, "too large a log"},
		{actorlimit.Policy{Algorithm: actorlimit.SlidingWindow, Limit: 1, Period: 200 * 365 * 24 * time.Hour}, "too long"},
		{actorlimit.Policy{Algorithm: actorlimit.TokenBucket, Limit: 1, Period: 24 * time.Hour, Burst: 1 << 20}, "longer than"},
	} {
		t.Run(fmt.Sprint(c.p), func(t *testing.T) {
			lim, _ := startAt(t, time.Unix(1_800_000_000, 0))
			_, err := lim.Hit(context.Background(), "id", c.p)
			require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
			assert.Contains(t, err.Error(), c.reason)
		})
	}
	// The buckets take any positive Period, to the nanosecond.
	lim, _ := startAt(t, time.Unix(1_800_000_000, 0))
	for _, alg := range []actorlimit.Algorithm{actorlimit.GCRA, actorlimit.TokenBucket, actorlimit.LeakyBucket} {
		res, err := lim.Hit(context.Background(), "id", actorlimit.Policy{Algorithm: alg, Limit: 3, Period: 1001})
		require.NoError(t, err, alg)
		assert.True(t, res.Allowed, alg)
	}
}
