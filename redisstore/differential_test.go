package redisstore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
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

// randomCheck returns a valid check the Redis store supports, on one of a
// few ids and periods so that keys are hit again and again.
func randomCheck(rng *rand.Rand) algo.Check {
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, 59 * time.Millisecond,
		time.Second, 1500 * time.Millisecond, time.Minute}
	for {
		c := algo.Check{
			Algorithm: algo.Algorithm(rng.IntN(len(algo.All()))),
			ID:        fmt.Sprintf("id%d", rng.IntN(3)),
			Period:    periods[rng.IntN(len(periods))],
			Limit:     int64(rng.IntN(12)),
			N:         1 + int64(rng.IntN(4)),
		}
		switch rng.IntN(20) {
		case 0:
			c.N = math.MaxInt64
		case 1:
			// A key of its own: moving a backlog from this limit to a small one
			// saturates, at MaxSpan here and at algo.MaxSpan in the table.
			c.Limit, c.ID = 1<<40, "big"
		case 2:
			c.N = c.Limit + 1
		}
		burst := int64(0)
		if rng.IntN(3) == 0 {
			burst = int64(rng.IntN(15))
		}
		c.Burst = algo.Burst(c.Limit, burst)
		switch rng.IntN(10) {
		case 0:
			c.Op = algo.OpPeek
		case 1:
			c.Op = algo.OpReset
		}
		if algo.Validate(c.Algorithm, c.Limit, c.Period, burst) != nil {
			continue
		}
		if c.Algorithm != algo.FixedWindow && c.Algorithm != algo.SlidingLog && c.Algorithm != algo.SlidingWindow && c.Limit == 0 {
			c.Burst = 0
		}
		return c
	}
}

// TestDifferential proves that the Redis store, with the caller's time,
// decides every check exactly as the embedded table does, over random
// sequences of algorithms, policies (limits changing on one key too), ids,
// N (MaxInt64 included), peeks, resets, clock advances and steps back, in
// random batch sizes that also cross the pipeline bound. Every key it
// leaves has a TTL. The even seeds run on a RESP2 client that ends round
// trips at their deadlines: the store's own connection, and the replies
// as RESP2 gives them. Each seed runs in both modes of the fixed window
// (its script, a key per window); with a key per window the clock never
// steps back (a step back into an earlier window counts there, see
// WithWindowKeys and TestWindowKeysStepBack).
func TestDifferential(t *testing.T) {
	srv := redistest.Start(t)
	for seed := uint64(1); seed <= 20; seed++ {
		for _, m := range modes {
			t.Run(fmt.Sprintf("seed=%d/mode=%s", seed, m.name), func(t *testing.T) {
				client := srv.Client()
				if seed%2 == 0 {
					client = srv.Client(func(o *redis.Options) { o.Protocol, o.ContextTimeoutEnabled = 2, true })
				}
				require.NoError(t, client.FlushAll(context.Background()).Err())
				st, err := redisstore.New(client, withMode(m, redisstore.WithCallerTime(), redisstore.WithMaxBatch(5), patient,
					redisstore.WithOutage(redisstore.FailError))...)
				require.NoError(t, err)
				tab := table.New(0)
				rng := rand.New(rand.NewPCG(seed, 42))
				now := int64(1_790_000_000_123_456_789) + rng.Int64N(int64(time.Hour))
				for step := 0; step < 300; step++ {
					switch rng.IntN(6) {
					case 0:
						now += rng.Int64N(int64(2 * time.Second))
					case 1:
						now += rng.Int64N(int64(time.Millisecond))
					case 2:
						if !m.win {
							now -= rng.Int64N(int64(time.Millisecond)) // a clock that steps back
						}
					case 3:
						now += rng.Int64N(int64(2 * time.Minute))
					}
					checks := make([]algo.Check, 1+rng.IntN(12))
					for i := range checks {
						checks[i] = randomCheck(rng)
					}
					want := make([]algo.Decision, len(checks))
					got := make([]algo.Decision, len(checks))
					require.NoError(t, tab.Decide(context.Background(), now, checks, want))
					require.NoError(t, st.Decide(context.Background(), now, checks, got))
					for i := range checks {
						if testing.Verbose() && checks[i].ID == "id1" && checks[i].Algorithm == algo.SlidingWindow && checks[i].Period == time.Minute {
							t.Logf("step %d at %d: %+v -> %+v / %+v", step, now, checks[i], want[i], got[i])
						}
						if !assert.Equal(t, want[i], got[i], "step %d check %d %+v at %d", step, i, checks[i], now) {
							t.FailNow()
						}
					}
				}
				for k, d := range ttls(t, client) {
					assert.Positive(t, d, "%s has no TTL (-1)", k)
				}
			})
		}
	}
}

// TestDifferentialRuns is TestDifferential for long runs of bucket checks
// (GCRA, token bucket, leaky bucket) and fixed windows, which a store on
// one server sends as one script call a run: batches of up to 200 checks
// on a few keys, so that a run holds a key many times, with peeks, resets
// and changes of algorithm (which end a run) among them. It also proves
// that a run is one script call, and, with a key per window, that a
// batch of fixed window hits is no script call but an INCRBY and a
// PEXPIRE each.
func TestDifferentialRuns(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { differentialRuns(t, m) })
	}
}

func differentialRuns(t *testing.T, m mode) {
	srv := redistest.Start(t)
	client := srv.Client()
	st, err := redisstore.New(client, withMode(m, redisstore.WithCallerTime(), patient, redisstore.WithOutage(redisstore.FailError))...)
	require.NoError(t, err)
	tab := table.New(0)
	rng := rand.New(rand.NewPCG(7, 7))
	now := int64(1_790_000_000_123_456_789)
	for step := 0; step < 100; step++ {
		now += rng.Int64N(int64(300 * time.Millisecond))
		checks := make([]algo.Check, 1+rng.IntN(200))
		for i := range checks {
			for {
				checks[i] = randomCheck(rng)
				if a := checks[i].Algorithm; a == algo.GCRA || a == algo.TokenBucket || a == algo.LeakyBucket || a == algo.FixedWindow {
					break
				}
			}
		}
		want := make([]algo.Decision, len(checks))
		got := make([]algo.Decision, len(checks))
		require.NoError(t, tab.Decide(context.Background(), now, checks, want))
		require.NoError(t, st.Decide(context.Background(), now, checks, got))
		for i := range checks {
			require.Equal(t, want[i], got[i], "step %d check %d %+v at %d", step, i, checks[i], now)
		}
	}

	// One run of 100 hits on 10 keys is one EVALSHA, for buckets and for
	// fixed windows.
	for _, a := range []algo.Algorithm{algo.GCRA, algo.FixedWindow} {
		require.NoError(t, client.ConfigResetStat(context.Background()).Err())
		checks := make([]algo.Check, 100)
		for i := range checks {
			checks[i] = hit(a, fmt.Sprintf("run%d", i%10), 1000, 1, time.Second)
		}
		require.NoError(t, st.Decide(context.Background(), now, checks, make([]algo.Decision, len(checks))))
		info, err := client.Info(context.Background(), "commandstats").Result()
		require.NoError(t, err)
		if m.win && a == algo.FixedWindow {
			assert.NotContains(t, info, "cmdstat_evalsha:", "%v", a)
			assert.Contains(t, info, "cmdstat_incrby:calls=100,", "%v", a)
			assert.Contains(t, info, "cmdstat_pexpire:calls=100,", "%v", a)
			continue
		}
		assert.Contains(t, info, "cmdstat_evalsha:calls=1,", "%v", a)
	}
}

// TestDifferentialHugeLimits runs the buckets at Limits above 10^14, whose
// fractions of 1/Limit ns (the q of the state) reach 10^14 and more, and
// changes the Limit between two of them on one key: the store must still
// decide exactly as the table does.
func TestDifferentialHugeLimits(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	require.NoError(t, client.FlushAll(context.Background()).Err())
	st, err := redisstore.New(client, redisstore.WithCallerTime(), patient, redisstore.WithOutage(redisstore.FailError))
	require.NoError(t, err)
	tab := table.New(0)
	limits := []int64{300_000_000_000_007, 4_000_000_000_000_003}
	ns := []int64{9000, 1, 123_457, 7_777_777, 1_000_000_001}
	rng := rand.New(rand.NewPCG(7, 7))
	now := int64(1_790_000_000_123_456_789)
	for step := 0; step < 400; step++ {
		now += rng.Int64N(int64(20 * time.Microsecond)) // less than a hit of 10^9 adds: the backlog stays
		a := []algo.Algorithm{algo.GCRA, algo.TokenBucket, algo.LeakyBucket}[rng.IntN(3)]
		limit := limits[rng.IntN(len(limits))]
		c := algo.Check{Algorithm: a, ID: "huge", Period: time.Minute, Limit: limit,
			N: ns[rng.IntN(len(ns))], Burst: algo.Burst(limit, 0)}
		if rng.IntN(8) == 0 {
			c.Op = algo.OpPeek
		}
		require.NoError(t, algo.Validate(c.Algorithm, c.Limit, c.Period, 0))
		want := make([]algo.Decision, 1)
		got := make([]algo.Decision, 1)
		require.NoError(t, tab.Decide(context.Background(), now, []algo.Check{c}, want))
		require.NoError(t, st.Decide(context.Background(), now, []algo.Check{c}, got))
		require.Equal(t, want[0], got[0], "step %d %+v at %d", step, c, now)
	}
}

// TestBucketStateExact reads back the state a hit leaves (five doubles,
// little-endian on this machine, as struct.pack writes them): its fraction
// of 1/Limit ns, here above 10^14, must be written with every digit.
func TestBucketStateExact(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	st, err := redisstore.New(client, redisstore.WithCallerTime(), patient, redisstore.WithOutage(redisstore.FailError))
	require.NoError(t, err)
	c := algo.Check{Algorithm: algo.GCRA, ID: "exact", Period: time.Minute, Limit: 300_000_000_000_007, N: 379_974}
	c.Burst = algo.Burst(c.Limit, 0)
	now := int64(1_790_000_000_123_456_789)
	decide(t, st, now, c)
	// N*Period = need*Limit + frac
	prod := new(big.Int).Mul(big.NewInt(c.N), big.NewInt(int64(c.Period)))
	need, frac := new(big.Int).QuoRem(prod, big.NewInt(c.Limit), new(big.Int))
	require.Greater(t, frac.Int64(), int64(1e14), "the case must need more than 14 digits")
	end := now + need.Int64()
	want := fmt.Sprintf("%d %d %d %d", end/1e6, end%1e6, frac.Int64(), c.Limit)
	raw, err := client.Get(context.Background(), redisstore.Key(st, &c)).Bytes()
	require.NoError(t, err)
	require.Len(t, raw, 40)
	var f [5]int64
	for i := range f {
		d := math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
		require.Equal(t, math.Trunc(d), d, "field %d is an integer", i)
		f[i] = int64(d)
	}
	require.Equal(t, want, fmt.Sprintf("%d %d %d %d", f[0], f[1], f[2], f[3]))
	// The fifth is the key's expiry in Unix ms: the empty time, 1 ms and
	// two graces (a minute each with the caller's time) after now.
	require.Equal(t, now/1e6+(need.Int64()+1e6-1)/1e6+1+2*60_000, f[4], "expiry")
}

// TestLoweredLimitDifferential: a key that held a million hits, read under
// 1 per hour with burst 2, holds at most the new capacity, on Redis exactly
// as in the table: the client waits an hour, not years.
func TestLoweredLimitDifferential(t *testing.T) {
	srv := redistest.Start(t)
	for _, a := range []algo.Algorithm{algo.GCRA, algo.TokenBucket, algo.LeakyBucket} {
		t.Run(a.String(), func(t *testing.T) {
			client := srv.Client()
			require.NoError(t, client.FlushAll(context.Background()).Err())
			st, err := redisstore.New(client, redisstore.WithCallerTime(), patient, redisstore.WithOutage(redisstore.FailError))
			require.NoError(t, err)
			tab := table.New(0)
			now := int64(1_790_000_000_123_456_789)
			steps := []algo.Check{
				{Algorithm: a, ID: "k", Period: time.Hour, Limit: 1_000_000, Burst: 1_000_000, N: 1_000_000},
				{Algorithm: a, ID: "k", Period: time.Hour, Limit: 1, Burst: 2, N: 1, Op: algo.OpPeek},
				{Algorithm: a, ID: "k", Period: time.Hour, Limit: 1, Burst: 2, N: 1},
				{Algorithm: a, ID: "k", Period: time.Hour, Limit: 1, Burst: 2, N: 1, Op: algo.OpPeek},
			}
			for i, c := range steps {
				want := make([]algo.Decision, 1)
				got := make([]algo.Decision, 1)
				require.NoError(t, tab.Decide(context.Background(), now, []algo.Check{c}, want))
				require.NoError(t, st.Decide(context.Background(), now, []algo.Check{c}, got))
				require.Equal(t, want[0], got[0], "step %d %+v", i, c)
				if i > 0 {
					assert.LessOrEqual(t, got[0].RetryAfter, time.Hour, "step %d: %+v", i, got[0])
					assert.LessOrEqual(t, got[0].Count, algo.BucketCapacity(a, 2), "step %d: %+v", i, got[0])
				}
			}
		})
	}
}
