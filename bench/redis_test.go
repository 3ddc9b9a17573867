package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// BenchmarkRedis measures one GCRA hit (1e9 per second, so always allowed)
// on one of 1000 keys against one local redis-server that the benchmark
// starts, at 1, 16 and 256 concurrent callers, through:
//
//   - actorlimit: Limiter.Hit on actorlimit.WithStore(redisstore.New(...)),
//     the check calls queued in the limiter's mailbox going to Redis as one
//     pipeline;
//   - actorlimit-maxbatch1: the same with WithMaxBatch(1), one Decide (one
//     round trip) per call, to show what the gathering brings;
//   - redisstore-direct: the same store's Decide called by the caller, under
//     a mutex (a store is not safe for concurrent use), one check each: no
//     actor, to show what the actor costs;
//   - redis_rate: go-redis/redis_rate, one EVALSHA per hit;
//   - ulule: ulule/limiter's Redis store.
//
// It reports hits per second and the p50 and p99 latency of one hit.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key%d", i)
	}
	impls := map[string]func(client *redis.Client) (hit func(key string) error, stop func()){
		"actorlimit":           actorlimitOnRedis(b),
		"actorlimit-maxbatch1": actorlimitOnRedis(b, actorlimit.WithMaxBatch(1)),
		"redisstore-direct": func(client *redis.Client) (func(string) error, func()) {
			s, err := redisstore.New(client, redisstore.WithOutage(redisstore.FailError))
			if err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			out := make([]algo.Decision, 1)
			return func(key string) error {
				mu.Lock()
				defer mu.Unlock()
				c := []algo.Check{{Algorithm: algo.GCRA, ID: key, Period: time.Second, Limit: 1e9, N: 1, Burst: 1e9}}
				if err := s.Decide(context.Background(), time.Now().UnixNano(), c, out); err != nil {
					return err
				}
				if !out[0].Allowed {
					return fmt.Errorf("%s denied", key)
				}
				return nil
			}, func() {}
		},
		"redis_rate": func(client *redis.Client) (func(string) error, func()) {
			l := redis_rate.NewLimiter(client)
			lim := redis_rate.PerSecond(1e9)
			return func(key string) error {
				_, err := l.Allow(context.Background(), key, lim)
				return err
			}, func() {}
		},
		"ulule": func(client *redis.Client) (func(string) error, func()) {
			st, err := ulredis.NewStore(client)
			if err != nil {
				b.Fatal(err)
			}
			l := limiter.New(st, limiter.Rate{Period: time.Second, Limit: 1e9})
			return func(key string) error {
				_, err := l.Get(context.Background(), key)
				return err
			}, func() {}
		},
	}
	for _, name := range []string{"actorlimit", "actorlimit-maxbatch1", "redisstore-direct", "redis_rate", "ulule"} {
		for _, callers := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("impl=%s/callers=%d", name, callers), func(b *testing.B) {
				// ContextTimeoutEnabled, as redisstore's doc advises, keeps
				// the store's round trips on the caller's goroutine; the
				// peers' calls carry no deadline, so it changes nothing for
				// them.
				client := srv.Client(func(o *redis.Options) { o.PoolSize, o.ContextTimeoutEnabled = 2*callers, true })
				hit, stop := impls[name](client)
				defer stop()
				b.ReportAllocs()
				lat := make([][]time.Duration, callers)
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for c := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := c; i < b.N; i += callers {
							t := time.Now()
							if err := hit(keys[i%len(keys)]); err != nil {
								b.Error(err)
								return
							}
							lat[c] = append(lat[c], time.Since(t))
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				all := slices.Concat(lat...)
				if len(all) == 0 {
					return
				}
				slices.Sort(all)
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "hits/s")
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}

// actorlimitOnRedis returns the constructor of impl=actorlimit: a Limiter on
// a redisstore of the benchmark's client, with opts.
func actorlimitOnRedis(b *testing.B, opts ...actorlimit.Option) func(client *redis.Client) (func(string) error, func()) {
	return func(client *redis.Client) (func(string) error, func()) {
		s, err := redisstore.New(client, redisstore.WithOutage(redisstore.FailError))
		if err != nil {
			b.Fatal(err)
		}
		lim, err := actorlimit.Start(append([]actorlimit.Option{actorlimit.WithStore(s)}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1e9, Period: time.Second, Burst: 1e9}
		return func(key string) error {
			res, err := lim.Hit(context.Background(), key, p)
			if err == nil && !res.Allowed {
				return fmt.Errorf("%s denied", key)
			}
			return err
		}, func() { _ = lim.Close() }
	}
}
