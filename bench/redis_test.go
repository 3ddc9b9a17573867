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

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// mailbox stands in for the limiter actor until it can drive a Store: one
// goroutine drains a channel of requests into batches (all that waited, up
// to 1000), calls Store.Decide once per batch and answers each caller. It
// will be replaced by the real limiter (actorlimit.WithStore) when that
// exists.
type mailbox struct {
	reqs chan mreq
	done chan struct{}
}

type mreq struct {
	check algo.Check
	reply chan algo.Decision
}

func newMailbox(s *redisstore.Store) *mailbox {
	m := &mailbox{reqs: make(chan mreq, 1024), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		var batch []mreq
		var checks []algo.Check
		var out []algo.Decision
		for r := range m.reqs {
			batch = append(batch[:0], r)
		drain:
			for len(batch) < 1000 {
				select {
				case r, ok := <-m.reqs:
					if !ok {
						break drain
					}
					batch = append(batch, r)
				default:
					break drain
				}
			}
			checks, out = checks[:0], out[:0]
			for _, r := range batch {
				checks = append(checks, r.check)
				out = append(out, algo.Decision{})
			}
			_ = s.Decide(context.Background(), time.Now().UnixNano(), checks, out)
			for i, r := range batch {
				r.reply <- out[i]
			}
		}
	}()
	return m
}

func (m *mailbox) hit(c algo.Check, reply chan algo.Decision) algo.Decision {
	m.reqs <- mreq{c, reply}
	return <-reply
}

func (m *mailbox) stop() { close(m.reqs); <-m.done }

// BenchmarkRedis measures one GCRA-like hit (1e9 per second, so always
// allowed) on one of 1000 keys against one local redis-server that the
// benchmark starts, through redisstore (behind the mailbox stand-in), through
// go-redis/redis_rate and through ulule/limiter's Redis store, at 1, 16 and
// 256 concurrent callers; it reports hits per second and the p50 and p99
// latency of one hit.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key%d", i)
	}
	impls := map[string]func(client *redis.Client) (hit func(key string, reply chan algo.Decision) error, stop func()){
		"redisstore": func(client *redis.Client) (func(string, chan algo.Decision) error, func()) {
			s, err := redisstore.New(client, redisstore.WithOutage(redisstore.FailError))
			if err != nil {
				b.Fatal(err)
			}
			m := newMailbox(s)
			return func(key string, reply chan algo.Decision) error {
				m.hit(algo.Check{Algorithm: algo.GCRA, ID: key, Period: time.Second, Limit: 1e9, Burst: 1e9, N: 1}, reply)
				return nil
			}, m.stop
		},
		"redis_rate": func(client *redis.Client) (func(string, chan algo.Decision) error, func()) {
			l := redis_rate.NewLimiter(client)
			lim := redis_rate.PerSecond(1e9)
			return func(key string, _ chan algo.Decision) error {
				_, err := l.Allow(context.Background(), key, lim)
				return err
			}, func() {}
		},
		"ulule": func(client *redis.Client) (func(string, chan algo.Decision) error, func()) {
			st, err := ulredis.NewStore(client)
			if err != nil {
				b.Fatal(err)
			}
			l := limiter.New(st, limiter.Rate{Period: time.Second, Limit: 1e9})
			return func(key string, _ chan algo.Decision) error {
				_, err := l.Get(context.Background(), key)
				return err
			}, func() {}
		},
	}
	for _, name := range []string{"redisstore", "redis_rate", "ulule"} {
		for _, callers := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("impl=%s/callers=%d", name, callers), func(b *testing.B) {
				client := srv.Client(func(o *redis.Options) { o.PoolSize = 2 * callers })
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
						reply := make(chan algo.Decision, 1)
						for i := c; i < b.N; i += callers {
							t := time.Now()
							if err := hit(keys[i%len(keys)], reply); err != nil {
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
