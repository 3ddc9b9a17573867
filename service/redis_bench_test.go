package service_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
	"github.com/actorlimit/actorlimit/service"
)

// BenchmarkServeRedis is BenchmarkServe on a Redis store (a local
// redis-server, as actorlimitd -redis uses it): one caller, so each request
// is a round trip of its own, and what the benchmark adds to Redis's time
// is the client path's CPU and allocations.
func BenchmarkServeRedis(b *testing.B) {
	rs := redistest.Start(b)
	// Deadlines and RESP2 as actorlimitd sets them: go-redis ends a round
	// trip at its context's deadline, so the store needs no timer of its
	// own, and the store keeps a connection of its own.
	client := rs.Client(func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries, o.Protocol = true, -1, 2 })
	b.Cleanup(func() { _ = client.Close() })
	store, err := redisstore.New(client, redisstore.WithPrefix("actorlimitd:"))
	require.NoError(b, err)
	lim, err := actorlimit.Start(actorlimit.WithStore(store))
	require.NoError(b, err)
	b.Cleanup(func() { lim.Close() })
	cfg, reqs := benchConfig(b)
	// No value secret, as envoy ratelimit and bench/rls's requests.
	srv, err := service.New(cfg, service.Options{Limiter: lim, Secrets: service.Secrets{Keys: []string{}}})
	require.NoError(b, err)
	benchServe(b, srv, reqs)
}
