package redisstore_test

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
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

// windowStore returns a store on client with a key per window.
func windowStore(t *testing.T, client redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(client, append([]redisstore.Option{redisstore.WithWindowKeys(), redisstore.WithCallerTime(),
		redisstore.WithOutage(redisstore.FailError), patient}, opts...)...)
	require.NoError(t, err)
	return s
}

// TestWindowKeysSaturate: a window's count saturates at MaxInt64 as the
// table's does, whatever the limit (MaxInt64 itself too): INCRBY's
// overflow is a saturated count and a denial, never an error; the hits
// after it in the same batch, and in the batches after it, see MaxInt64;
// a Reset in the batch after the overflow starts the window again at 0.
// Each step is a batch, compared with the table's decisions.
func TestWindowKeysSaturate(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	ctx := context.Background()
	fw := func(limit, n int64, op algo.Op) algo.Check {
		return algo.Check{Algorithm: algo.FixedWindow, ID: "sat", Period: time.Minute, Limit: limit, N: n, Op: op}
	}
	const top = math.MaxInt64
	for _, limit := range []int64{10, top - 1, top} {
		t.Run(strconv.FormatInt(limit, 10), func(t *testing.T) {
			require.NoError(t, client.FlushAll(ctx).Err())
			s := windowStore(t, client)
			tab := table.New(0)
			steps := [][]algo.Check{
				{fw(limit, top-2, algo.OpHit)},
				{fw(limit, 5, algo.OpHit)}, // overflows alone
				{fw(limit, 1, algo.OpHit), fw(limit, 1, algo.OpPeek)},
				{fw(limit, 1, algo.OpReset), fw(limit, 3, algo.OpHit)},
				{fw(limit, top, algo.OpHit), fw(limit, 1, algo.OpHit), fw(limit, 1, algo.OpPeek), fw(limit, 1, algo.OpHit)},
				{fw(limit, 1, algo.OpHit), fw(limit, 1, algo.OpReset), fw(limit, 2, algo.OpHit)},
				{fw(limit, top, algo.OpHit), fw(limit, 1, algo.OpReset), fw(limit, 2, algo.OpHit)}, // no SET after the Reset
				{fw(limit, 1, algo.OpPeek)},
			}
			now := t0
			for i, checks := range steps {
				now += int64(time.Millisecond)
				want := make([]algo.Decision, len(checks))
				got := make([]algo.Decision, len(checks))
				require.NoError(t, tab.Decide(ctx, now, checks, want))
				require.NoError(t, s.Decide(ctx, now, checks, got), "step %d", i)
				assert.Equal(t, want, got, "step %d: %+v", i, checks)
			}
			assert.Zero(t, s.Stats().CheckErrors)
			c := fw(limit, 1, algo.OpHit)
			assert.Equal(t, "2", client.Get(ctx, redisstore.KeyAt(s, &c, now)).Val(), "the count after the last Reset")
		})
	}
}

// TestWindowKeysTTLSetOnce: a window's key is named <the script's key>:<the
// window's number>, holds the count as a string, and gets its TTL at its
// first hit: the window's end and a minute's grace. A hit in a window
// already started does not move it (PEXPIRE NX): here the test's own TTL
// stays. A peek writes nothing; the next window is a key of its own.
func TestWindowKeysTTLSetOnce(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	ctx := context.Background()
	s := windowStore(t, client, redisstore.WithPrefix("p:"))
	c := algo.Check{Algorithm: algo.FixedWindow, ID: "ttl}%", Period: 10 * time.Second, Limit: 5, N: 1}
	now := t0 + int64(3500*time.Millisecond) // 6.5 s before the window's end
	key := redisstore.KeyAt(s, &c, now)
	assert.Equal(t, "p:v4:{ttl%7D%25}:FixedWindow:10000000000:179000000", key)
	assert.Equal(t, redisstore.Key(s, &c)+":179000000", key)

	peek := c
	peek.Op = algo.OpPeek
	decide(t, s, now, peek)
	assert.Zero(t, client.Exists(ctx, key).Val(), "a peek writes nothing")

	d := decide(t, s, now, c)[0]
	assert.Equal(t, 6500*time.Millisecond, d.ResetAfter)
	ttl := client.PTTL(ctx, key).Val()
	assert.LessOrEqual(t, ttl, 6500*time.Millisecond+time.Minute)
	assert.Greater(t, ttl, 6500*time.Millisecond+time.Minute-2*time.Second, "Redis's clock runs while the test does")
	assert.Equal(t, "1", client.Get(ctx, key).Val())

	require.NoError(t, client.PExpire(ctx, key, time.Hour).Err())
	d = decide(t, s, now+int64(time.Second), c, c)[1]
	assert.Equal(t, int64(3), d.Count)
	assert.InDelta(t, float64(time.Hour), float64(client.PTTL(ctx, key).Val()), float64(2*time.Second), "NX: the TTL stays")

	next := now + int64(6500*time.Millisecond) // the next window, on the injected clock
	d = decide(t, s, next, c)[0]
	assert.Equal(t, int64(1), d.Count)
	assert.Equal(t, 10*time.Second, d.ResetAfter)
	nextKey := redisstore.KeyAt(s, &c, next)
	assert.Equal(t, redisstore.Key(s, &c)+":179000001", nextKey)
	assert.InDelta(t, float64(10*time.Second+time.Minute), float64(client.PTTL(ctx, nextKey).Val()), float64(2*time.Second))
	assert.Equal(t, "3", client.Get(ctx, key).Val(), "the last window's key is left to its TTL")
}

// TestWindowKeysLoneRoundTrip: a lone hit is one round trip, INCRBY and
// PEXPIRE written together (one pipeline), on the store's own connection
// (RESP2, deadlines honoured) as on the pool; a lone peek is one GET.
func TestWindowKeysLoneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	for _, own := range []bool{true, false} {
		t.Run("own="+strconv.FormatBool(own), func(t *testing.T) {
			client := srv.Client(func(o *redis.Options) {
				if own {
					o.Protocol, o.ContextTimeoutEnabled = 2, true
				}
			})
			rt := &redistest.RoundTrips{}
			client.AddHook(rt) // before New: the own connection takes the client's hooks
			require.NoError(t, client.Ping(context.Background()).Err())
			s := windowStore(t, client, redisstore.WithPrefix("rt"+strconv.FormatBool(own)+":"))
			c := algo.Check{Algorithm: algo.FixedWindow, ID: "lone", Period: time.Second, Limit: 5, N: 1}
			for i := range 3 {
				before := rt.N()
				d := decide(t, s, t0, c)[0]
				assert.Equal(t, int64(i+1), d.Count)
				assert.Equal(t, before+1, rt.N(), "hit %d", i)
			}
			peek := c
			peek.Op = algo.OpPeek
			before := rt.N()
			assert.Equal(t, int64(3), decide(t, s, t0, peek)[0].Count)
			assert.Equal(t, before+1, rt.N())
		})
	}
}

// TestWindowKeysConcurrent: 48 callers on three stores (one on the store's
// own connection), none waiting for another, hit one key: exactly the
// limit is allowed, and the key's count is every hit, denied ones too.
// Some callers give up (a context ended) before their hit: each gets
// either an error wrapping ErrUnavailable, and is not counted (the pool
// gives it no connection), or a decision, counted (the store's own
// connection, which takes no connection from the pool, sends it).
func TestWindowKeysConcurrent(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	stores := []*redisstore.Store{
		windowStore(t, srv.Client(func(o *redis.Options) { o.Protocol, o.ContextTimeoutEnabled = 2, true })),
		windowStore(t, srv.Client()),
		windowStore(t, srv.Client()),
	}
	const limit, callers, tries = 100, 48, 20
	c := algo.Check{Algorithm: algo.FixedWindow, ID: "many", Period: time.Hour, Limit: limit, N: 1}
	var allowed, sent, gaveUp atomic.Int64
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			for i := range tries {
				cctx := ctx
				if (w+i)%7 == 0 {
					cancelled, cancel := context.WithCancel(ctx)
					cancel()
					cctx = cancelled
				}
				out := make([]algo.Decision, 1)
				err := stores[w%3].Decide(cctx, t0, []algo.Check{c}, out)
				if cctx != ctx && err != nil {
					if assert.ErrorIs(t, err, redisstore.ErrUnavailable) {
						gaveUp.Add(1)
					}
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				sent.Add(1)
				if out[0].Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(limit), allowed.Load())
	assert.Positive(t, gaveUp.Load())
	key := redisstore.KeyAt(stores[0], &c, t0)
	assert.Equal(t, strconv.FormatInt(sent.Load(), 10), srv.Client().Get(ctx, key).Val(), "every hit counted, denied ones too")
	for _, s := range stores {
		assert.Zero(t, s.Stats().Outages)
	}
}

// TestWindowKeysStepBack shows the one way a key per window decides
// otherwise than the script and the table: a clock that steps back into
// the window before counts there (as envoy ratelimit's keys do), where the
// script counts into the newer window it has seen.
func TestWindowKeysStepBack(t *testing.T) {
	srv := redistest.Start(t)
	s := windowStore(t, srv.Client())
	c := algo.Check{Algorithm: algo.FixedWindow, ID: "back", Period: time.Second, Limit: 5, N: 1}
	late := t0 + int64(time.Second) // the start of window w+1
	assert.Equal(t, int64(1), decide(t, s, late, c)[0].Count)
	assert.Equal(t, int64(2), decide(t, s, late, c)[0].Count)
	d := decide(t, s, late-1, c)[0] // 1 ns back: window w
	assert.Equal(t, int64(1), d.Count, "counted in window w's own key")
	assert.Equal(t, time.Duration(1), d.ResetAfter)
	assert.Equal(t, int64(3), decide(t, s, late, c)[0].Count, "window w+1 kept its count")
}
