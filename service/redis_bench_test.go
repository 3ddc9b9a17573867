package service_test

import (
	"context"
	"strconv"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

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
	// Deadlines as actorlimitd sets them: go-redis ends a round trip at its
	// context's deadline, and the store needs no timer of its own.
	client := rs.Client(func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries = true, -1 })
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
	codec := service.NewCodec(srv)
	for _, n := range []int{1, 3} {
		var wires []mem.BufferSlice
		for _, r := range reqs(n) {
			w, err := proto.Marshal(r)
			require.NoError(b, err)
			wires = append(wires, mem.BufferSlice{mem.SliceBuffer(w)})
		}
		require.NotEmpty(b, wires)
		b.Run("descriptors="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				req := new(rlsv3.RateLimitRequest)
				if err := codec.Unmarshal(wires[i%len(wires)], req); err != nil {
					b.Fatal(err)
				}
				resp, err := srv.ShouldRateLimit(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				out, err := codec.Marshal(resp)
				if err != nil {
					b.Fatal(err)
				}
				out.Free()
				i++
			}
		})
	}
}
