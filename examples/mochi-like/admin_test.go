package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/metrics"
)

func fetch(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, b)
	return string(b)
}

// TestRunAdmin serves with rules and -admin: after a few requests the
// metrics count each rule's and the per-peer limit's decisions, and the
// limits page and its JSON show the rules.
func TestRunAdmin(t *testing.T) {
	r := startRun(t, []string{"-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-dir", newTestDir(t), "-limit", "2",
		"-rules", "rules.yaml"}, limiterOptions(newFakeClock())...)
	adminURL, url := r.admin, r.url
	require.NotEmpty(t, adminURL)
	for range 3 {
		status(t, url+testFile)
	}
	m := fetch(t, adminURL+"/metrics")
	for _, want := range []string{
		`actorlimit_rule_matched_total{action="monitor",rule="trial"} 3`,
		`actorlimit_rule_matched_total{action="block",rule="per-client"} 3`,
		`actorlimit_rule_allowed_total{action="block",rule="per-peer"} 2`,
		`actorlimit_rule_denied_total{action="block",rule="per-peer"} 1`,
		`actorlimit_check_duration_seconds_count 6`, // the rules' 3 checks and the per-peer limit's 3
		`go_goroutines `,
		`process_start_time_seconds `,
		`go_build_info{`,
		`actorlimit_limiter_entries 3`,
	} {
		assert.Contains(t, m, want)
	}
	var snap analytics.Snapshot
	require.NoError(t, json.Unmarshal([]byte(fetch(t, adminURL+"/limits?format=json")), &snap))
	var names []string
	for _, rule := range snap.Rules {
		names = append(names, rule.Rule)
	}
	assert.Equal(t, []string{"trial", "per-client", "per-peer"}, names, "the rules file's order, then the per-peer limit")
	assert.Contains(t, fetch(t, adminURL+"/limits"), `<svg class="heatmap" data-kind="requests"`)
}

// getAuth sends a GET to url with the Authorization header auth (none when
// empty) and returns the status and body.
func getAuth(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestAdminAddr: a port alone binds loopback; a host is kept; whether the
// address may be public decides the warning.
func TestAdminAddr(t *testing.T) {
	for _, tt := range []struct {
		in, addr string
		public   bool
		err      string
	}{
		{in: ":9090", addr: "127.0.0.1:9090"},
		{in: ":0", addr: "127.0.0.1:0"},
		{in: "127.0.0.1:9090", addr: "127.0.0.1:9090"},
		{in: "127.0.0.2:9090", addr: "127.0.0.2:9090"},
		{in: "[::1]:9090", addr: "[::1]:9090"},
		{in: "localhost:9090", addr: "localhost:9090"},
		{in: "0.0.0.0:9090", addr: "0.0.0.0:9090", public: true},
		{in: "[::]:9090", addr: "[::]:9090", public: true},
		{in: "192.0.2.7:9090", addr: "192.0.2.7:9090", public: true},
		{in: "admin.example:9090", addr: "admin.example:9090", public: true},
		{in: "9090", err: `-admin "9090": want [host]:port`},
	} {
		addr, public, err := adminAddr(tt.in)
		if tt.err != "" {
			require.Error(t, err, tt.in)
			assert.Contains(t, err.Error(), tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.addr, addr, tt.in)
		assert.Equal(t, tt.public, public, tt.in)
	}
}

// TestAdminListenWarnsWhenPublic: -admin on every interface is logged at
// WARN, saying whether a token protects it; on loopback nothing is said.
func TestAdminListenWarnsWhenPublic(t *testing.T) {
	for _, tt := range []struct {
		admin, token, want string
	}{
		{":0", "", ""},
		{"127.0.0.1:0", "", ""},
		{"0.0.0.0:0", "", "without a token"},
		{"0.0.0.0:0", "s3cret", "protected by the bearer token"},
	} {
		var logs logBuffer
		ln, err := listenAdmin(config{admin: tt.admin, adminToken: tt.token}, newLogger(config{log: -8}, &logs))
		require.NoError(t, err, tt.admin)
		if tt.admin == ":0" {
			assert.True(t, strings.HasPrefix(ln.Addr().String(), "127.0.0.1:"), "a port alone is loopback: %s", ln.Addr())
		}
		ln.Close()
		warned := logs.lines("level=WARN")
		if tt.want == "" {
			assert.Empty(t, warned, tt.admin)
			continue
		}
		require.Len(t, warned, 1, tt.admin)
		assert.Contains(t, warned[0], tt.want)
	}
}

// TestAdminPages: / lists the pages; with a token /metrics and /limits
// answer 401 without it (or with a wrong one) and 200 with it, while
// /healthz and /readyz, for probes, need none; without a token every page
// is open. The token comes from the flag or the environment.
func TestAdminPages(t *testing.T) {
	const token = "s3cret"
	for _, tt := range []struct {
		name  string
		args  []string
		env   string
		token string // the one the server wants, "" for none
	}{
		{"no token", nil, "", ""},
		{"flag", []string{"-admin-token", token}, "", token},
		{"environment", nil, token, token},
		{"flag over environment", []string{"-admin-token", token}, "other", token},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(adminTokenEnv, tt.env)
			args := append([]string{"-addr", "127.0.0.1:0", "-admin", ":0", "-dir", newTestDir(t)}, tt.args...)
			r := startRun(t, args, limiterOptions(newFakeClock())...)
			require.True(t, strings.HasPrefix(r.admin, "http://127.0.0.1:"), r.admin)

			code, body := getAuth(t, r.admin+"/", "")
			assert.Equal(t, http.StatusOK, code)
			for _, p := range adminPages {
				assert.Contains(t, body, `<a href="`+strings.ReplaceAll(p.Path, "?", "?")+`">`, "/ lists %s", p.Path)
			}
			code, _ = getAuth(t, r.admin+"/nothing", "")
			assert.Equal(t, http.StatusNotFound, code)

			for _, page := range []string{"/metrics", "/limits", "/limits?format=json"} {
				code, _ := getAuth(t, r.admin+page, "")
				if tt.token == "" {
					assert.Equal(t, http.StatusOK, code, page)
					continue
				}
				assert.Equal(t, http.StatusUnauthorized, code, page)
				code, _ = getAuth(t, r.admin+page, "Bearer wrong")
				assert.Equal(t, http.StatusUnauthorized, code, page)
				code, _ = getAuth(t, r.admin+page, "Bearer "+tt.token)
				assert.Equal(t, http.StatusOK, code, page)
			}
			code, body = getAuth(t, r.admin+"/healthz", "")
			assert.Equal(t, http.StatusOK, code)
			assert.Equal(t, "ok\n", body)
			code, body = getAuth(t, r.admin+"/readyz", "")
			assert.Equal(t, http.StatusOK, code)
			assert.Equal(t, "limiter: ok\n", body)
		})
	}
}

// TestAdminTokenFlagErrors: a token without -admin, or with spaces, is
// refused.
func TestAdminTokenFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"-admin-token", "x"}, "", "-admin-token (or " + adminTokenEnv + ") without -admin"},
		{nil, "x", "-admin-token (or " + adminTokenEnv + ") without -admin"},
		{[]string{"-admin", ":0", "-admin-token", "a b"}, "", "-admin-token: a token of visible characters"},
	} {
		t.Setenv(adminTokenEnv, tt.env)
		_, err := parseFlags(tt.args, io.Discard)
		require.Error(t, err, "%q", tt.args)
		assert.Contains(t, err.Error(), tt.want)
	}
}

// TestAdminReadyz: /readyz is 200 while every check holds and 503 naming
// the failing one otherwise; the limiter's check fails once it is closed.
func TestAdminReadyz(t *testing.T) {
	lim := startLimiter(t, newFakeClock())
	broken := errors.New("unreachable")
	var extra error
	adm, err := newAdmin(lim, analytics.Config{}, "", readyCheck{"store", func(context.Context) error { return extra }})
	require.NoError(t, err)
	defer adm.close()
	srv := httptest.NewServer(adm.srv.Handler)
	defer srv.Close()
	for _, tt := range []struct {
		name  string
		setup func()
		code  int
		body  string
	}{
		{"all ready", func() {}, http.StatusOK, "limiter: ok\nstore: ok\n"},
		{"store down", func() { extra = broken }, http.StatusServiceUnavailable, "limiter: ok\nstore: not ready: unreachable\n"},
		{"store back", func() { extra = nil }, http.StatusOK, "limiter: ok\nstore: ok\n"},
		{"limiter closed", func() { require.NoError(t, lim.Close()) }, http.StatusServiceUnavailable, "limiter: not ready: actorlimit: limiter is closed\nstore: ok\n"},
	} {
		tt.setup()
		code, body := getAuth(t, srv.URL+"/readyz", "")
		assert.Equal(t, tt.code, code, tt.name)
		assert.Equal(t, tt.body, body, tt.name)
	}
}

// TestAdminMetricsLint: every metric of the admin registry (the
// collector's with each kind of rule, Go's, the process's, build info)
// passes client_golang's lint, the checks of promtool check metrics.
func TestAdminMetricsLint(t *testing.T) {
	col, err := metrics.New(metrics.Config{})
	require.NoError(t, err)
	lim := startLimiter(t, newFakeClock())
	col.SetLimiter(lim)
	_, err = col.WrapLimiter(lim).CheckRate("192.0.2.1", 1000, 1)
	require.NoError(t, err)
	observe([]httpadapter.Observer{col}, "192.0.2.1", actorlimit.Result{Allowed: true, Limit: 1}, nil)
	reg, err := newRegistry(col)
	require.NoError(t, err)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
	n, err := testutil.GatherAndCount(reg, "go_goroutines", "process_start_time_seconds", "go_build_info", "actorlimit_check_duration_seconds")
	require.NoError(t, err)
	assert.Equal(t, 4, n)
}

// slogLine is a line of the default text handler.
var slogLine = regexp.MustCompile(`^time=\S+ level=(DEBUG|INFO|WARN|ERROR) msg=`)

// TestProcessStderrIsSlogOnly runs the example as a process (this test
// binary, re-executed as main): everything on its real stderr, the actor
// system's start and the shutdown included, is a line of the app's slog
// text logger; nothing reaches it unformatted.
func TestProcessStderrIsSlogOnly(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-demo", "-dir", newTestDir(t))
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr:\n%s", stderr.String())
	assert.Contains(t, stdout.String(), "demo: 5 allowed, 3 refused")
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	for _, l := range lines {
		assert.Regexp(t, slogLine, l)
	}
	assert.Contains(t, stderr.String(), `level=INFO msg="actor system started"`)
	assert.Contains(t, stderr.String(), `level=INFO msg="mochi-like: limiter closed"`)
}
