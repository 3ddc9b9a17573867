package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// TestRedisBackend: two actorlimitd processes on one redis-server share
// one limit; with Redis killed under load, no request fails or waits past
// 2 s (each process decides on its local fallback), and once Redis is back
// each of them writes its counts to Redis again (read there with a client of
// its own) and the two share one limit again.
func TestRedisBackend(t *testing.T) {
	rs := redistest.Start(t)
	// On Redis a bucket must drain within about 52 days (redisstore's
	// MaxSpan): the load's GCRA rule is per hour.
	config := serveConfig + "  - key: gcra_hourly\n    rate_limit: {algorithm: gcra, unit: hour, requests_per_unit: 1000000}\n"
	key := secretKeyFile(t)
	a := startWithConfig(t, config, "-redis", rs.Addr, "-redis-timeout", "200ms", "-secret-key-file", key)
	b := startWithConfig(t, config, "-redis", rs.Addr, "-redis-timeout", "200ms", "-secret-key-file", key)

	var got []bool
	for _, d := range []*daemon{a, b, a, b} {
		resp, err := d.ask(request("web", desc("user", "shared")))
		require.NoError(t, err)
		got = append(got, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
	}
	assert.Equal(t, []bool{false, false, false, true}, got, "3 a year, shared by both processes")

	var (
		stop     atomic.Bool
		answered atomic.Int64
		mu       sync.Mutex
		errs     []error
		slowest  time.Duration
		wg       sync.WaitGroup
	)
	for i := range 8 {
		d := []*daemon{a, b}[i%2]
		client := d.client()
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				start := time.Now()
				_, err := client.ShouldRateLimit(ctx, request("web", desc("user", "load"), desc("gcra_hourly", "load")))
				took := time.Since(start)
				cancel()
				mu.Lock()
				if err != nil && len(errs) < 5 {
					errs = append(errs, err)
				}
				slowest = max(slowest, took)
				mu.Unlock()
				answered.Add(1)
			}
		})
	}
	eventually(t, 10*time.Second, "load on Redis", func() bool { return answered.Load() > 200 })
	rs.Kill()
	killedAt := answered.Load()
	eventually(t, 10*time.Second, "load without Redis", func() bool { return answered.Load() > killedAt+500 })
	rs.Restart()
	backAt := answered.Load()
	eventually(t, 10*time.Second, "load with Redis back", func() bool { return answered.Load() > backAt+200 })
	stop.Store(true)
	wg.Wait()
	assert.Empty(t, errs)
	assert.Less(t, slowest, 2*time.Second)
	t.Logf("%d requests, the slowest %v", answered.Load(), slowest)

	// Each process, asked about a key nobody has used, must write it to
	// the restarted Redis once its probe (every 500 ms) has found Redis
	// again; the load above may have left either of them still between
	// two probes, so ask afresh until it does. A store kept on its
	// fallback for good never writes there.
	rc := rs.Client()
	ctx := context.Background()
	for name, d := range map[string]*daemon{"a": a, "b": b} {
		n := 0
		eventually(t, 10*time.Second, name+"'s counts in Redis again", func() bool {
			n++
			before, err := rc.DBSize(ctx).Result()
			require.NoError(t, err)
			_, err = d.ask(request("web", desc("user", fmt.Sprintf("back-%s-%d", name, n))))
			require.NoError(t, err)
			after, err := rc.DBSize(ctx).Result()
			require.NoError(t, err)
			return after > before
		})
	}
	got = got[:0]
	for _, d := range []*daemon{a, b, a, b} {
		resp, err := d.ask(request("web", desc("user", "shared-again")))
		require.NoError(t, err)
		got = append(got, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
	}
	assert.Equal(t, []bool{false, false, false, true}, got, "3 a year, shared by both processes on Redis again")
	_, body := a.getDebug("/metrics")
	assert.Contains(t, body, "actorlimit_store_outages_total 1")
}

// TestRedisDeniedCacheMetric: with -redis-denied-cache, a key Redis has
// denied is denied again without a round trip, and those hits are counted in
// over_limit_with_local_cache_total as well as over_limit_total (as envoy
// ratelimit counts its local cache's answers).
func TestRedisDeniedCacheMetric(t *testing.T) {
	rs := redistest.Start(t)
	d := startWithConfig(t, serveConfig, "-redis", rs.Addr, "-redis-denied-cache", "1m", "-secret-descriptor-keys", "")
	var over []bool
	for range 9 {
		resp, err := d.ask(request("web", desc("user", "flood")))
		require.NoError(t, err)
		over = append(over, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
	}
	assert.Equal(t, []bool{false, false, false, true, true, true, true, true, true}, over, "3 a year")
	_, body := d.getDebug("/metrics")
	assert.Contains(t, body, `actorlimitd_over_limit_total{descriptor="user",domain="web"} 6`)
	assert.Contains(t, body, `actorlimitd_over_limit_with_local_cache_total{descriptor="user",domain="web"} 5`,
		"the first denial is Redis's, the 5 after it the cache's")
	assert.Contains(t, body, "actorlimit_store_cached_denials_total 5")
}

// TestRedisHung: a Redis that accepts connections and never answers costs
// each request at most the store's timeout, never an error.
func TestRedisHung(t *testing.T) {
	addr := redistest.Hung(t)
	d := startWithConfig(t, serveConfig, "-redis", addr, "-redis-timeout", "200ms", "-secret-descriptor-keys", "")
	for i := range 5 {
		start := time.Now()
		resp, err := d.ask(request("web", desc("user", "hung")))
		took := time.Since(start)
		require.NoError(t, err, "request %d", i)
		assert.Less(t, took, 2*time.Second, "request %d", i)
		assert.Equal(t, uint32(2-min(i, 2)), resp.Statuses[0].LimitRemaining, "request %d: the fallback table counts", i)
	}
}
