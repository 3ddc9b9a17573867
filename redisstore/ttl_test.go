package redisstore_test

import (
	"context"
	"strings"
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
// the grace (1s with Redis's TIME, a minute with the caller's; twice that
// for a bucket, see TestBucketTTLMovesOnlyWhenDue). A peek of a
// new key writes none. With a key per window (WithWindowKeys) the fixed
// window's key is its window's, and TestWindowKeysTTLSetOnce proves its
// TTL is set once. TestDifferential checks every key it leaves too.
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
		{"window keys", []redisstore.Option{redisstore.WithCallerTime(), redisstore.WithWindowKeys()}, time.Minute},
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
				k := redisstore.KeyAt(s, &c, now)
				for _, d := range decide(t, s, now, c, denied, c, denied, changed, peek) {
					life[k] = max(life[k], d.ResetAfter)
				}
			}
			keys := ttls(t, client)
			assert.Len(t, keys, len(algo.All()), "one key per algorithm, none for a peek: %v", keys)
			for k, d := range keys {
				// -1 is no TTL, -2 no key. The scripts keep a key for its
				// ResetAfter, rounded up to a millisecond (a sliding window up
				// to two slots more), and the grace; a bucket's for a grace
				// more, so that it needs no new TTL at every hit.
				grace := tc.grace
				if strings.Contains(k, "Bucket:") || strings.Contains(k, "GCRA:") {
					grace *= 2
				}
				assert.Greater(t, d, tc.grace-time.Second, "%s: PTTL %v", k, d)
				assert.LessOrEqual(t, d, life[k]+period/30+2*time.Millisecond+grace, "%s: PTTL %v", k, d)
			}
		})
	}
}

// TestBucketTTLMovesOnlyWhenDue proves that a bucket's key is given a new
// TTL only when the one it has would end before the bucket is empty plus
// the grace, and then a grace beyond that: a key hit often is not given a
// TTL at every hit, and never one too short.
func TestBucketTTLMovesOnlyWhenDue(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	ctx := context.Background()
	s, err := redisstore.New(client, redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError), patient)
	require.NoError(t, err)
	now := time.Now().UnixNano()
	// 1000 a second: each hit leaves a backlog of 1 ms; the grace is a
	// minute (caller time).
	c := hit(algo.GCRA, "ttl-moves", 1000, 1, time.Second)
	key := redisstore.Key(s, &c)
	pttl := func() time.Duration {
		d, err := client.PTTL(ctx, key).Result()
		require.NoError(t, err)
		return d
	}
	const slack = 2 * time.Second // Redis's clock runs while the test does
	decide(t, s, now, c)
	// The key's expiry E: 1 ms of backlog, 1 ms, and two graces.
	assert.InDelta(t, float64(2*time.Minute+2*time.Millisecond), float64(pttl()), float64(slack))

	// A second later E is still beyond the backlog and a grace: the hit
	// keeps the TTL, here one set by the test to tell it apart.
	require.NoError(t, client.PExpire(ctx, key, time.Hour).Err())
	decide(t, s, now+int64(time.Second), c)
	assert.InDelta(t, float64(time.Hour), float64(pttl()), float64(slack), "KEEPTTL")

	// 70 s after the first hit E (at 120 s) comes before the backlog and a
	// grace (at 130 s): the TTL moves, to two graces.
	decide(t, s, now+int64(70*time.Second), c)
	assert.InDelta(t, float64(2*time.Minute+2*time.Millisecond), float64(pttl()), float64(slack), "moved")

	// A peek writes nothing.
	require.NoError(t, client.PExpire(ctx, key, time.Hour).Err())
	peek := c
	peek.Op = algo.OpPeek
	decide(t, s, now+int64(300*time.Second), peek)
	assert.InDelta(t, float64(time.Hour), float64(pttl()), float64(slack), "peek")
}
