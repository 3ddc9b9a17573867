package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// mixed returns n checks that cycle through every algorithm (so every
// script) on a few ids, with a Reset and a Peek among them.
func mixed(n int) []algo.Check {
	all := algo.All()
	cs := make([]algo.Check, n)
	for i := range cs {
		cs[i] = hit(all[i%len(all)], fmt.Sprintf("rt%d", i%7), 1000, 1, time.Minute)
		switch i % 11 {
		case 5:
			cs[i].Op = algo.OpPeek
		case 10:
			cs[i].Op = algo.OpReset
		}
	}
	return cs
}

// TestOneRoundTripPerBatch proves that a batch of up to WithMaxBatch checks
// is one round trip to Redis, whatever its algorithms, that a larger batch
// takes one per WithMaxBatch checks, that a batch Redis has nothing to say
// about takes none, and what a flushed script cache adds: the round trip
// that got NOSCRIPT, one SCRIPT LOAD per script (three, one after another),
// and one for the commands sent again.
func TestOneRoundTripPerBatch(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	rt := &redistest.RoundTrips{}
	client.AddHook(rt)
	ctx := context.Background()
	require.NoError(t, client.Ping(ctx).Err()) // the connection is dialed and set up
	const max = 100
	s, err := redisstore.New(client, redisstore.WithMaxBatch(max), redisstore.WithOutage(redisstore.FailError), patient)
	require.NoError(t, err)
	trips := func(checks []algo.Check) int64 {
		t.Helper()
		before := rt.N()
		out := make([]algo.Decision, len(checks))
		require.NoError(t, s.Decide(ctx, t0, checks, out))
		return rt.N() - before
	}
	trips(mixed(6)) // a new Redis has none of the scripts yet: NOSCRIPT, loads
	require.Equal(t, uint64(1), s.Stats().Reloads)
	for _, c := range []struct {
		checks int
		trips  int64
	}{{1, 1}, {2, 1}, {6, 1}, {max, 1}, {max + 1, 2}, {2*max + 50, 3}} {
		assert.Equal(t, c.trips, trips(mixed(c.checks)), "%d checks", c.checks)
	}
	zero := hit(algo.GCRA, "rt-zero", 0, 1, time.Second)
	zero.Burst = 0
	assert.Equal(t, int64(0), trips([]algo.Check{zero, zero}), "buckets of limit 0 are decided here")

	require.NoError(t, client.ScriptFlush(ctx).Err())
	assert.Equal(t, int64(1+3+1), trips(mixed(6)), "after SCRIPT FLUSH")
	assert.Equal(t, uint64(2), s.Stats().Reloads)
	assert.Equal(t, int64(1), trips(mixed(6)), "the scripts are back")
}
