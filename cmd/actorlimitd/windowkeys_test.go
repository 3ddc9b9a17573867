package main

import (
	"context"
	"regexp"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// TestRedisWindowKeys: with -redis-window-keys two processes on one Redis
// share a fixed window's limit, kept in a key of the window's own
// (<the rule's key>:<window number>, the count as a string, with a TTL),
// with no script call for it. A process without the flag on the same Redis
// counts apart, in the script's key: switching the flag on starts every
// window in progress at 0 (the old keys are left to their TTL).
func TestRedisWindowKeys(t *testing.T) {
	rs := redistest.Start(t)
	rc := rs.Client()
	ctx := context.Background()
	old := startWithConfig(t, serveConfig, "-redis", rs.Addr, "-secret-descriptor-keys", "")
	over := func(d *daemon, id string) bool {
		t.Helper()
		resp, err := d.ask(request("web", desc("user", id)))
		require.NoError(t, err)
		return resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT
	}
	var got []bool
	for range 4 {
		got = append(got, over(old, "switch"))
	}
	assert.Equal(t, []bool{false, false, false, true}, got, "3 a year, in the script's key")

	require.NoError(t, rc.ConfigResetStat(ctx).Err())
	a := startWithConfig(t, serveConfig, "-redis", rs.Addr, "-redis-window-keys", "-secret-descriptor-keys", "")
	b := startWithConfig(t, serveConfig, "-redis", rs.Addr, "-redis-window-keys", "-secret-descriptor-keys", "")
	got = got[:0]
	for _, d := range []*daemon{a, b, a, b} {
		got = append(got, over(d, "switch"))
	}
	assert.Equal(t, []bool{false, false, false, true}, got, "a window in progress starts at 0 with the flag, shared by both")

	keys, err := rc.Keys(ctx, "*").Result()
	require.NoError(t, err)
	win := regexp.MustCompile(`^actorlimitd:v4:\{.*\}:FixedWindow:\d+:\d+$`)
	var windows []string
	for _, k := range keys {
		if win.MatchString(k) {
			windows = append(windows, k)
		}
	}
	require.Len(t, windows, 1, "one window's key: %v", keys)
	assert.Equal(t, "4", rc.Get(ctx, windows[0]).Val(), "every hit counted, the denied one too")
	assert.Positive(t, rc.PTTL(ctx, windows[0]).Val())
	info, err := rc.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.NotContains(t, info, "cmdstat_evalsha")
	assert.Contains(t, info, "cmdstat_incrby:calls=4,")
}

// TestRedisWindowKeysEnv: ACTORLIMITD_REDIS_WINDOW_KEYS, read with envoy
// ratelimit's variables, sets -redis-window-keys; a value that is no
// boolean is an error naming the variable; a flag given wins.
func TestRedisWindowKeysEnv(t *testing.T) {
	_, values, err := parseEnv(t, map[string]string{"REDIS_URL": "r:1", envWindowKeys: "1"})
	require.NoError(t, err)
	assert.Equal(t, "true", values["redis-window-keys"])
	_, _, err = parseEnv(t, map[string]string{"REDIS_URL": "r:1", envWindowKeys: "maybe"})
	assert.ErrorContains(t, err, envWindowKeys+`="maybe"`)
	_, values, err = parseEnv(t, map[string]string{"REDIS_URL": "r:1", envWindowKeys: "true"}, "-redis-window-keys=false")
	require.NoError(t, err)
	assert.Equal(t, "false", values["redis-window-keys"])
}
