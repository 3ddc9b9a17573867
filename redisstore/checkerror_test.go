package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// spoil writes under key a value that the script of its algorithm cannot
// use.
type spoil struct {
	name  string
	alg   algo.Algorithm
	write func(ctx context.Context, c *redis.Client, key string) error
	reply string // the start of Redis's error reply
	win   bool   // the store keeps a key per window (WithWindowKeys)
}

var spoils = []spoil{
	{"bucket key holding a hash", algo.GCRA, func(ctx context.Context, c *redis.Client, key string) error {
		return c.HSet(ctx, key, "tat", "1").Err()
	}, "WRONGTYPE", false},
	{"bucket state the script cannot read", algo.TokenBucket, func(ctx context.Context, c *redis.Client, key string) error {
		return c.Set(ctx, key, "12 34", time.Hour).Err()
	}, "ERR", false},
	{"window key holding a string", algo.SlidingWindow, func(ctx context.Context, c *redis.Client, key string) error {
		return c.Set(ctx, key, "x", time.Hour).Err()
	}, "WRONGTYPE", false},
	{"fixed window key holding a list", algo.FixedWindow, func(ctx context.Context, c *redis.Client, key string) error {
		return c.RPush(ctx, key, "x").Err()
	}, "WRONGTYPE", false},
	{"window key holding a list", algo.FixedWindow, func(ctx context.Context, c *redis.Client, key string) error {
		return c.RPush(ctx, key, "x").Err()
	}, "WRONGTYPE", true},
	{"window key holding no count", algo.FixedWindow, func(ctx context.Context, c *redis.Client, key string) error {
		return c.Set(ctx, key, "x", time.Hour).Err()
	}, "ERR", true},
}

// TestBadKeyFailsAlone proves that a key Redis answers with an error (one
// of another type, or a state the script cannot read) fails its own check
// alone, in every outage mode: the other checks of its pipeline and of the
// batches after it are Redis's, Redis is not marked down, and the bad check
// is decided as the mode says (FailError: an error wrapping ErrCheckFailed
// with Redis's reply, and out holds the others' decisions).
func TestBadKeyFailsAlone(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	ctx := context.Background()
	modes := []redisstore.Outage{redisstore.Fallback, redisstore.FailOpen, redisstore.FailClosed, redisstore.FailError}
	for _, sp := range spoils {
		for _, mode := range modes {
			t.Run(sp.name+"/"+mode.String(), func(t *testing.T) {
				require.NoError(t, client.FlushAll(ctx).Err())
				opts := []redisstore.Option{redisstore.WithCallerTime(), redisstore.WithOutage(mode), patient}
				if sp.win {
					opts = append(opts, redisstore.WithWindowKeys())
				}
				s, err := redisstore.New(client, opts...)
				require.NoError(t, err)
				good := hit(sp.alg, "good", 5, 1, time.Hour)
				bad := hit(sp.alg, "bad", 5, 1, time.Hour)
				require.NoError(t, sp.write(ctx, client, redisstore.KeyAt(s, &bad, t0)))

				out := make([]algo.Decision, 3)
				err = s.Decide(ctx, t0, []algo.Check{good, bad, good}, out) // one pipeline
				assert.Equal(t, []int64{1, 2}, []int64{out[0].Count, out[2].Count}, "the good checks are Redis's")
				assert.True(t, out[0].Allowed && out[2].Allowed)
				switch mode {
				case redisstore.FailError:
					require.ErrorIs(t, err, redisstore.ErrCheckFailed)
					assert.Contains(t, err.Error(), "check 1, key "+redisstore.KeyAt(s, &bad, t0)+": "+sp.reply)
				case redisstore.FailClosed:
					require.NoError(t, err)
					assert.False(t, out[1].Allowed)
				default:
					require.NoError(t, err)
					assert.True(t, out[1].Allowed)
				}

				// A lone bad check (one command, no pipeline) fails alone too.
				err = s.Decide(ctx, t0, []algo.Check{bad}, make([]algo.Decision, 1))
				assert.Equal(t, mode == redisstore.FailError, err != nil, "%v", err)
				// And the next batch is Redis's: no outage, no probe.
				assert.Equal(t, int64(3), decide(t, s, t0, good)[0].Count)

				st := s.Stats()
				assert.Equal(t, uint64(2), st.CheckErrors)
				assert.Zero(t, st.Outages)
				assert.Zero(t, st.Errors)
				assert.Zero(t, st.Probes)
				assert.Equal(t, uint64(2), map[redisstore.Outage]uint64{redisstore.Fallback: st.Fallbacks,
					redisstore.FailOpen: st.FailedOpen, redisstore.FailClosed: st.FailedClosed, redisstore.FailError: 2}[mode],
					"the bad checks, decided by the mode: %+v", st)
			})
		}
	}
}

// TestKeysCarryTheLayoutVersion proves that keys written by an earlier
// state layout (no version in the key; here the bucket state as the 4-field
// hash it once was) are not read by this one: a rolling deploy across a
// change of layout counts apart instead of failing.
func TestKeysCarryTheLayoutVersion(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	ctx := context.Background()
	s, err := redisstore.New(client, redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError), patient)
	require.NoError(t, err)
	for _, a := range algo.All() {
		c := hit(a, "old", 5, 1, time.Second)
		old := "actorlimit:{old}:" + a.String() + ":1000000000"
		require.NoError(t, client.HSet(ctx, old, "f", "1", "fr", "2", "q", "3", "l", "5").Err())
		if a == algo.SlidingWindow || a == algo.SlidingLog || a == algo.FixedWindow {
			require.NoError(t, client.Del(ctx, old).Err())
			require.NoError(t, client.Set(ctx, old, "1 2 3 5", time.Hour).Err()) // a hash holder reads a string as the wrong type
		}
		d := decide(t, s, t0, c)[0]
		assert.Equal(t, int64(1), d.Count, "%v", a)
		assert.NotEqual(t, old, redisstore.Key(s, &c))
	}
	assert.Zero(t, s.Stats().CheckErrors)
}
