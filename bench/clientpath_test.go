package bench

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit"
)

// answerHook answers every command in place, without a connection: a
// script call as an always-allowed GCRA hit (actorlimit's bucket script: a
// lone check's backlog, 0; redis_rate's: allowed 1, remaining, retry and
// reset), anything else OK.
type answerHook struct{}

func (answerHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (answerHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c, ok := cmd.(*redis.Cmd)
		if !ok {
			return nil
		}
		if len(c.Args()) == 8 { // redis_rate: evalsha sha 1 key burst rate period n
			c.SetVal([]any{int64(1), int64(1e9 - 1), "-1", "0"})
			return nil
		}
		c.SetVal(int64(0))
		return nil
	}
}

func (answerHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if c, ok := cmd.(*redis.Cmd); ok {
				c.SetVal(int64(0))
			}
		}
		return nil
	}
}

// BenchmarkRedisClientPath measures the client's own work for one lone
// always-allowed GCRA hit, with no network and no Redis: a go-redis hook
// answers each command in place. It is the CPU a hit costs on the app
// server above go-redis's round trip (the limiter, the store's planning
// and reading, go-redis's command and hooks), which BenchmarkRedis at one
// caller pays on the latency path; redis_rate's is the same measure of
// the peer.
func BenchmarkRedisClientPath(b *testing.B) {
	p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1e9, Period: time.Second, Burst: 1e9}
	for _, name := range []string{"actorlimit-1shard", "redis_rate"} {
		b.Run("impl="+name, func(b *testing.B) {
			client := redis.NewClient(&redis.Options{
				Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1, Protocol: 2,
				Dialer: func(context.Context, string, string) (net.Conn, error) {
					b.Fatal("the hook answers every command: nothing may dial")
					return nil, nil
				},
			})
			client.AddHook(answerHook{})
			defer client.Close()
			hit, stop := redisImpls[name](b, client, p)
			defer stop()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				ok, err := hit(clientKeys[i%len(clientKeys)])
				if err != nil || !ok {
					b.Fatalf("allowed %v, %v", ok, err)
				}
			}
		})
	}
}

var clientKeys = func() []string {
	k := make([]string, 1000)
	for i := range k {
		k[i] = "key" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
	}
	return k
}()
