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

// ttls returns the PTTL of every key in Redis, found by SCAN.
func ttls(t *testing.T, client *redis.Client) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	out := map[string]time.Duration{}
	iter := client.Scan(ctx, 0, "*", 100).Iterator()
	for iter.Next(ctx) {
		d, err := client.PTTL(ctx, iter.Val()).Result()
		require.NoError(t, err)
		out[iter.Val()] = d
	}
	require.NoError(t, iter.Err())
	return out
}

// TestEveryKeyHasATTL proves that every key a script writes expires: for
// every algorithm, with Redis's TIME and with the caller's, after a hit, a
// hit that is denied, a change of Limit and a peek, each key has a TTL of
// more than its grace and at most its life (the longest ResetAfter its
// checks were given, and up to two slots more for the sliding window) plus
// the grace (1s with Redis's TIME, a minute with the caller's). A peek of a
// new key writes none. TestDifferential checks every key it leaves too.
func TestEveryKeyHasATTL(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	ctx := context.Background()
	const period = 2 * time.Second
	for _, tc := range []struct {
		name  string
		opts  []redisstore.Option
		grace time.Duration
	}{
		{"redis time", nil, time.Second},
		{"caller time", []redisstore.Option{redisstore.WithCallerTime()}, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, client.FlushAll(ctx).Err())
			s, err := redisstore.New(client, append(tc.opts, redisstore.WithOutage(redisstore.FailError), patient)...)
			require.NoError(t, err)
			now := time.Now().UnixNano()
			life := map[string]time.Duration{}
			for _, a := range algo.All() {
				c := hit(a, "ttl", 2, 1, period)
				denied := hit(a, "ttl", 2, 2, period)
				changed := hit(a, "ttl", 3, 1, period)
				peek := hit(a, "fresh", 2, 1, period)
				peek.Op = algo.OpPeek
				for _, d := range decide(t, s, now, c, denied, c, denied, changed, peek) {
					life[redisstore.Key(s, &c)] = max(life[redisstore.Key(s, &c)], d.ResetAfter)
				}
			}
			keys := ttls(t, client)
			assert.Len(t, keys, len(algo.All()), "one key per algorithm, none for a peek: %v", keys)
			for k, d := range keys {
				// -1 is no TTL, -2 no key. The scripts keep a key for its
				// ResetAfter, rounded up to a millisecond (a sliding window up
				// to two slots more), and the grace.
				assert.Greater(t, d, tc.grace-time.Second, "%s: PTTL %v", k, d)
				assert.LessOrEqual(t, d, life[k]+period/30+2*time.Millisecond+tc.grace, "%s: PTTL %v", k, d)
			}
		})
	}
}
