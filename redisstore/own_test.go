package redisstore_test

import (
	"context"
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

// TestOwnConnectionAcrossRestarts: with a client that ends round trips at
// their deadlines (as the package doc advises), the store keeps a
// connection of its own, which skips the pool's health check while it is
// in use. A Redis restarted between two round trips a moment apart is
// found by the next round trip on it, which fails (an outage: FailError's
// ErrUnavailable), and the connection is replaced: once the probe
// interval has passed, the restarted Redis decides. A connection idle for
// longer than a moment goes back to the pool, whose check finds a restart
// before it is used: no round trip fails. A client without its own
// connection (a pool of one, no deadlines, RESP3) finds every restart
// through the pool's check.
func TestOwnConnectionAcrossRestarts(t *testing.T) {
	honoring := func(o *redis.Options) {
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries, o.Protocol = true, -1, 1, 2
	}
	tests := []struct {
		name   string
		opts   func(*redis.Options)
		idle   time.Duration // the wall clock's move between the round trips
		failed bool          // the round trip after the restart fails
	}{
		{"own connection, a moment apart", honoring, 0, true},
		{"own connection, idle", honoring, redisstore.OwnIdle + 1, false},
		{"a pool of one", func(o *redis.Options) { honoring(o); o.PoolSize = 1 }, 0, false},
		{"no deadlines", func(o *redis.Options) { honoring(o); o.ContextTimeoutEnabled = false }, 0, false},
		{"RESP3", func(o *redis.Options) { honoring(o); o.Protocol = 3 }, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			client := srv.Client(tt.opts)
			t.Cleanup(func() { _ = client.Close() })
			s, err := redisstore.New(client, redisstore.WithOutage(redisstore.FailError),
				redisstore.WithCallerTime(), redisstore.WithTimeout(500*time.Millisecond),
				redisstore.WithProbeInterval(time.Second))
			require.NoError(t, err)
			var wall atomic.Int64
			wall.Store(t0)
			redisstore.SetWall(s, wall.Load)
			c := hit(algo.FixedWindow, "own", 10, 1, time.Hour)
			for i := range int64(3) {
				assert.Equal(t, i+1, decide(t, s, t0, c)[0].Count)
			}
			srv.Kill()
			srv.Restart()
			wall.Add(int64(tt.idle))
			out := make([]algo.Decision, 1)
			err = s.Decide(context.Background(), t0, []algo.Check{c}, out)
			if !tt.failed {
				require.NoError(t, err)
				assert.Equal(t, int64(1), out[0].Count, "the restarted Redis is empty")
				assert.Zero(t, s.Stats().Outages)
				return
			}
			require.ErrorIs(t, err, redisstore.ErrUnavailable)
			assert.Equal(t, uint64(1), s.Stats().Outages)
			// The probe interval passes on Decide's now, not on the wall
			// clock: the connection is not idle for long either.
			later := t0 + int64(time.Second)
			assert.Equal(t, int64(1), decide(t, s, later, c)[0].Count, "the restarted Redis is empty")
			assert.Equal(t, int64(2), decide(t, s, later, c)[0].Count)
			assert.Equal(t, uint64(1), s.Stats().Outages, "the connection was not replaced")
		})
	}
}
