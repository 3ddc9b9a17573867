package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// secretKeyFile writes a key for -secret-key-file and returns its path.
func secretKeyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret.key")
	require.NoError(t, os.WriteFile(path, []byte("0123456789abcdef0123456789abcdef\n"), 0o600))
	return path
}

// inOneMinute runs try, a sequence of requests against a per-minute limit,
// with a fresh client each time, until one run starts and ends in the same
// minute of the wall clock (the daemon's), and returns that run's answers:
// a run across a minute's end sees its counts reset, and proves nothing.
func inOneMinute(t *testing.T, try func(client string) []string) []string {
	t.Helper()
	for i := range 3 {
		before := time.Now().Truncate(time.Minute)
		got := try(strings.Repeat("c", i+1))
		if time.Now().Truncate(time.Minute).Equal(before) {
			return got
		}
	}
	t.Fatal("three runs crossed a minute's end")
	return nil
}

// TestEdgeLongValues: with examples/actorlimitd/config.yaml, a client over
// its remote_address limit that sends a long path (5 000 bytes, 1 MiB) is
// answered OVER_LIMIT, not refused (Envoy lets a refused request through),
// and an address of 5 000 bytes is counted and denied past its limit.
func TestEdgeLongValues(t *testing.T) { forTransports(t, testEdgeLongValues) }

func testEdgeLongValues(t *testing.T, transport string) {
	d := startDaemon(t, "-config", filepath.Join("..", "..", "examples", "actorlimitd", "config.yaml"), "-grpc-transport", transport)
	// ask returns the overall code of a request, or its error's code.
	ask := func(hits uint32, kv ...string) string {
		var ds []*ratelimitv3.RateLimitDescriptor
		for i := 0; i+1 < len(kv); i += 2 {
			ds = append(ds, desc(kv[i], kv[i+1]))
		}
		resp, err := d.ask(&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: ds, HitsAddend: hits})
		if err != nil {
			return "error " + status.Code(err).String()
		}
		return resp.OverallCode.String()
	}
	for _, n := range []int{5000, 1 << 20} {
		long := "/api/" + strings.Repeat("p", n-5)
		got := inOneMinute(t, func(client string) []string {
			addr := "10.0.0.1-" + client + "-" + itoa(uint32(n))
			return []string{
				ask(100, "remote_address", addr, "path", "/x"),
				ask(1, "remote_address", addr, "path", "/x"),
				ask(1, "remote_address", addr, "path", long),
			}
		})
		assert.Equal(t, []string{"OK", "OVER_LIMIT", "OVER_LIMIT"}, got, "100 a minute, the 101st, then a path of %d bytes", n)
	}
	got := inOneMinute(t, func(client string) []string {
		addr := strings.Repeat("a", 4999) + client
		return []string{
			ask(100, "remote_address", addr),
			ask(1, "remote_address", addr),
			ask(1, "remote_address", strings.Repeat("a", 4999)+"z"),
		}
	})
	assert.Equal(t, []string{"OK", "OVER_LIMIT", "OK"}, got, "an address of 5000 bytes: 100 a minute, the 101st, another such address")
}

// secretsConfig groups by API key (per year: no window ends during the
// test) and puts the Authorization header in detailed metrics.
const secretsConfig = `
domain: edge
descriptors:
  - key: api_key
    rate_limit: {unit: year, requests_per_unit: 3}
  - key: api_key
    value: sk_live_in_the_file_0000
    rate_limit: {unit: year, requests_per_unit: 1000}
  - key: authorization
    detailed_metric: true
    rate_limit: {unit: year, requests_per_unit: 3}
`

const secretValue = "sk_live_51HqLyjWDarjtT1zdp7dc"

// useSecrets hits d with the secret values until the API key is over its
// limit, and checks the answers.
func useSecrets(t *testing.T, d *daemon) {
	t.Helper()
	for i := range 4 {
		resp, err := d.ask(request("edge", desc("api_key", secretValue), desc("authorization", "Bearer "+secretValue)))
		require.NoError(t, err)
		assert.Equal(t, i == 3, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT, "hit %d of 3 a year", i)
	}
	resp, err := d.ask(request("edge", desc("api_key", "sk_live_in_the_file_0000")))
	require.NoError(t, err)
	assert.Equal(t, uint32(999), resp.Statuses[0].LimitRemaining, "the file's own value still matches its rule")
}

// stillOver checks that the API key is still over its limit.
func stillOver(t *testing.T, d *daemon) {
	t.Helper()
	resp, err := d.ask(request("edge", desc("api_key", secretValue)))
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.OverallCode, "the limit is held")
}

// noSecretOutside checks d's metrics (with a detailed series of the
// Authorization header if detailed), configuration page and logs.
func noSecretOutside(t *testing.T, d *daemon, detailed bool) {
	t.Helper()
	_, metrics := d.getDebug("/metrics")
	if detailed {
		assert.True(t, strings.Contains(metrics, "actorlimitd_hits_total{descriptor=\"authorization_"), "a detailed series, its value hashed")
	}
	assert.False(t, strings.Contains(metrics, "sk_live"), "a secret value in /metrics")
	_, config := d.getDebug("/rlconfig")
	assert.NotContains(t, config, "sk_live")
	assert.False(t, strings.Contains(d.logs.String(), "sk_live"), "a secret value in the logs")
}

// TestEdgeSecretsRedis: with -redis and a key file, no secret value is in
// Redis's keys or values, the metrics, /rlconfig or the logs; the limit is
// held, and held by another process with the same key file.
func TestEdgeSecretsRedis(t *testing.T) {
	rs := redistest.Start(t)
	key := secretKeyFile(t)
	config := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, config, secretsConfig)
	args := []string{"-config", config, "-redis", rs.Addr, "-secret-key-file", key, "-log-level", "debug"}
	d := startDaemon(t, args...)
	useSecrets(t, d)
	stillOver(t, d)
	noSecretOutside(t, d, true)

	c := rs.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := c.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		assert.NotContains(t, k, "sk_live")
		v, err := c.Dump(ctx, k).Result()
		require.NoError(t, err)
		assert.NotContains(t, v, "sk_live", "the value of %s", k)
	}
	d.signal(syscall.SIGTERM)
	require.Equal(t, 0, d.wait(15*time.Second))
	stillOver(t, startDaemon(t, args...))
}

// TestEdgeSecretsPersist: with -persist and a key file, no secret value is
// in the files, and the limit is held across a restart with the same key.
func TestEdgeSecretsPersist(t *testing.T) {
	dir, key := t.TempDir(), secretKeyFile(t)
	config := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, config, secretsConfig)
	args := []string{"-config", config, "-persist", dir, "-secret-key-file", key, "-log-level", "debug"}
	d := startDaemon(t, args...)
	useSecrets(t, d)
	noSecretOutside(t, d, true)
	d.signal(syscall.SIGTERM)
	require.Equal(t, 0, d.wait(15*time.Second))

	files := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		files++
		assert.NotContains(t, string(b), "sk_live", path)
		return nil
	}))
	require.NotZero(t, files)
	d = startDaemon(t, args...)
	stillOver(t, d)
	noSecretOutside(t, d, false)
}

// TestEdgeSecretKeyRequired: with counts that are shared or kept, secret
// keys and no key file, actorlimitd does not start, and says how to make a
// key and how to do without.
func TestEdgeSecretKeyRequired(t *testing.T) {
	config := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, config, secretsConfig)
	short := filepath.Join(t.TempDir(), "short.key")
	writeFile(t, short, "0123456789\n")
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"-persist", []string{"-persist", t.TempDir()}, "head -c 32 /dev/urandom"},
		{"-redis", []string{"-redis", "127.0.0.1:1"}, "-secret-descriptor-keys ''"},
		{"a cluster", []string{"-cluster-peers", "127.0.0.1:1", "-cluster-peer-port", "1"}, "-secret-key-file"},
		{"a short key", []string{"-secret-key-file", short}, "the key is 10 bytes, fewer than the 16 wanted"},
		{"secret: true, keys off", []string{"-persist", t.TempDir(), "-secret-descriptor-keys", "", "-config",
			writeConfig(t, "domain: d\ndescriptors:\n  - key: tok\n    secret: true\n    rate_limit: {unit: year, requests_per_unit: 1}\n")}, `marks key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-config", config}, tt.args...)
			_, err := spawn(t, args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "exited with 1")
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
	d := startDaemon(t, "-config", config, "-persist", t.TempDir(), "-secret-descriptor-keys", "")
	resp, err := d.ask(request("edge", desc("api_key", secretValue)))
	require.NoError(t, err)
	assert.Equal(t, uint32(2), resp.Statuses[0].LimitRemaining, "secret keys off: started")
}

// writeConfig writes a configuration file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, text)
	return path
}

// TestEdgeMaxHitsAddend: with -max-hits-addend, a larger hits_addend is
// counted as the bound, never refused; without it, as it is.
func TestEdgeMaxHitsAddend(t *testing.T) {
	for _, bound := range []string{"0", "10"} {
		d := startWithConfig(t, serveConfig, "-max-hits-addend", bound)
		resp, err := d.ask(&rlsv3.RateLimitRequest{Domain: "web", HitsAddend: 1000, Descriptors: request("web", desc("client", "vip")).Descriptors})
		require.NoError(t, err, bound)
		want := uint32(90)
		if bound == "0" {
			want = 0
		}
		assert.Equal(t, want, resp.Statuses[0].LimitRemaining, "-max-hits-addend %s: 100 a year", bound)
		assert.Equal(t, bound == "0", resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT, bound)
	}
}
