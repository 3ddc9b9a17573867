package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// step is one check of a sequence at t0+at and the decision it must get.
type step struct {
	at   time.Duration
	op   algo.Op
	n    int64
	want algo.Decision
}

// runSteps runs steps on one key of algorithm a, limit 2 per second (burst
// 2), printing the step that fails.
func runSteps(t *testing.T, s *redisstore.Store, a algo.Algorithm, steps []step) {
	t.Helper()
	for i, st := range steps {
		c := algo.Check{Op: st.op, Algorithm: a, ID: "steps", Period: time.Second, Limit: 2, Burst: 2, N: st.n}
		if c.Algorithm == algo.LeakyBucket {
			c.Burst = 1 // two at once: the one served and one waiting
		}
		got := decide(t, s, t0+int64(st.at), c)[0]
		assert.Equal(t, st.want, got, "step %d: %+v", i, st)
	}
}

// TestAlgorithms proves each algorithm's decisions on short sequences worked
// out by hand, with the caller's time; the fixed window's in both modes
// (its script, a key per window), across a window's end on the injected
// clock.
func TestAlgorithms(t *testing.T) {
	srv := redistest.Start(t)
	ms := time.Millisecond
	cases := map[algo.Algorithm][]step{
		algo.FixedWindow: {
			{0, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 1, Remaining: 1, ResetAfter: time.Second}},
			{250 * ms, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 2, ResetAfter: 750 * ms}},
			{500 * ms, algo.OpHit, 1, algo.Decision{Count: 3, RetryAfter: 500 * ms, ResetAfter: 500 * ms}},
			{500 * ms, algo.OpHit, 3, algo.Decision{Count: 6, RetryAfter: algo.Never, ResetAfter: 500 * ms}},
			{time.Second, algo.OpPeek, 1, algo.Decision{Allowed: true, Remaining: 2}},
			{time.Second, algo.OpHit, 2, algo.Decision{Allowed: true, Count: 2, ResetAfter: time.Second}},
			{time.Second, algo.OpReset, 1, algo.Decision{}},
			{time.Second, algo.OpPeek, 1, algo.Decision{Allowed: true, Remaining: 2}},
		},
		algo.GCRA: {
			{0, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 1, Remaining: 1, ResetAfter: 500 * ms}},
			{0, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 2, ResetAfter: time.Second}},
			{0, algo.OpHit, 1, algo.Decision{Count: 2, RetryAfter: 500 * ms, ResetAfter: time.Second}},
			{250 * ms, algo.OpPeek, 1, algo.Decision{Count: 2, RetryAfter: 250 * ms, ResetAfter: 750 * ms}},
			{500 * ms, algo.OpHit, 3, algo.Decision{Count: 1, Remaining: 1, RetryAfter: algo.Never, ResetAfter: 500 * ms}},
		},
		algo.TokenBucket: {
			{0, algo.OpHit, 2, algo.Decision{Allowed: true, Count: 2, ResetAfter: time.Second}},
			{750 * ms, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 2, ResetAfter: 750 * ms}},
		},
		algo.LeakyBucket: {
			{0, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 1, Remaining: 1, ResetAfter: 500 * ms}},
			{0, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 2, ResetAfter: time.Second, Delay: 500 * ms}},
			{0, algo.OpHit, 1, algo.Decision{Count: 2, RetryAfter: 500 * ms, ResetAfter: time.Second}},
		},
		algo.SlidingWindow: {
			{0, algo.OpHit, 2, algo.Decision{Allowed: true, Count: 2, ResetAfter: 1016666667}},
			{990 * ms, algo.OpHit, 1, algo.Decision{Count: 2, RetryAfter: 26666667, ResetAfter: 26666667}},
			{1020 * ms, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 1, Remaining: 1, ResetAfter: 1013333334}},
		},
		algo.SlidingLog: {
			{0, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 1, Remaining: 1, ResetAfter: 1001 * ms}},
			{500 * ms, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 2, ResetAfter: 1001 * ms}},
			{1000 * ms, algo.OpHit, 1, algo.Decision{Count: 2, RetryAfter: 1 * ms, ResetAfter: 501 * ms}},
			{1001 * ms, algo.OpHit, 1, algo.Decision{Allowed: true, Count: 2, ResetAfter: 1001 * ms}},
		},
	}
	for a, steps := range cases {
		for _, m := range modes {
			if m.win && a != algo.FixedWindow {
				continue // the other algorithms do not change with the mode
			}
			t.Run(a.String()+"/"+m.name, func(t *testing.T) {
				require.NoError(t, srv.Client().FlushAll(context.Background()).Err())
				s, err := redisstore.New(srv.Client(), withMode(m, redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError), patient)...)
				require.NoError(t, err)
				runSteps(t, s, a, steps)
			})
		}
	}
}
