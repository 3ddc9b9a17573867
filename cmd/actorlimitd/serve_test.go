package main

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The tests' policies are per year (or a long period), so that no test
// waits for, or runs across, a window's end.
const serveConfig = `
domain: web
descriptors:
  - key: user
    rate_limit: {unit: year, requests_per_unit: 3, name: per_user}
  - key: client
    value: vip
    rate_limit: {unit: year, requests_per_unit: 100}
  - key: path
    value: /api/*
    rate_limit: {unit: year, requests_per_unit: 2}
  - key: open
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: year, requests_per_unit: 1}
  - key: tenant
    descriptors:
      - key: route
        rate_limit: {unit: year, requests_per_unit: 1}
  - key: fixed_window
    rate_limit: {algorithm: fixed_window, period: 8760h, requests_per_unit: 2}
  - key: sliding_window
    rate_limit: {algorithm: sliding_window, period: 8760h, requests_per_unit: 2}
  - key: sliding_log
    rate_limit: {algorithm: sliding_log, period: 8760h, requests_per_unit: 2}
  - key: gcra
    rate_limit: {algorithm: gcra, period: 8760h, requests_per_unit: 2}
  - key: token_bucket
    rate_limit: {algorithm: token_bucket, period: 8760h, requests_per_unit: 2}
  - key: leaky_bucket
    rate_limit: {algorithm: leaky_bucket, period: 8760h, requests_per_unit: 2, burst: 1}
`

func startWithConfig(t *testing.T, config string, args ...string) *daemon {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, config)
	return startDaemon(t, append([]string{"-config", path}, args...)...)
}

// code is a response's overall code and its statuses' codes and remaining.
func codes3(resp *rlsv3.RateLimitResponse) (bool, []string) {
	var out []string
	for _, s := range resp.Statuses {
		c := "ok"
		if s.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			c = "over"
		}
		out = append(out, c+" "+itoa(s.LimitRemaining))
	}
	return resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT, out
}

func itoa(u uint32) string {
	b, _ := json.Marshal(u)
	return string(b)
}

// TestServeDecisions drives envoy ratelimit's documented decisions through
// the real program over gRPC.
func TestServeDecisions(t *testing.T) {
	d := startWithConfig(t, serveConfig)
	steps := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		over bool
		want []string
	}{
		{"first hit", request("web", desc("user", "a")), false, []string{"ok 2"}},
		{"the key_value rule before the key", request("web", desc("client", "vip")), false, []string{"ok 99"}},
		{"a wildcard", request("web", desc("path", "/api/x")), false, []string{"ok 1"}},
		{"the same wildcard counter? no: one per value", request("web", desc("path", "/api/y")), false, []string{"ok 1"}},
		{"nested", request("web", desc("tenant", "t", "route", "r")), false, []string{"ok 0"}},
		{"nested over", request("web", desc("tenant", "t", "route", "r")), true, []string{"over 0"}},
		{"no rule at the parent's depth", request("web", desc("tenant", "t")), false, []string{"ok 0"}},
		{"unknown domain", request("nope", desc("user", "a")), false, []string{"ok 0"}},
		{"unlimited", request("web", desc("open", "x")), false, []string{"ok " + itoa(math.MaxUint32)}},
		{"every descriptor charged", request("web", desc("user", "a"), desc("user", "a"), desc("user", "a")), true, []string{"ok 1", "ok 0", "over 0"}},
		{"shadow mode", request("web", desc("shadow", "x"), desc("shadow", "x")), false, []string{"ok 0", "ok 0"}},
		{"hits_addend 0 checks", &rlsv3.RateLimitRequest{Domain: "web", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: desc("user", "b").Entries, HitsAddend: wrapperspb.UInt64(0)}}}, false, []string{"ok 3"}},
		{"the request's hits_addend", &rlsv3.RateLimitRequest{Domain: "web", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", "b")}}, false, []string{"ok 0"}},
	}
	for _, s := range steps {
		resp, err := d.ask(s.req)
		require.NoError(t, err, s.name)
		over, got := codes3(resp)
		assert.Equal(t, s.over, over, s.name)
		assert.Equal(t, s.want, got, s.name)
	}
	resp, err := d.ask(request("web", desc("user", "c")))
	require.NoError(t, err)
	st := resp.Statuses[0]
	assert.Equal(t, "per_user", st.CurrentLimit.Name)
	assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_YEAR, st.CurrentLimit.Unit)
	assert.Greater(t, st.DurationUntilReset.AsDuration(), time.Duration(0))
	assert.LessOrEqual(t, st.DurationUntilReset.AsDuration(), 365*24*time.Hour)

	hc, err := healthpb.NewHealthClient(d.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, hc.Status)
}

func TestServeHTTP(t *testing.T) {
	d := startWithConfig(t, serveConfig)
	code, body := d.get("/healthcheck")
	assert.Equal(t, 200, code)
	assert.Equal(t, "OK\n", body)
	req := `{"domain":"web","descriptors":[{"entries":[{"key":"path","value":"/api/json"}]}]}`
	for i, want := range []int{200, 200, 429} {
		code, body = d.post(req)
		assert.Equal(t, want, code, "request %d: %s", i, body)
	}
	var resp map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	assert.Equal(t, "OVER_LIMIT", resp["overallCode"])
	code, _ = d.post(`{"domain":`)
	assert.Equal(t, 400, code, "not JSON")
	code, _ = d.post(`{"domain":"web","descriptors":[]}`)
	assert.Equal(t, 400, code, "no descriptors")
	code, _ = d.post(`{"domain":"web","nope":1}`)
	assert.Equal(t, 400, code, "unknown field")
	code, body = d.getDebug("/rlconfig")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "domain: web")
	code, body = d.getDebug("/metrics")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, `actorlimitd_over_limit_total{descriptor="path_/api/*",domain="web"} 1`)
	assert.Contains(t, body, `actorlimitd_config_loads_total{result="success"} 1`)
	assert.Contains(t, body, "actorlimit_limiter_entries")
	assert.Contains(t, body, "actorlimitd_request_duration_seconds_bucket")
	assert.NotContains(t, body, "/api/json", "no client value in the metrics")
}

// TestServeAlgorithms: each of the six algorithms, through the binary,
// allows its 2 and denies the 3rd.
func TestServeAlgorithms(t *testing.T) {
	d := startWithConfig(t, serveConfig)
	for _, a := range []string{"fixed_window", "sliding_window", "sliding_log", "gcra", "token_bucket", "leaky_bucket"} {
		var got []bool
		for range 3 {
			resp, err := d.ask(request("web", desc(a, "x")))
			require.NoError(t, err, a)
			got = append(got, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT)
		}
		assert.Equal(t, []bool{false, false, true}, got, a)
	}
}

func TestServeOptions(t *testing.T) {
	d := startWithConfig(t, serveConfig, "-all-or-nothing", "-response-headers")
	two := request("web", desc("user", "a"), desc("tenant", "t", "route", "r"))
	resp, err := d.ask(two)
	require.NoError(t, err)
	_, got := codes3(resp)
	assert.Equal(t, []string{"ok 2", "ok 0"}, got)
	assert.Len(t, resp.ResponseHeadersToAdd, 3)
	resp, err = d.ask(two)
	require.NoError(t, err)
	over, got := codes3(resp)
	assert.True(t, over)
	assert.Equal(t, []string{"ok 2", "over 0"}, got, "the user was not charged")
	resp, err = d.ask(request("web", desc("user", "a")))
	require.NoError(t, err)
	_, got = codes3(resp)
	assert.Equal(t, []string{"ok 1"}, got)
}

func TestServeBadInputs(t *testing.T) {
	d := startWithConfig(t, serveConfig, "-max-descriptors", "2", "-max-value-length", "8")
	tests := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"empty domain", request("", desc("user", "a")), "domain must not be empty"},
		{"no descriptors", request("web"), "descriptor list must not be empty"},
		{"too many descriptors", request("web", desc("user", "z"), desc("user", "z"), desc("user", "z")), "3 descriptors, over the bound of 2"},
		{"too many entries", request("web", desc(strings.Split(strings.Repeat("k,v,", 17), ",")[:34]...)), "17 entries, over the bound of 16"},
	}
	for _, tt := range tests {
		_, err := d.ask(tt.req)
		require.Error(t, err, tt.name)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), tt.name)
		assert.Contains(t, err.Error(), tt.msg, tt.name)
	}
	resp, err := d.ask(request("web", desc("user", "z")))
	require.NoError(t, err)
	_, got := codes3(resp)
	assert.Equal(t, []string{"ok 2"}, got, "nothing of the refused requests was counted")
}

func TestInvalidConfigFiles(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"unknown field", "domain: d\ndescriptors:\n  - key: a\n    rate_limt: {unit: second}\n", "config.yaml:4:5: unknown field \\\"rate_limt\\\""},
		{"duplicate descriptor", "domain: d\ndescriptors:\n  - key: a\n  - key: a\n", "config.yaml:4:5: duplicate descriptor composite key 'd.a'"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: lightyear, requests_per_unit: 1}\n", "config.yaml:4:24: invalid rate limit unit 'lightyear'"},
		{"not YAML", "domain: [\n", "config.yaml:1:1: did not find expected node content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			writeFile(t, path, tt.text)
			d, err := spawn(t, "-config", path)
			require.Error(t, err)
			assert.Equal(t, 1, d.exitCode)
			assert.Contains(t, d.logs.String(), tt.want)
		})
	}
	d, err := spawn(t, "-grpc-addr", "127.0.0.1:0")
	require.Error(t, err)
	assert.Equal(t, 2, d.exitCode)
	assert.Contains(t, d.logs.String(), "-config is required")
}
