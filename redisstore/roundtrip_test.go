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

// TestReloadKeepsResetsInOrder proves that a batch whose scripts Redis
// lacks (a restart, SCRIPT FLUSH) is decided in its order although the
// commands that got NOSCRIPT are sent again after the others ran: a Reset
// behind a hit on its key still comes after the hit (the hit is not left
// counted), and a Reset of a key whose script Redis had is not run again
// after the hits behind it (they are not lost).
func TestReloadKeepsResetsInOrder(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	ctx := context.Background()
	s, err := redisstore.New(client, redisstore.WithOutage(redisstore.FailError), patient)
	require.NoError(t, err)
	fixed := hit(algo.FixedWindow, "reload-a", 10, 1, time.Hour)
	bucket := hit(algo.GCRA, "reload-b", 10, 1, time.Hour)
	decide(t, s, t0, bucket) // the bucket script is loaded; the fixed window's is not
	require.NoError(t, client.ScriptFlush(ctx).Err())
	decide(t, s, t0, bucket) // loaded again: only the fixed window's is missing now
	reset := func(c algo.Check) algo.Check { c.Op = algo.OpReset; return c }
	peek := func(c algo.Check) algo.Check { c.Op = algo.OpPeek; return c }
	out := decide(t, s, t0, fixed, fixed, reset(fixed), fixed, peek(fixed),
		reset(bucket), bucket, peek(bucket))
	assert.Equal(t, int64(1), out[3].Count, "the fixed window counts from its Reset")
	assert.Equal(t, int64(1), out[4].Count, "and its peek sees that")
	assert.Equal(t, int64(1), out[6].Count, "the bucket counts from its Reset")
	assert.Equal(t, int64(1), out[7].Count, "and its hit is kept")
	assert.Equal(t, uint64(3), s.Stats().Reloads, "a new Redis, the flush, and the batch")
	after := decide(t, s, t0, peek(fixed), peek(bucket))
	assert.Equal(t, int64(1), after[0].Count, "what Redis holds after the batch: the fixed window")
	assert.Equal(t, int64(1), after[1].Count, "what Redis holds after the batch: the bucket")
}
