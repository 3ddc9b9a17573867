package main

import (
	"fmt"
	"path/filepath"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// TestRedisBusyPoll: with -redis-busy-poll two processes on one Redis
// decide as without it, their lone requests' replies come while the reads
// poll (actorlimitd_redis_busy_poll_reads_total{outcome="polled"}), and a
// spin out of bounds stops the process at start with an error naming the
// flag.
func TestRedisBusyPoll(t *testing.T) {
	rs := redistest.Start(t)
	// The longest spin, so that a reply comes within it on a loaded machine.
	a := startWithConfig(t, serveConfig, "-redis", rs.Addr, "-redis-busy-poll", "10ms", "-secret-descriptor-keys", "")
	b := startWithConfig(t, serveConfig, "-redis", rs.Addr, "-redis-busy-poll", "10ms", "-secret-descriptor-keys", "")
	for i := range 20 {
		var over []bool
		for _, d := range []*daemon{a, b, a, b} {
			resp, err := d.ask(request("web", desc("user", fmt.Sprint("poll", i))))
			require.NoError(t, err)
			over = append(over, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
		}
		require.Equal(t, []bool{false, false, false, true}, over, "3 a year, shared through the one Redis")
	}
	for _, d := range []*daemon{a, b} {
		assert.Positive(t, metric(d, `actorlimitd_redis_busy_poll_reads_total{outcome="polled"}`))
		assert.GreaterOrEqual(t, metric(d, `actorlimitd_redis_busy_poll_reads_total{outcome="waited"}`), 0.0)
	}
	plain := startWithConfig(t, serveConfig, "-redis", rs.Addr, "-secret-descriptor-keys", "")
	assert.Equal(t, -1.0, metric(plain, `actorlimitd_redis_busy_poll_reads_total{outcome="polled"}`), "no such series without the flag")

	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, serveConfig)
	for _, spin := range []string{"-1ms", "11ms"} {
		d, err := spawn(t, "-config", path, "-redis", rs.Addr, "-redis-busy-poll", spin, "-secret-descriptor-keys", "")
		require.Error(t, err, spin)
		assert.Contains(t, err.Error(), "-redis-busy-poll "+spin+" is not between 0 and 10ms")
		assert.Equal(t, 2, d.exitCode, "a usage error")
	}
}

// TestRedisBusyPollEnv: ACTORLIMITD_REDIS_BUSY_POLL, read with envoy
// ratelimit's variables, sets -redis-busy-poll; a value that is no
// duration is an error naming the variable; a flag given wins.
func TestRedisBusyPollEnv(t *testing.T) {
	_, values, err := parseEnv(t, map[string]string{"REDIS_URL": "r:1", envBusyPoll: "100us"})
	require.NoError(t, err)
	assert.Equal(t, "100µs", values["redis-busy-poll"])
	_, _, err = parseEnv(t, map[string]string{"REDIS_URL": "r:1", envBusyPoll: "fast"})
	assert.ErrorContains(t, err, envBusyPoll+`="fast"`)
	_, values, err = parseEnv(t, map[string]string{"REDIS_URL": "r:1", envBusyPoll: "100us"}, "-redis-busy-poll=0")
	require.NoError(t, err)
	assert.Equal(t, "0s", values["redis-busy-poll"])
}
