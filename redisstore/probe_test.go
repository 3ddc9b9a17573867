package redisstore_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// TestProbeOnWallClock proves that the outage probe is paced by the wall
// clock too: with the caller's time held still (a stopped limiter clock),
// the store leaves a restarted Redis alone until the probe interval has
// passed on the wall clock (a fake one here), then probes it and decides
// by Redis again. Paced by the now given to Decide alone, it never would.
func TestProbeOnWallClock(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.New(srv.Client(func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 }),
		redisstore.WithCallerTime(), redisstore.WithTimeout(200*time.Millisecond), redisstore.WithProbeInterval(time.Second))
	require.NoError(t, err)
	var wall atomic.Int64
	wall.Store(t0)
	redisstore.SetWall(s, wall.Load)
	c := hit(algo.FixedWindow, "stopped", 10, 1, time.Hour)
	assert.Equal(t, int64(1), decide(t, s, t0, c)[0].Count)
	srv.Kill()
	assert.Equal(t, int64(1), decide(t, s, t0, c)[0].Count, "the fallback table starts empty")
	require.Equal(t, uint64(1), s.Stats().Outages)
	srv.Restart()
	wall.Add(int64(time.Second) - 1)
	decide(t, s, t0, c)
	assert.Zero(t, s.Stats().Probes, "before the interval on the wall clock")
	wall.Add(1)
	d := decide(t, s, t0, c)[0]
	assert.Equal(t, uint64(1), s.Stats().Probes)
	assert.Equal(t, int64(1), d.Count, "the restarted Redis (empty) decides, not the fallback table (at 2)")
	assert.Equal(t, uint64(2), s.Stats().Fallbacks)
}
