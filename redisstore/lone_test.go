package redisstore_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
	"github.com/actorlimit/actorlimit/table"
)

// TestLoneCheckPathExact proves that the bucket script's path for a run
// of one check (a lone caller's, and every check on Redis Cluster) and its
// path for longer runs decide alike and write the same state, and both as
// the table does, at the edges: Limits from 1 to 2^52-1, N from 1 to
// MaxInt64 (more than the bucket holds: denied for ever), a Limit or Burst
// changed on a live key (up and down, by a factor of 2^40 too), Periods
// from 1 ns to a bucket that takes MaxSpan to drain, and a clock that steps
// back by 1 ns to a second as well as forward past the bucket's end. The
// one store sends each check alone; the other sends it in a run of two,
// behind a check on a key of its own.
func TestLoneCheckPathExact(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	require.NoError(t, client.FlushAll(context.Background()).Err())
	lone, err := redisstore.New(client, redisstore.WithPrefix("lone:"), redisstore.WithCallerTime(), patient,
		redisstore.WithOutage(redisstore.FailError))
	require.NoError(t, err)
	runs, err := redisstore.New(client, redisstore.WithPrefix("runs:"), redisstore.WithCallerTime(), patient,
		redisstore.WithOutage(redisstore.FailError))
	require.NoError(t, err)
	tab := table.New(0)
	limits := []int64{1, 2, 7, 1000, 1e9, 300_000_000_000_007, 1<<52 - 1}
	periods := []time.Duration{1, 3, time.Millisecond, 59 * time.Millisecond, time.Second, time.Hour, 24 * time.Hour}
	rng := rand.New(rand.NewPCG(11, 5))
	now := int64(1_790_000_000_123_456_789)
	checked := 0
	for step := 0; step < 3000; step++ {
		switch rng.IntN(8) {
		case 0:
			now -= 1 + rng.Int64N(int64(time.Second)) // a clock that steps back
		case 1:
			now--
		case 2:
			now += rng.Int64N(int64(48 * time.Hour)) // past the end of most buckets
		default:
			now += rng.Int64N(int64(10 * time.Millisecond))
		}
		a := []algo.Algorithm{algo.GCRA, algo.TokenBucket, algo.LeakyBucket}[rng.IntN(3)]
		c := algo.Check{Algorithm: a, ID: []string{"k0", "k1"}[rng.IntN(2)], Period: periods[rng.IntN(len(periods))],
			Limit: limits[rng.IntN(len(limits))]}
		burst := int64(0)
		if rng.IntN(3) == 0 {
			burst = limits[rng.IntN(len(limits))]
		}
		if algo.Validate(a, c.Limit, c.Period, burst) != nil {
			continue
		}
		c.Burst = algo.Burst(c.Limit, burst)
		capc := algo.BucketCapacity(a, c.Burst)
		c.N = []int64{1, 1, 1, 2, capc, capc + 1, math.MaxInt64}[rng.IntN(7)]
		if c.N <= 0 { // capc+1 past MaxInt64
			c.N = math.MaxInt64
		}
		if rng.IntN(6) == 0 {
			c.Op = algo.OpPeek
		}
		if lone.Screen(&c) != nil {
			continue // beyond what the scripts decide exactly, refused before anything is sent
		}
		other := algo.Check{Algorithm: algo.GCRA, ID: "other", Period: time.Second, Limit: 10, Burst: 10, N: 1}
		want := make([]algo.Decision, 1)
		require.NoError(t, tab.Decide(context.Background(), now, []algo.Check{c}, want))
		got := make([]algo.Decision, 1)
		require.NoError(t, lone.Decide(context.Background(), now, []algo.Check{c}, got))
		inRun := make([]algo.Decision, 2)
		require.NoError(t, runs.Decide(context.Background(), now, []algo.Check{other, c}, inRun))
		require.Equal(t, want[0], got[0], "step %d, alone: %+v at %d", step, c, now)
		require.Equal(t, want[0], inRun[1], "step %d, in a run: %+v at %d", step, c, now)
		a1, err := client.Get(context.Background(), redisstore.Key(lone, &c)).Result()
		if err == nil {
			a2, err := client.Get(context.Background(), redisstore.Key(runs, &c)).Result()
			require.NoError(t, err)
			require.Equal(t, a1, a2, "step %d: the state the two paths left", step)
		}
		checked++
	}
	assert.Greater(t, checked, 1500, "checks the scripts decide")
	for k, d := range ttls(t, client) {
		assert.Positive(t, d, "%s has no TTL (-1)", k)
		assert.True(t, strings.HasPrefix(k, "lone:") || strings.HasPrefix(k, "runs:"), k)
	}
}
