package redisstore_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
	"github.com/actorlimit/actorlimit/table"
)

// TestLoneFixedHitExact proves that the fixed window script's path for a
// lone hit (6 arguments, 2 or 3 numbers back) and its loop for runs decide
// alike and write the same state, and both as the table does: Limits from
// 1 to 2^53 and past it, N from 1 to MaxInt64 (the count saturates there),
// Periods from 1 ms to ten years (the time to the window's end past 2^53
// ns, which the lone path sends as whole ms and the ns within), peeks
// between the hits (which go the loop's way), and a clock that steps back
// as well as forward past the window's end. The one store sends each check
// alone; the other sends it in a run of two, behind a hit on a key of its
// own. With a key per window (mode=windowkeys) both send INCRBY and
// PEXPIRE, alone and in a pipeline, on a clock that never steps back (see
// WithWindowKeys), and leave the same count under the window's key.
func TestLoneFixedHitExact(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { loneFixedHitExact(t, m) })
	}
}

func loneFixedHitExact(t *testing.T, m mode) {
	srv := redistest.Start(t)
	client := srv.Client()
	ctx := context.Background()
	require.NoError(t, client.FlushAll(ctx).Err())
	lone, err := redisstore.New(client, withMode(m, redisstore.WithPrefix("lone:"), redisstore.WithCallerTime(), patient,
		redisstore.WithOutage(redisstore.FailError))...)
	require.NoError(t, err)
	runs, err := redisstore.New(client, withMode(m, redisstore.WithPrefix("runs:"), redisstore.WithCallerTime(), patient,
		redisstore.WithOutage(redisstore.FailError))...)
	require.NoError(t, err)
	tab := table.New(0)
	limits := []int64{1, 2, 7, 1000, 1 << 53, 1<<53 + 1, math.MaxInt64 - 1}
	periods := []time.Duration{time.Millisecond, 59 * time.Millisecond, time.Second, time.Hour,
		24 * time.Hour, 110 * 24 * time.Hour, 3650 * 24 * time.Hour}
	ns := []int64{1, 1, 1, 2, 1 << 52, 1 << 53, math.MaxInt64}
	rng := rand.New(rand.NewPCG(43, 2))
	now := int64(1_790_000_000_123_456_789)
	long := 0 // lone hits answered with whole ms and the ns within
	for step := range 3000 {
		switch rng.IntN(8) {
		case 0:
			if !m.win {
				now -= 1 + rng.Int64N(int64(time.Second)) // a clock that steps back
			}
		case 1:
			now += rng.Int64N(int64(48 * time.Hour)) // past the end of most windows
		default:
			now += rng.Int64N(int64(10 * time.Millisecond))
		}
		c := algo.Check{Algorithm: algo.FixedWindow, ID: []string{"k0", "k1", "k2"}[rng.IntN(3)],
			Period: periods[rng.IntN(len(periods))], Limit: limits[rng.IntN(len(limits))], N: ns[rng.IntN(len(ns))]}
		if rng.IntN(6) == 0 {
			c.Op = algo.OpPeek
		}
		require.NoError(t, lone.Screen(&c), "%+v", c)
		other := algo.Check{Algorithm: algo.FixedWindow, ID: "other", Period: time.Second, Limit: 10, N: 1}
		want := make([]algo.Decision, 1)
		require.NoError(t, tab.Decide(ctx, now, []algo.Check{c}, want))
		got := make([]algo.Decision, 1)
		require.NoError(t, lone.Decide(ctx, now, []algo.Check{c}, got))
		inRun := make([]algo.Decision, 2)
		require.NoError(t, runs.Decide(ctx, now, []algo.Check{other, c}, inRun))
		require.Equal(t, want[0], got[0], "step %d, alone: %+v at %d", step, c, now)
		require.Equal(t, want[0], inRun[1], "step %d, in a run: %+v at %d", step, c, now)
		if c.Op == algo.OpHit && got[0].ResetAfter >= 1<<53 {
			long++
		}
		k1, k2 := redisstore.KeyAt(lone, &c, now), redisstore.KeyAt(runs, &c, now)
		var s1, s2 any
		if m.win {
			s1, s2 = client.Get(ctx, k1).Val(), client.Get(ctx, k2).Val()
		} else {
			s1, s2 = client.HGetAll(ctx, k1).Val(), client.HGetAll(ctx, k2).Val()
		}
		require.Equal(t, s1, s2, "step %d: the state the two paths left", step)
		if client.Exists(ctx, k1).Val() == 1 {
			d1, err := client.PTTL(ctx, k1).Result()
			require.NoError(t, err)
			assert.Positive(t, d1, "step %d: the key has a TTL", step)
		}
	}
	assert.Positive(t, long, "lone hits whose window ends 2^53 ns or more away")
}
