package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
	"github.com/actorlimit/actorlimit/table"
)

// TestDeniedCache proves the over-limit cache's semantics, for every
// algorithm, on the caller's clock: once Redis denies a hit, the hits on
// that key under the same policy and N are answered
// denied without a round trip until the denial's RetryAfter (or the bound)
// has passed, with the decision the embedded table gives in Allowed,
// RetryAfter and ResetAfter; a hit with another N, another policy, a peek
// or a clock stepped back goes to Redis; at the end of the denial Redis is
// asked again; a Reset through this store forgets the denial at once, one
// through another store is seen only at its end. The fixed window runs in
// both modes (its script, a key per window).
func TestDeniedCache(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	rt := &redistest.RoundTrips{}
	client.AddHook(rt)
	ctx := context.Background()
	warm, err := redisstore.New(client, patient)
	require.NoError(t, err)
	decide(t, warm, t0, mixed(11)...) // the scripts are loaded
	for _, a := range algo.All() {
		for _, m := range modes {
			if m.win && a != algo.FixedWindow {
				continue
			}
			t.Run(a.String()+"/"+m.name, func(t *testing.T) {
				require.NoError(t, client.FlushAll(ctx).Err())
				s, err := redisstore.New(client, withMode(m, redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError),
					redisstore.WithDeniedCache(time.Hour), patient)...)
				require.NoError(t, err)
				other, err := redisstore.New(client, withMode(m, redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError), patient)...)
				require.NoError(t, err)
				tab := table.New(0)
				c := hit(a, "flood", 3, 1, time.Minute)
				now := t0
				step := func(what string, st *redisstore.Store, c algo.Check, wantTrips int64) algo.Decision {
					t.Helper()
					want := make([]algo.Decision, 1)
					require.NoError(t, tab.Decide(ctx, now, []algo.Check{c}, want))
					before := rt.N()
					got := decide(t, st, now, c)[0]
					assert.Equal(t, wantTrips, rt.N()-before, "%s: round trips", what)
					assert.Equal(t, want[0].Allowed, got.Allowed, "%s: Allowed", what)
					assert.Equal(t, want[0].RetryAfter, got.RetryAfter, "%s: RetryAfter", what)
					assert.Equal(t, want[0].ResetAfter, got.ResetAfter, "%s: ResetAfter", what)
					assert.Equal(t, wantTrips == 0, got.Cached, "%s: Cached says whether the cache answered", what)
					return got
				}
				first := step("within the limit", s, c, 1)
				for first.Allowed {
					first = step("within the limit, then the first denial", s, c, 1)
				}
				cached := s.Stats().Cached
				now += int64(time.Millisecond)
				d := step("cached", s, c, 0)
				assert.Equal(t, first.Count, d.Count, "Count as Redis gave it")
				assert.Equal(t, cached+1, s.Stats().Cached)
				big := c
				big.N = 2
				step("another N goes to Redis", s, big, 1)
				small := c
				small.Limit, small.Burst = 4, 4
				step("another policy goes to Redis", s, small, 1)
				peek := c
				peek.Op = algo.OpPeek
				step("a peek goes to Redis", s, peek, 1)
				now -= int64(2 * time.Millisecond)
				step("a clock stepped back goes to Redis", s, c, 1)
				now += int64(2 * time.Millisecond)

				reset := c
				reset.Op = algo.OpReset
				step("a reset through another store", other, reset, 1)
				// Redis would allow now; this store answers its cached denial.
				got := decide(t, s, now, c)[0]
				assert.False(t, got.Allowed, "another server's reset is seen at the denial's end")
				require.NoError(t, tab.Decide(ctx, now, []algo.Check{reset}, make([]algo.Decision, 1)))

				// A reset through this store forgets the denial: Redis decides.
				require.NoError(t, client.FlushAll(ctx).Err())
				step("a reset through this store", s, reset, 1)
				den := step("within the limit again", s, c, 1)
				for den.Allowed {
					den = step("within the limit again, then denied", s, c, 1)
				}
				now += int64(den.RetryAfter) - 1
				step("cached until RetryAfter", s, c, 0)
				now++
				step("then Redis", s, c, 1)
			})
		}
	}
}

// TestDeniedCacheBound proves that a cached denial lasts at most the bound
// even when its RetryAfter is longer, and that the option refuses a bound
// that is not positive.
func TestDeniedCacheBound(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	rt := &redistest.RoundTrips{}
	client.AddHook(rt)
	s, err := redisstore.New(client, redisstore.WithCallerTime(), redisstore.WithDeniedCache(time.Second), patient)
	require.NoError(t, err)
	c := hit(algo.FixedWindow, "bound", 1, 1, time.Hour)
	decide(t, s, t0, c)
	d := decide(t, s, t0, c)[0]
	require.False(t, d.Allowed)
	require.Greater(t, d.RetryAfter, time.Second)
	before := rt.N()
	decide(t, s, t0+int64(time.Second)-1, c)
	assert.Equal(t, before, rt.N(), "within the bound: cached")
	decide(t, s, t0+int64(time.Second), c)
	assert.Equal(t, before+1, rt.N(), "at the bound: Redis")
	for _, b := range []time.Duration{0, -time.Second, redisstore.MaxSpan + 1} {
		_, err := redisstore.New(client, redisstore.WithDeniedCache(b))
		assert.ErrorIs(t, err, redisstore.ErrInvalid, "%v", b)
	}
}

// TestDeniedCacheConcurrent floods a few keys from many goroutines through
// one store with the cache on (run it with -race): no more than the limit
// is allowed in total, and most denials are the cache's.
func TestDeniedCacheConcurrent(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.New(srv.Client(func(o *redis.Options) { o.PoolSize = 16 }), redisstore.WithCallerTime(),
		redisstore.WithOutage(redisstore.FailError), redisstore.WithDeniedCache(time.Hour), patient)
	require.NoError(t, err)
	const limit, workers, tries = 20, 8, 200
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range tries {
				c := hit(algo.GCRA, []string{"a", "b"}[(w+i)%2], limit, 1, time.Hour)
				out := make([]algo.Decision, 1)
				if !assert.NoError(t, s.Decide(context.Background(), t0, []algo.Check{c}, out)) {
					return
				}
				if out[0].Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 2*limit, allowed)
	assert.Greater(t, s.Stats().Cached, uint64(workers*tries/2))
}

// TestAnswering: a store answers hits itself (and a limiter asks it) only
// when it was made WithDeniedCache.
func TestAnswering(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialed
	t.Cleanup(func() { _ = client.Close() })
	for _, tc := range []struct {
		name string
		opts []redisstore.Option
		want bool
	}{
		{"default", nil, false},
		{"WithDeniedCache", []redisstore.Option{redisstore.WithDeniedCache(time.Second)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redisstore.New(client, tc.opts...)
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.Answering())
			_, ok := s.Answer(0, &algo.Check{ID: "a", Algorithm: algo.GCRA, Limit: 1, Period: time.Second, N: 1})
			assert.False(t, ok, "nothing denied yet")
		})
	}
}
