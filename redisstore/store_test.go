package redisstore_test

import (
	"context"
	"errors"
	"math"
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
)

const t0 = int64(1_790_000_000_000_000_000)

// patient is the round-trip timeout of the stores of tests that are not
// about outages: on a loaded machine (-race, parallel packages) a round
// trip can pass the default 250ms, and such a test must not fail on it.
var patient = redisstore.WithTimeout(10 * time.Second)

func hit(a algo.Algorithm, id string, limit, n int64, period time.Duration) algo.Check {
	return algo.Check{Algorithm: a, ID: id, Period: period, Limit: limit, Burst: limit, N: n}
}

func decide(t *testing.T, s *redisstore.Store, now int64, cs ...algo.Check) []algo.Decision {
	t.Helper()
	out := make([]algo.Decision, len(cs))
	require.NoError(t, s.Decide(context.Background(), now, cs, out))
	return out
}

// TestEdges proves the arithmetic edges: a fixed window's count saturates at
// MaxInt64 and never wraps into allowing, limit 0 denies for ever, MaxInt64
// N is Never for every algorithm, and checks outside the exact domain are
// refused with ErrUnsupported before anything is sent.
func TestEdges(t *testing.T) {
	srv := redistest.Start(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { edges(t, srv, m) })
	}
}

func edges(t *testing.T, srv *redistest.Server, m mode) {
	require.NoError(t, srv.Client().FlushAll(context.Background()).Err())
	s, err := redisstore.New(srv.Client(), withMode(m, redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError), patient)...)
	require.NoError(t, err)
	big := hit(algo.FixedWindow, "sat", 10, math.MaxInt64, time.Second)
	d := decide(t, s, t0, big, big, hit(algo.FixedWindow, "sat", 10, 1, time.Second))
	for _, x := range d {
		assert.False(t, x.Allowed)
		assert.Equal(t, int64(math.MaxInt64), x.Count)
		assert.Equal(t, int64(0), x.Remaining)
	}
	assert.Equal(t, algo.Never, d[0].RetryAfter)
	assert.Equal(t, time.Second, d[2].RetryAfter)
	for _, a := range algo.All() {
		c := hit(a, "zero", 0, 1, time.Second)
		c.Burst = 0
		if a == algo.FixedWindow || a == algo.SlidingWindow || a == algo.SlidingLog {
			c.Burst = 0
		}
		assert.False(t, decide(t, s, t0, c)[0].Allowed, "%v limit 0", a)
		huge := hit(a, "huge", 5, math.MaxInt64, time.Second)
		assert.Equal(t, algo.Never, decide(t, s, t0, huge)[0].RetryAfter, "%v N MaxInt64", a)
	}
	bad := []algo.Check{
		hit(algo.FixedWindow, "x", 1, 1, time.Microsecond),
		hit(algo.SlidingWindow, "x", 1<<53, 1, time.Second),
		hit(algo.GCRA, "x", 1, 1, 60*24*time.Hour),
	}
	for _, c := range bad {
		err := s.Decide(context.Background(), t0, []algo.Check{c}, make([]algo.Decision, 1))
		assert.ErrorIs(t, err, redisstore.ErrUnsupported, "%+v", c)
	}
}

// TestSharedExact proves that three stores (three app servers) sharing one
// Redis, each driven by its own goroutines one batch at a time as the actor
// would, allow exactly the limit in total for every algorithm; the fixed
// window in both modes.
func TestSharedExact(t *testing.T) {
	srv := redistest.Start(t)
	const limit, workers, tries = 50, 6, 40
	for _, a := range algo.All() {
		for _, m := range modes {
			if m.win && a != algo.FixedWindow {
				continue
			}
			t.Run(a.String()+"/"+m.name, func(t *testing.T) {
				require.NoError(t, srv.Client().FlushAll(context.Background()).Err())
				stores := make([]*redisstore.Store, 3)
				locks := make([]sync.Mutex, 3)
				for i := range stores {
					// The caller's time, one instant for all: no window can end mid-test.
					s, err := redisstore.New(srv.Client(), withMode(m, redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError), patient)...)
					require.NoError(t, err)
					stores[i] = s
				}
				var mu sync.Mutex
				allowed := 0
				var wg sync.WaitGroup
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						i := w % 3
						for range tries {
							c := hit(a, "shared", limit, 1, time.Hour)
							out := make([]algo.Decision, 2)
							locks[i].Lock()
							err := stores[i].Decide(context.Background(), t0, []algo.Check{c, c}, out)
							locks[i].Unlock()
							if !assert.NoError(t, err) {
								return
							}
							mu.Lock()
							for _, d := range out {
								if d.Allowed {
									allowed++
								}
							}
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				want := limit
				if a == algo.LeakyBucket {
					want = limit + 1 // Burst waiting and the one served
				}
				assert.Equal(t, want, allowed)
			})
		}
	}
}

// TestRedisTime proves that with Redis's TIME two stores whose callers pass
// wildly different now values decide on one clock: the second store sees the
// first one's hits.
func TestRedisTime(t *testing.T) {
	srv := redistest.Start(t)
	a, err := redisstore.New(srv.Client(), patient)
	require.NoError(t, err)
	b, err := redisstore.New(srv.Client(), patient)
	require.NoError(t, err)
	for _, al := range algo.All() {
		c := hit(al, "time", 3, 1, time.Hour)
		decide(t, a, 0, c, c)
		d := decide(t, b, math.MaxInt64/2, c)[0]
		assert.Equal(t, int64(3), d.Count, "%v", al)
		p := c
		p.Op = algo.OpPeek
		assert.Equal(t, al == algo.LeakyBucket, decide(t, a, -t0, p)[0].Allowed, "%v: one more waits in a leaky bucket", al)
	}
}

// TestOutage proves the outage modes against a Redis killed under load: no
// call outlasts its timeout, each mode decides as documented and is counted,
// and after a restart the store probes and uses Redis again, not before the
// probe interval. The probes are paced by the caller's time or the wall
// clock, whichever passes the interval first: the stores' wall clock is a
// fake one held still, so that a slow restart of redis-server cannot pass
// the interval, and the caller's time alone says when it has. It runs in
// both modes of the fixed window (its script, a key per window).
func TestOutage(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { outage(t, m) })
	}
}

func outage(t *testing.T, m mode) {
	srv := redistest.Start(t)
	outages := []redisstore.Outage{redisstore.Fallback, redisstore.FailOpen, redisstore.FailClosed, redisstore.FailError}
	stores := make([]*redisstore.Store, len(outages))
	var wall atomic.Int64
	wall.Store(t0)
	for i, mode := range outages {
		s, err := redisstore.New(srv.Client(func(o *redis.Options) { o.MaxRetries = -1 }),
			withMode(m, redisstore.WithOutage(mode), redisstore.WithCallerTime(),
				redisstore.WithTimeout(200*time.Millisecond), redisstore.WithProbeInterval(time.Second))...)
		require.NoError(t, err)
		redisstore.SetWall(s, wall.Load)
		stores[i] = s
	}
	c := hit(algo.FixedWindow, "out", 1, 1, time.Hour)
	for i, s := range stores {
		c := c
		c.ID = outages[i].String()
		assert.True(t, decide(t, s, t0, c)[0].Allowed)
	}
	srv.Kill()
	now := t0 + int64(time.Millisecond)
	for i, s := range stores {
		out := make([]algo.Decision, 2)
		start := time.Now()
		c := c
		c.ID = outages[i].String()
		err := s.Decide(context.Background(), now, []algo.Check{c, c}, out)
		assert.Less(t, time.Since(start), 2*time.Second, "mode %d hung", outages[i])
		switch outages[i] {
		case redisstore.Fallback:
			require.NoError(t, err)
			assert.True(t, out[0].Allowed) // the local table starts empty
			assert.False(t, out[1].Allowed)
			assert.Equal(t, uint64(2), s.Stats().Fallbacks)
		case redisstore.FailOpen:
			require.NoError(t, err)
			assert.True(t, out[0].Allowed && out[1].Allowed)
			assert.Equal(t, uint64(2), s.Stats().FailedOpen)
		case redisstore.FailClosed:
			require.NoError(t, err)
			assert.False(t, out[0].Allowed || out[1].Allowed)
			assert.Equal(t, uint64(2), s.Stats().FailedClosed)
		case redisstore.FailError:
			assert.ErrorIs(t, err, redisstore.ErrUnavailable)
		}
		assert.Equal(t, uint64(1), s.Stats().Outages)
	}
	srv.Restart()
	// Before the probe interval the store leaves Redis alone.
	require.NoError(t, stores[0].Decide(context.Background(), now+1, []algo.Check{c}, make([]algo.Decision, 1)))
	assert.Equal(t, uint64(0), stores[0].Stats().Probes)
	later := now + int64(2*time.Second)
	for i, s := range stores {
		c := c
		c.ID = "after-" + outages[i].String()
		d := decide(t, s, later, c)[0]
		assert.True(t, d.Allowed, "mode %v after restart", outages[i])
		assert.Equal(t, int64(1), d.Count)
		assert.Equal(t, uint64(1), s.Stats().Probes)
	}
}

// TestDefaultOutageIsFallback proves that a store made without WithOutage
// does what the docs say: while Redis does not answer, an embedded table of
// its own decides (limit 1: the first hit passes, the second does not), with
// no error, counted in Fallbacks.
func TestDefaultOutageIsFallback(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.New(srv.Client(func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 }),
		redisstore.WithCallerTime(), redisstore.WithTimeout(200*time.Millisecond))
	require.NoError(t, err)
	c := hit(algo.FixedWindow, "default", 1, 1, time.Hour)
	assert.True(t, decide(t, s, t0, c)[0].Allowed)
	srv.Kill()
	out := make([]algo.Decision, 2)
	require.NoError(t, s.Decide(context.Background(), t0+1, []algo.Check{c, c}, out))
	assert.True(t, out[0].Allowed, "the fallback table starts empty")
	assert.False(t, out[1].Allowed, "and limits")
	st := s.Stats()
	assert.Equal(t, uint64(2), st.Fallbacks)
	assert.Equal(t, uint64(1), st.Outages)
	assert.Zero(t, st.FailedOpen+st.FailedClosed)
}

// TestCancelled proves that a context that has ended gives ErrUnavailable at
// once, in every mode, and marks no outage.
func TestCancelled(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.New(srv.Client())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = s.Decide(ctx, t0, []algo.Check{hit(algo.GCRA, "c", 1, 1, time.Second)}, make([]algo.Decision, 1))
	assert.True(t, errors.Is(err, redisstore.ErrUnavailable) && errors.Is(err, context.Canceled), "%v", err)
	assert.Equal(t, uint64(0), s.Stats().Outages)
}

// TestNoScript proves that a Redis whose script cache was flushed gets the
// scripts again and decides the batch in order.
func TestNoScript(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	s, err := redisstore.New(client, redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError), patient)
	require.NoError(t, err)
	c := hit(algo.SlidingWindow, "ns", 2, 1, time.Second)
	decide(t, s, t0, c)
	before := s.Stats().Reloads
	require.NoError(t, client.ScriptFlush(context.Background()).Err())
	d := decide(t, s, t0, c, c)
	assert.True(t, d[0].Allowed)
	assert.False(t, d[1].Allowed)
	assert.Equal(t, before+1, s.Stats().Reloads)
}

// TestNew proves bad arguments are refused with ErrInvalid, WithWindowKeys
// without WithCallerTime too.
func TestNew(t *testing.T) {
	_, err := redisstore.New(nil)
	assert.ErrorIs(t, err, redisstore.ErrInvalid)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, o := range []redisstore.Option{redisstore.WithTimeout(0), redisstore.WithMaxBatch(0),
		redisstore.WithProbeInterval(-1), redisstore.WithFallbackSize(-1), redisstore.WithOutage(9)} {
		_, err := redisstore.New(c, o)
		assert.ErrorIs(t, err, redisstore.ErrInvalid)
	}
	// A key per window needs the caller's time, and says so.
	_, err = redisstore.New(c, redisstore.WithWindowKeys())
	assert.ErrorIs(t, err, redisstore.ErrInvalid)
	assert.ErrorContains(t, err, "WithWindowKeys needs WithCallerTime")
	_, err = redisstore.New(c, redisstore.WithWindowKeys(), redisstore.WithCallerTime())
	assert.NoError(t, err)
}

// TestTimeoutHungRedis proves that WithTimeout bounds a round trip to a
// Redis that accepts connections and never answers, for a lone check (one
// command), for a batch (a pipeline) and for the probe that follows, with
// the client options the package doc gives and with go-redis's defaults
// (which ignore the context's deadline on reads: 5s a read); for a GCRA
// check and for a fixed window kept as a key per window (a pipeline of two
// commands even for a lone hit).
func TestTimeoutHungRedis(t *testing.T) {
	addr := redistest.Hung(t)
	const timeout = 150 * time.Millisecond
	for _, tc := range []struct {
		name string
		opts redis.Options
	}{
		{"advised options", redis.Options{ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1}},
		{"default options", redis.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Addr = addr
			client := redis.NewClient(&o)
			t.Cleanup(func() { _ = client.Close() })
			for _, n := range []int{1, 3} {
				for _, win := range []bool{false, true} {
					opts := []redisstore.Option{redisstore.WithOutage(redisstore.FailError), redisstore.WithTimeout(timeout),
						redisstore.WithProbeInterval(time.Millisecond)}
					a := algo.GCRA
					if win { // a pipeline of INCRBY and PEXPIRE, even for one check
						opts, a = append(opts, redisstore.WithWindowKeys(), redisstore.WithCallerTime()), algo.FixedWindow
					}
					s, err := redisstore.New(client, opts...)
					require.NoError(t, err)
					checks := make([]algo.Check, n)
					for i := range checks {
						checks[i] = hit(a, "hung", 5, 1, time.Second)
					}
					for _, what := range []string{"round trip", "probe"} {
						start := time.Now()
						err = s.Decide(context.Background(), time.Now().UnixNano(), checks, make([]algo.Decision, n))
						took := time.Since(start)
						assert.ErrorIs(t, err, redisstore.ErrUnavailable, "%d checks, %s", n, what)
						assert.GreaterOrEqual(t, took, timeout, "%d checks, %s", n, what)
						assert.Less(t, took, time.Second, "%d checks, %s: the timeout did not hold", n, what)
					}
					assert.Equal(t, uint64(1), s.Stats().Probes)
				}
			}
		})
	}
}

// TestRoundKeys: the keys a batch's checks get, with the Period's text
// kept from one check to the next, are the keys each gets alone, whatever
// the order of Periods and the escapes in the ids.
func TestRoundKeys(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialed
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.WithPrefix("p:"))
	require.NoError(t, err)
	chk := func(id string, a algo.Algorithm, period time.Duration) algo.Check {
		return algo.Check{ID: id, Algorithm: a, Limit: 1, Period: period, N: 1}
	}
	checks := []algo.Check{
		chk("a", algo.GCRA, time.Second),
		chk("a", algo.GCRA, time.Second),
		chk("b%}", algo.FixedWindow, time.Minute),
		chk("c", algo.SlidingLog, time.Second),
		chk("}", algo.TokenBucket, 7*time.Millisecond),
		chk("", algo.LeakyBucket, time.Minute),
	}
	got := redisstore.RoundKeys(s, checks)
	for i := range checks {
		assert.Equal(t, redisstore.Key(s, &checks[i]), got[i], "check %d", i)
	}
	assert.Equal(t, "p:v4:{b%25%7D}:FixedWindow:60000000000", got[2])
	assert.Equal(t, "p:v4:{a}:GCRA:1000000000", got[1])
}
