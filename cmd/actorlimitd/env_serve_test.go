package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// TestEnvServesAsEnvoyRatelimit starts the real program with nothing but
// envoy ratelimit's environment, as a Deployment of envoy ratelimit sets it,
// and checks that it listens where envoy ratelimit would, reads the
// configuration from the runtime directory, decides on the Redis of
// REDIS_URL as envoy ratelimit decides, and logs the ignored variables once.
func TestEnvServesAsEnvoyRatelimit(t *testing.T) {
	rs := redistest.Start(t)
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	writeFile(t, filepath.Join(dir, "rl.yaml"), `domain: rl
descriptors:
  - key: api_key
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: path
    value: /login
    rate_limit: {unit: day, requests_per_unit: 1}
`)
	writeFile(t, filepath.Join(dir, "more.yaml"), "domain: rl\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 2}\n")
	ports := freePorts(t, 4)
	env := []string{
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "USE_STATSD=false", "LOG_LEVEL=debug",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + rs.Addr, "MERGE_DOMAIN_CONFIG=true",
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]), "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:" + strconv.Itoa(ports[3]), "PROMETHEUS_PATH=/prom",
	}
	d, err := spawnEnv(t, env)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", ports[1]), d.grpc, "GRPC_HOST:GRPC_PORT")
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", ports[0]), d.http, "HOST:PORT")
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", ports[2]), d.debug, "DEBUG_HOST:DEBUG_PORT")

	// Each step: a request and envoy ratelimit's answer to it, on fixed
	// windows of a day that no step crosses but by a midnight (then the
	// test is run again).
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	steps := []struct {
		domain string
		kv     []string
		want   rlsv3.RateLimitResponse_Code
	}{
		{"rl", []string{"api_key", "k1"}, ok},
		{"rl", []string{"api_key", "k1"}, ok},
		{"rl", []string{"api_key", "k2"}, ok},
		{"rl", []string{"api_key", "k1"}, ok},
		{"rl", []string{"api_key", "k1"}, over},
		{"rl", []string{"path", "/login"}, ok},
		{"rl", []string{"path", "/login"}, over},
		{"rl", []string{"path", "/other"}, ok}, // no rule
		{"rl", []string{"user", "u"}, ok},      // the second file's, merged
		{"rl", []string{"user", "u"}, ok},
		{"rl", []string{"user", "u"}, over},
		{"other", []string{"api_key", "k1"}, ok}, // an unknown domain
	}
	for i, s := range steps {
		resp, err := d.ask(request(s.domain, desc(s.kv...)))
		require.NoError(t, err, "step %d", i)
		assert.Equal(t, s.want, resp.OverallCode, "step %d: %s %v", i, s.domain, s.kv)
	}

	// The counts are in REDIS_URL's Redis, the values in clear (secret keys
	// off, as envoy ratelimit keeps them).
	keys, err := rs.Client().Keys(context.Background(), "actorlimitd:*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys, "keys in Redis")
	assert.True(t, strings.Contains(strings.Join(keys, " "), "k1"), "api_key's value in clear in %v", keys)
	code, body := d.get("/healthcheck")
	assert.Equal(t, 200, code, body)
	code, body = d.getDebug("/rlconfig")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "domain: rl")

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/prom", ports[3]))
	require.NoError(t, err, "PROMETHEUS_ADDR, PROMETHEUS_PATH")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(b), "actorlimitd_requests_total")

	logs := d.logs.String()
	assert.Equal(t, 1, strings.Count(logs, "environment variable ignored"), logs)
	assert.Equal(t, 1, strings.Count(logs, "variable=USE_STATSD"), logs)
	assert.Equal(t, 1, strings.Count(logs, "secret descriptor keys are off"), logs)
	assert.Contains(t, logs, "backend=\"Redis single "+rs.Addr)
}
