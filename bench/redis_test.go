package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	"github.com/actorlimit/actorlimit/redisstore/busypoll"
)

// redisShards is the number of limiter actors that impl=actorlimit runs on
// one shared redisstore.Store: the round trips it keeps in flight.
const redisShards = 4

// adapter counts one hit for key and reports whether it was allowed.
type adapter func(key string) (allowed bool, err error)

// redisImpls are the implementations BenchmarkRedis and BenchmarkRedisFlood
// compare, each made on the benchmark's client.
var redisImpls = map[string]func(b *testing.B, client *redis.Client, p actorlimit.Policy) (adapter, func()){
	// actorlimit: Limiter.Hit on WithStore(redisstore.New(...)) and
	// WithShards(redisShards): the calls queued in each actor's mailbox go
	// to Redis as one pipeline, and each actor has its own in flight.
	"actorlimit": func(b *testing.B, client *redis.Client, p actorlimit.Policy) (adapter, func()) {
		return onRedis(b, client, p, nil, actorlimit.WithShards(redisShards))
	},
	// actorlimit-1shard: the same with one actor, one pipeline in flight.
	"actorlimit-1shard": func(b *testing.B, client *redis.Client, p actorlimit.Policy) (adapter, func()) {
		return onRedis(b, client, p, nil)
	},
	// actorlimit-cache: impl=actorlimit with the over-limit cache
	// (redisstore.WithDeniedCache(time.Second)).
	"actorlimit-cache": func(b *testing.B, client *redis.Client, p actorlimit.Policy) (adapter, func()) {
		return onRedis(b, client, p, []redisstore.Option{redisstore.WithDeniedCache(time.Second)}, actorlimit.WithShards(redisShards))
	},
	// redis_rate: go-redis/redis_rate, one EVALSHA per hit (GCRA).
	"redis_rate": func(b *testing.B, client *redis.Client, p actorlimit.Policy) (adapter, func()) {
		return onRedisRate(client, p), func() {}
	},
	// actorlimit-busypoll: impl=actorlimit on a client whose connections
	// poll for replies (redisstore/busypoll, spin busySpin), as the store's
	// doc advises for a Redis on the same machine or rack.
	"actorlimit-busypoll": func(b *testing.B, client *redis.Client, p actorlimit.Policy) (adapter, func()) {
		polled := pollingClient(b, client)
		hit, stop := onRedis(b, polled, p, nil, actorlimit.WithShards(redisShards))
		return hit, func() { stop(); _ = polled.Close() }
	},
	// actorlimit-1shard-busypoll: impl=actorlimit-1shard on such a client:
	// one round trip in flight, so its read is alone and polls.
	"actorlimit-1shard-busypoll": func(b *testing.B, client *redis.Client, p actorlimit.Policy) (adapter, func()) {
		polled := pollingClient(b, client)
		hit, stop := onRedis(b, polled, p, nil)
		return hit, func() { stop(); _ = polled.Close() }
	},
	// redis_rate-busypoll: impl=redis_rate on such a client, to tell what
	// the polling gives from what the store does.
	"redis_rate-busypoll": func(b *testing.B, client *redis.Client, p actorlimit.Policy) (adapter, func()) {
		polled := pollingClient(b, client)
		return onRedisRate(polled, p), func() { _ = polled.Close() }
	},
	// ulule: ulule/limiter's Redis store (a fixed window).
	"ulule": func(b *testing.B, client *redis.Client, p actorlimit.Policy) (adapter, func()) {
		st, err := ulredis.NewStore(client)
		if err != nil {
			b.Fatal(err)
		}
		l := limiter.New(st, limiter.Rate{Period: p.Period, Limit: p.Limit})
		return func(key string) (bool, error) {
			res, err := l.Get(context.Background(), key)
			return !res.Reached, err
		}, func() {}
	},
}

// onRedisRate returns impl=redis_rate's adapter on client: one EVALSHA a
// hit (GCRA) under p.
func onRedisRate(client *redis.Client, p actorlimit.Policy) adapter {
	l := redis_rate.NewLimiter(client)
	lim := redis_rate.Limit{Rate: int(p.Limit), Burst: int(p.Limit), Period: p.Period}
	return func(key string) (bool, error) {
		res, err := l.Allow(context.Background(), key, lim)
		if err != nil {
			return false, err
		}
		return res.Allowed > 0, nil
	}
}

// busySpin is how long impl=*-busypoll's reads poll for a reply at most.
const busySpin = 100 * time.Microsecond

// pollingClient returns a client with client's options whose connections
// poll for replies for up to busySpin (redisstore/busypoll).
func pollingClient(b *testing.B, client *redis.Client) *redis.Client {
	poller, err := busypoll.New(busypoll.Config{Spin: busySpin})
	if err != nil {
		b.Fatal(err)
	}
	o := *client.Options()
	o.Dialer = poller.Dial
	return redis.NewClient(&o)
}

// madeStores are the stores onRedis made, for a benchmark that reads their
// Stats (BenchmarkRedisFlood empties it first); only benchmarks' own
// goroutines touch it, one sub-benchmark at a time.
var madeStores []*redisstore.Store

// onRedis returns impl=actorlimit's adapter: a Limiter on a redisstore of
// client with sopts, started with opts, hitting under p.
func onRedis(b *testing.B, client *redis.Client, p actorlimit.Policy, sopts []redisstore.Option, opts ...actorlimit.Option) (adapter, func()) {
	// FailError, so that no error hides behind a fallback; a timeout far
	// above any round trip, so that a loaded machine measures slow, not
	// failed, round trips.
	s, err := redisstore.New(client, append([]redisstore.Option{redisstore.WithOutage(redisstore.FailError),
		redisstore.WithTimeout(10 * time.Second)}, sopts...)...)
	if err != nil {
		b.Fatal(err)
	}
	madeStores = append(madeStores, s)
	lim, err := actorlimit.Start(append([]actorlimit.Option{actorlimit.WithStore(s)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return func(key string) (bool, error) {
		res, err := lim.Hit(context.Background(), key, p)
		return res.Allowed, err
	}, func() { _ = lim.Close() }
}

// commandStats reads INFO commandstats: calls and µs of Redis time per
// command.
func commandStats(b *testing.B, client *redis.Client) map[string][2]float64 {
	s, err := client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string][2]float64{}
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls = f
			case "usec":
				usec = f
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = [2]float64{calls, usec}
	}
	return out
}

// redisWork returns the commands that clients sent Redis and their µs of
// Redis time since the last CONFIG RESETSTAT, leaving out the benchmark's
// own (INFO, CONFIG). Redis counts the commands a script calls in their own
// entries too, and in the script's time: when scripts ran, only the script
// calls (EVALSHA, EVAL) and DEL are the clients'.
func redisWork(b *testing.B, client *redis.Client) (calls, usec float64) {
	st := commandStats(b, client)
	if st["evalsha"][0]+st["eval"][0] > 0 {
		for _, name := range []string{"evalsha", "eval", "del", "script|load"} {
			calls += st[name][0]
			usec += st[name][1]
		}
		return calls, usec
	}
	for name, v := range st {
		if name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		calls += v[0]
		usec += v[1]
	}
	return calls, usec
}

func resetStats(b *testing.B, client *redis.Client) {
	if err := client.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRedis measures one GCRA hit (1e9 per second, so always allowed;
// ulule: a fixed window of 1e9 a second) on one of 1000 keys against one
// local redis-server that the benchmark starts, at 1, 16, 64 and 256
// concurrent callers, through redisImpls. The sub-benchmarks run callers
// first, implementations inside, so each -count round alternates them.
//
// It reports hits per second, the p50 and p99 latency of one hit, and,
// from INFO commandstats, Redis's commands and µs of Redis time per hit.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key%d", i)
	}
	if len(keys) == 0 {
		b.Fatal("no keys")
	}
	p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1e9, Period: time.Second, Burst: 1e9}
	for _, callers := range []int{1, 16, 64, 256} {
		for _, name := range []string{"actorlimit", "actorlimit-1shard", "redis_rate", "ulule", "actorlimit-busypoll", "actorlimit-1shard-busypoll", "redis_rate-busypoll"} {
			b.Run(fmt.Sprintf("callers=%d/impl=%s", callers, name), func(b *testing.B) {
				// ContextTimeoutEnabled, as redisstore's doc advises, keeps
				// the store's round trips on the caller's goroutine; the
				// peers' calls carry no deadline, so it changes nothing for
				// them. RESP2, as the doc advises too, gives the store a
				// connection of its own; the peers' replies read the same.
				// A pool of 2*callers connections (at least 10) for all.
				client := srv.Client(func(o *redis.Options) {
					o.PoolSize, o.ContextTimeoutEnabled, o.Protocol = max(10, 2*callers), true, 2
				})
				hit, stop := redisImpls[name](b, client, p)
				defer stop()
				if _, err := hit("warm"); err != nil { // scripts loaded, a connection dialed
					b.Fatal(err)
				}
				lat := make([][]time.Duration, callers)
				for c := range lat {
					lat[c] = make([]time.Duration, 0, b.N/callers+1)
				}
				var wg sync.WaitGroup
				resetStats(b, client)
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := processCPU()
				start := time.Now()
				for c := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := c; i < b.N; i += callers {
							t := time.Now()
							ok, err := hit(keys[i%len(keys)])
							if err != nil || !ok {
								b.Errorf("%s: allowed %v, %v", keys[i%len(keys)], ok, err)
								return
							}
							lat[c] = append(lat[c], time.Since(t))
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				cpu := processCPU() - cpu0
				b.StopTimer()
				calls, usec := redisWork(b, client)
				all := slices.Concat(lat...)
				if len(all) == 0 {
					return
				}
				slices.Sort(all)
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "hits/s")
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(calls/float64(b.N), "redis-cmds/hit")
				b.ReportMetric(usec/float64(b.N), "redis-µs/hit")
				b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "client-cpu-µs/hit")
			})
		}
	}
}

// processCPU returns the CPU time this process (the client side: the
// benchmark's callers, the limiter, go-redis, the runtime; not
// redis-server, a process of its own) has used so far, user and system.
// Unlike a rate, it grows little when other processes load the machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRedisScript measures Redis's own time per check of each
// algorithm's script (INFO commandstats: µs of EVALSHA over the checks
// decided, "redis-µs/check"; "checks/call" is how many one EVALSHA
// decided), and redis_rate's, always allowed, on 1000 keys, 16 callers;
// the actorlimit checks go through redisstore's Decide, 16 a batch (on one
// server a run of bucket checks is one EVALSHA, the others one each in a
// pipeline), so the round trips do not bound the run. The Redis time is
// what it measures; hits/s here says little.
func BenchmarkRedisScript(b *testing.B) {
	srv := redistest.Start(b)
	const callers, batch = 16, 16
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key%d", i)
	}
	type impl struct {
		name string
		alg  algo.Algorithm
	}
	var impls []impl
	for _, a := range algo.All() {
		impls = append(impls, impl{"actorlimit-" + a.String(), a})
	}
	impls = append(impls, impl{name: "redis_rate"})
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			client := srv.Client(func(o *redis.Options) { o.PoolSize = 2 * callers })
			var hit func(i int) error
			if im.name == "redis_rate" {
				l := redis_rate.NewLimiter(client)
				lim := redis_rate.PerSecond(1e9)
				hit = func(i int) error {
					_, err := l.Allow(context.Background(), keys[i%len(keys)], lim)
					return err
				}
			} else {
				s, err := redisstore.New(client, redisstore.WithOutage(redisstore.FailError), redisstore.WithTimeout(10*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				limit := int64(1e9)
				if im.alg == algo.SlidingLog {
					limit = algo.MaxSlidingLogLimit
				}
				burst := int64(0)
				if im.alg == algo.GCRA || im.alg == algo.TokenBucket || im.alg == algo.LeakyBucket {
					burst = limit
				}
				hit = func(i int) error {
					checks := make([]algo.Check, batch)
					for j := range checks {
						checks[j] = algo.Check{Algorithm: im.alg, ID: keys[(i+j*61)%len(keys)], Period: time.Second,
							Limit: limit, Burst: algo.Burst(limit, burst), N: 1}
					}
					return s.Decide(context.Background(), time.Now().UnixNano(), checks, make([]algo.Decision, batch))
				}
			}
			if err := hit(0); err != nil {
				b.Fatal(err)
			}
			per := 1
			if im.name != "redis_rate" {
				per = batch
			}
			resetStats(b, client)
			b.ReportAllocs()
			b.ResetTimer()
			var next, checks atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(int64(per))) - per
						if i >= b.N {
							return
						}
						if err := hit(i); err != nil {
							b.Error(err)
							return
						}
						checks.Add(int64(per))
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			st := commandStats(b, client)["evalsha"]
			if st[0] == 0 {
				b.Fatal("no EVALSHA counted")
			}
			b.ReportMetric(st[1]/float64(checks.Load()), "redis-µs/check")
			b.ReportMetric(float64(checks.Load())/st[0], "checks/call")
		})
	}
}

// cachedDenials sums Stats().Cached over madeStores.
func cachedDenials() uint64 {
	var n uint64
	for _, s := range madeStores {
		n += s.Stats().Cached
	}
	return n
}

// BenchmarkRedisFlood is the flood case: 64 callers, 90% of hits on 100
// ids far over their limit (GCRA, 10 a minute: all but their first 10 hits
// denied) and 10% on 10 000 normal ids (1e9 a second, always allowed), in
// a random order fixed by the seed. It reports the app server's hits/s,
// Redis's commands per hit (INFO commandstats, every command; one command
// may decide a run of many hits), the share of the denied hits that were
// sent to Redis at all (those the over-limit cache did not answer,
// "sent/denied"), Redis's time per hit, and the share of hits denied.
func BenchmarkRedisFlood(b *testing.B) {
	srv := redistest.Start(b)
	const callers, flooders, normals = 64, 100, 10_000
	rng := rand.New(rand.NewPCG(1, 2))
	type hitKey struct {
		key   string
		flood bool
	}
	seq := make([]hitKey, 1<<16)
	for i := range seq {
		if rng.IntN(10) < 9 {
			seq[i] = hitKey{fmt.Sprintf("flood%d", rng.IntN(flooders)), true}
		} else {
			seq[i] = hitKey{fmt.Sprintf("user%d", rng.IntN(normals)), false}
		}
	}
	floodP := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 10, Period: time.Minute}
	normalP := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1e9, Period: time.Second}
	for _, name := range []string{"actorlimit-cache", "actorlimit", "redis_rate"} {
		b.Run("impl="+name, func(b *testing.B) {
			client := srv.Client(func(o *redis.Options) {
				o.PoolSize, o.ContextTimeoutEnabled = 2*callers, true
			})
			if err := client.FlushAll(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
			madeStores = nil
			flood, stopF := redisImpls[name](b, client, floodP)
			defer stopF()
			normal, stopN := redisImpls[name](b, client, normalP)
			defer stopN()
			for i := range flooders { // each flooder over its limit before the timer starts
				for range 11 {
					if _, err := flood(fmt.Sprintf("flood%d", i)); err != nil {
						b.Fatal(err)
					}
				}
			}
			cachedBefore := cachedDenials()
			var allowed, denied, normalHits atomic.Int64
			var next atomic.Int64
			var wg sync.WaitGroup
			resetStats(b, client)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						h := seq[i%len(seq)]
						hit := normal
						if h.flood {
							hit = flood
						}
						ok, err := hit(h.key)
						if err != nil {
							b.Error(err)
							return
						}
						if !h.flood {
							normalHits.Add(1)
						}
						if ok {
							allowed.Add(1)
						} else {
							denied.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			calls, usec := redisWork(b, client)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "hits/s")
			b.ReportMetric(calls/float64(b.N), "redis-cmds/hit")
			b.ReportMetric(usec/float64(b.N), "redis-µs/hit")
			if d := denied.Load(); d > 0 {
				// The denied hits that went to Redis: all of them, but those
				// the over-limit cache answered.
				b.ReportMetric(float64(d-int64(cachedDenials()-cachedBefore))/float64(d), "sent/denied")
			}
			b.ReportMetric(float64(denied.Load())/float64(b.N), "denied-share")
		})
	}
}
