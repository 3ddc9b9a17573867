package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// fakeClock is testkit's clock, moved only when the test says so, that
// can be broken: while broken, reading it panics, and the limiter that
// reads it fails.
type fakeClock struct {
	*testkit.Clock
	broken atomic.Bool
}

func (c *fakeClock) Now() time.Time {
	if c.broken.Load() {
		panic("fake clock broken by the test")
	}
	return c.Clock.Now()
}

func (c *fakeClock) Break(broken bool) { c.broken.Store(broken) }

const (
	testFile = "hello.txt"
	testBody = "hello from mochi-like\n"
	// testScaleMs is the tests' window: 30 s, as in the article.
	testScaleMs = 30000
)

// newFakeClock returns a clock 20.25 s into a 30 s window, so 9.75 s are
// left in it: a Retry-After of 10 once rounded up.
func newFakeClock() *fakeClock {
	windowStart := time.UnixMilli(56_666_667 * testScaleMs)
	return &fakeClock{Clock: testkit.NewClock(windowStart.Add(20250 * time.Millisecond))}
}

// quiet is the logger of the tests that do not look at the logs.
var quiet = slog.New(slog.DiscardHandler)

// newTestDir returns a temporary folder holding testFile.
func newTestDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, testFile), []byte(testBody), 0o644))
	return dir
}

// limiterOptions are the options of the tests' limiters: the fake clock.
func limiterOptions(clock *fakeClock) []actorlimit.Option {
	return []actorlimit.Option{actorlimit.WithClock(clock)}
}

func startLimiter(t *testing.T, clock *fakeClock) *actorlimit.Limiter {
	t.Helper()
	lim, err := actorlimit.Start(limiterOptions(clock)...)
	require.NoError(t, err)
	t.Cleanup(func() { lim.Close() })
	return lim
}

// step is one request of a stateful sequence.
type step struct {
	name    string
	advance time.Duration // moves the fake clock before the request
	// from is the RemoteAddr of a request made by calling the handler
	// directly; "" sends it over the test server, from 127.0.0.1.
	from           string
	wantStatus     int
	wantRetryAfter string // "" when the header must be absent
	wantBody       string
}

type rig struct {
	clock   *fakeClock
	handler http.Handler
	server  *httptest.Server
}

func (r rig) do(t *testing.T, i int, s step) {
	t.Helper()
	r.clock.Advance(s.advance)
	var (
		status int
		header http.Header
		body   string
	)
	if s.from == "" {
		resp, err := r.server.Client().Get(r.server.URL + "/" + testFile)
		require.NoError(t, err, "step %d (%s)", i, s.name)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err, "step %d (%s)", i, s.name)
		status, header, body = resp.StatusCode, resp.Header, string(b)
	} else {
		req := httptest.NewRequest(http.MethodGet, "/"+testFile, nil)
		req.RemoteAddr = s.from
		rec := httptest.NewRecorder()
		r.handler.ServeHTTP(rec, req)
		status, header, body = rec.Code, rec.Header(), rec.Body.String()
	}
	assert.Equal(t, s.wantStatus, status, "step %d (%s): status", i, s.name)
	assert.Equal(t, s.wantRetryAfter, header.Get("Retry-After"), "step %d (%s): Retry-After", i, s.name)
	assert.Equal(t, s.wantBody, body, "step %d (%s): body", i, s.name)
	if status != http.StatusOK {
		assert.True(t, strings.HasPrefix(header.Get("Content-Type"), "text/plain"),
			"step %d (%s): Content-Type %q", i, s.name, header.Get("Content-Type"))
	}
}

func TestHandlerLimitsEachPeer(t *testing.T) {
	clock := newFakeClock()
	lim := startLimiter(t, clock)
	root, err := os.OpenRoot(newTestDir(t))
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	h := newHandler(lim, root.FS(), testScaleMs, 3, quiet)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	r := rig{clock: clock, handler: h, server: srv}

	over := overLimitMessage + "\n"
	steps := []step{
		{name: "hit 1", wantStatus: 200, wantBody: testBody},
		{name: "hit 2", wantStatus: 200, wantBody: testBody},
		{name: "hit 3", wantStatus: 200, wantBody: testBody},
		{name: "hit 4 is over the limit", wantStatus: 413, wantRetryAfter: "10", wantBody: over},
		{name: "same IP, other port", from: "127.0.0.1:40000", wantStatus: 413, wantRetryAfter: "10", wantBody: over},
		{name: "second peer is counted apart", from: "192.0.2.7:5555", wantStatus: 200, wantBody: testBody},
		{name: "IPv6 peer is counted apart", from: "[2001:db8::1]:443", wantStatus: 200, wantBody: testBody},
		{name: "1 ms left rounds up to 1 s", advance: 9749 * time.Millisecond, wantStatus: 413, wantRetryAfter: "1", wantBody: over},
		{name: "next window lets it through", advance: time.Millisecond, wantStatus: 200, wantBody: testBody},
	}
	for i, s := range steps {
		r.do(t, i, s)
	}
}

func TestHandlerLimitZeroHasNoRetryAfter(t *testing.T) {
	lim := startLimiter(t, newFakeClock())
	h := newHandler(lim, os.DirFS(newTestDir(t)), testScaleMs, 0, quiet)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+testFile, nil))
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	assert.NotContains(t, rec.Header(), "Retry-After")
	assert.Equal(t, overLimitMessage+"\n", rec.Body.String())
}

func TestHandlerClosedLimiterAnswers503(t *testing.T) {
	lim := startLimiter(t, newFakeClock())
	h := newHandler(lim, os.DirFS(newTestDir(t)), testScaleMs, 3, quiet)
	require.NoError(t, lim.Close())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+testFile, nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, unavailableMessage+"\n", rec.Body.String())
}

func TestPeerIP(t *testing.T) {
	tests := []struct{ remoteAddr, want string }{
		{"192.0.2.1:5555", "192.0.2.1"},
		{"[2001:db8::1]:443", "2001:db8::/64"},
		{"[2001:db8::ffff:1:2]:443", "2001:db8::/64"}, // one /64, one group
		{"[2001:db8:0:1::1]:443", "2001:db8:0:1::/64"},
		{"[fe80::1%eth0]:443", "fe80::/64"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"192.0.2.1", "192.0.2.1"}, // no port: the whole address
		{"2001:db8::7", "2001:db8::/64"},
		{"pipe", "pipe"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, peerIP(tt.remoteAddr), "peerIP(%q)", tt.remoteAddr)
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		d      time.Duration
		want   string
		wantOK bool
	}{
		{0, "0", true},
		{time.Nanosecond, "1", true},
		{time.Second, "1", true},
		{time.Second + time.Millisecond, "2", true},
		{9750 * time.Millisecond, "10", true},
		{actorlimit.Never, "", false},
	}
	for _, tt := range tests {
		got, ok := retryAfter(tt.d)
		assert.Equal(t, tt.want, got, "retryAfter(%v)", tt.d)
		assert.Equal(t, tt.wantOK, ok, "retryAfter(%v) ok", tt.d)
	}
}

func TestRunDemo(t *testing.T) {
	refused := "413 Request Entity Too Large, Retry-After: 10"
	never := "413 Request Entity Too Large, no Retry-After: no wait helps"
	tests := []struct {
		name string
		args []string
		want string
	}{{
		name: "default demo limit",
		args: []string{"-demo"},
		want: "demo: limit 5 per 30000 ms per peer IP; sending 8 requests\n" +
			"request 1: 200 OK\nrequest 2: 200 OK\nrequest 3: 200 OK\n" +
			"request 4: 200 OK\nrequest 5: 200 OK\n" +
			"request 6: " + refused + "\nrequest 7: " + refused + "\nrequest 8: " + refused + "\n" +
			"demo: 5 allowed, 3 refused\n",
	}, {
		name: "explicit limit",
		args: []string{"-demo", "-limit", "1"},
		want: "demo: limit 1 per 30000 ms per peer IP; sending 4 requests\n" +
			"request 1: 200 OK\n" +
			"request 2: " + refused + "\nrequest 3: " + refused + "\nrequest 4: " + refused + "\n" +
			"demo: 1 allowed, 3 refused\n",
	}, {
		name: "limit 0 refuses for ever",
		args: []string{"-demo", "-limit", "0", "-scale", "1000"},
		want: "demo: limit 0 per 1000 ms per peer IP; sending 3 requests\n" +
			"request 1: " + never + "\nrequest 2: " + never + "\nrequest 3: " + never + "\n" +
			"demo: 0 allowed, 3 refused\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			args := slices.Concat(tt.args, []string{"-dir", newTestDir(t)})
			err := run(t.Context(), args, &out, io.Discard, limiterOptions(newFakeClock())...)
			require.NoError(t, err)
			assert.Equal(t, tt.want, out.String())
		})
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	args := []string{"-addr", "127.0.0.1:0", "-dir", newTestDir(t), "-limit", "1"}
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw, io.Discard, limiterOptions(newFakeClock())...)
		pw.Close()
		errc <- err
	}()
	lines := bufio.NewScanner(pr)
	require.True(t, lines.Scan(), "no first line")
	var url string
	for _, f := range strings.Fields(lines.Text()) {
		if strings.HasPrefix(f, "http://") {
			url = f
		}
	}
	require.NotEmpty(t, url, "no URL in %q", lines.Text())
	assert.Contains(t, lines.Text(), "(limit 1 per 30000 ms per peer IP)")

	for _, want := range []int{http.StatusOK, http.StatusRequestEntityTooLarge} {
		resp, err := http.Get(url + testFile)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode)
	}
	cancel()
	require.True(t, lines.Scan(), "no second line")
	assert.Equal(t, "shutting down", lines.Text())
	assert.False(t, lines.Scan(), "unexpected line %q", lines.Text())
	assert.NoError(t, <-errc)
}

func TestRunBadFlags(t *testing.T) {
	file := filepath.Join(newTestDir(t), testFile)
	badRules := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(badRules, []byte("rules:\n  - name: x\n    policy:\n      limt: 1\n"), 0o644))
	geoRules := filepath.Join(t.TempDir(), "geo.yaml")
	require.NoError(t, os.WriteFile(geoRules, []byte("rules:\n  - name: geo\n    when: [{country: [RU]}]\n    policy: {limit: 1, period: 1s}\n"), 0o644))
	emptyRules := filepath.Join(t.TempDir(), "empty.yaml")
	require.NoError(t, os.WriteFile(emptyRules, nil, 0o644))
	noRules := filepath.Join(t.TempDir(), "none.yaml")
	require.NoError(t, os.WriteFile(noRules, []byte("rules: []\n"), 0o644))
	shortKey := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(shortKey, []byte("short\n\n"), 0o600))
	tests := []struct {
		args []string
		want string // a part of the error
	}{
		{[]string{"-limit", "-1"}, "-limit -1: must not be negative"},
		{[]string{"-limit", "many"}, "-limit"},
		{[]string{"-scale", "0"}, "-scale 0"},
		{[]string{"-scale", "-5"}, "-scale -5"},
		{[]string{"-scale", "9223372036855"}, "-scale 9223372036855"},
		{[]string{"-demo", "-limit", "1001"}, "-limit 1001"},
		{[]string{"-addr", ""}, "-addr is empty"},
		{[]string{"-addr", "nonsense"}, "-addr"},
		{[]string{"-dir", ""}, "-dir is empty"},
		{[]string{"-dir", filepath.Join(t.TempDir(), "missing")}, "-dir"},
		{[]string{"-dir", file}, "-dir"},
		{[]string{"-addr", "127.0.0.1:0", "-admin", "nonsense"}, `-admin "nonsense": want [host]:port`},
		{[]string{"-addr", "127.0.0.1:0", "-admin", "256.0.0.1:0"}, "-admin: listen tcp"},
		{[]string{"-demo", "-admin", "127.0.0.1:0"}, "-admin: not with -demo"},
		{[]string{"-nosuchflag"}, "nosuchflag"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-rules", filepath.Join(t.TempDir(), "missing.yaml")}, "-rules"},
		{[]string{"-rules", badRules}, `-rules: httpadapter: invalid configuration: ` + badRules + ` line 4: rule "x": policy.limt: unknown field`},
		{[]string{"-rules", geoRules}, `-rules: httpadapter: invalid configuration: ` + geoRules + ` line 2: rule "geo" uses a country condition (when[0]) but this server has no country lookup`},
		{[]string{"-rules", emptyRules}, `-rules: httpadapter: invalid configuration: ` + emptyRules + `: no "rules" key`},
		{[]string{"-rules", noRules}, `-rules: httpadapter: invalid configuration: no rules`},
		{[]string{"-secret-key-file", filepath.Join(t.TempDir(), "missing")}, "-secret-key-file: open"},
		{[]string{"-secret-key-file", shortKey}, "-secret-key-file " + shortKey + ": the key is 5 bytes, fewer than the 16 wanted"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		// A folder that exists, unless the case gives its own -dir (the
		// default is relative to the repository's root).
		args := append([]string{"-dir", filepath.Dir(file)}, tt.args...)
		err := run(t.Context(), args, &out, io.Discard)
		if assert.Error(t, err, "args %q", tt.args) {
			assert.Contains(t, err.Error(), tt.want, "args %q", tt.args)
		}
		assert.Empty(t, out.String(), "args %q: output", tt.args)
	}
}

// TestRunHelp: -h lists the flags, and never prints the admin token that
// the environment gives.
func TestRunHelp(t *testing.T) {
	const token = "tok-3f9a2c-never-printed"
	t.Setenv(adminTokenEnv, token)
	var out bytes.Buffer
	err := run(t.Context(), []string{"-h"}, &out, io.Discard)
	assert.True(t, errors.Is(err, flag.ErrHelp), "err = %v", err)
	for _, name := range []string{"-addr", "-dir", "-scale", "-limit", "-demo", "-rules", "-admin-token"} {
		assert.Contains(t, out.String(), name)
	}
	assert.NotContains(t, out.String(), token)
}

// TestRunDemoWithRules runs the demo with the example's rules file: its
// monitor rule counts, its block rule answers 429 before the per-peer limit
// is reached, and the output says so: the rules first, then the per-peer
// limit as what applies after them.
func TestRunDemoWithRules(t *testing.T) {
	var out bytes.Buffer
	args := []string{"-demo", "-rules", "rules.yaml", "-dir", newTestDir(t)}
	err := run(t.Context(), args, &out, io.Discard, limiterOptions(newFakeClock())...)
	require.NoError(t, err)
	ok := func(r int) string { return fmt.Sprintf(`200 OK, RateLimit: "per-client";r=%d;t=10`, r) }
	blocked := `429 Too Many Requests, Retry-After: 10, RateLimit: "per-client";r=0;t=10`
	assert.Equal(t, "rules of rules.yaml, checked before the per-peer limit:\n"+
		"  trial: 3 per 30s per ip (fixed_window); over it: counted only (monitor)\n"+
		"  per-client: 4 per 30s per ip (fixed_window), when method in [\"GET\"]; over it: 429 (block)\n"+
		"demo: after the rules, limit 5 per 30000 ms per peer IP; sending 8 requests\n"+
		"request 1: "+ok(3)+"\nrequest 2: "+ok(2)+"\nrequest 3: "+ok(1)+"\nrequest 4: "+ok(0)+"\n"+
		"request 5: "+blocked+"\nrequest 6: "+blocked+"\nrequest 7: "+blocked+"\nrequest 8: "+blocked+"\n"+
		"demo: 4 allowed, 4 refused\n"+
		"rule trial: matched 8, allowed 3, blocked 0, monitored 5, shadowed 0, errors 0\n"+
		"rule per-client: matched 8, allowed 4, blocked 4, monitored 0, shadowed 0, errors 0\n", out.String())
}

func TestDescribeRule(t *testing.T) {
	tests := []struct {
		rule httpadapter.Rule
		want string
	}{{
		httpadapter.Rule{Name: "all", Policy: actorlimit.Policy{Limit: 100, Period: time.Hour}},
		"all: 100 per 1h for all requests together (fixed_window); over it: 429 (block)",
	}, {
		httpadapter.Rule{
			Name:    "api",
			When:    []httpadapter.Condition{httpadapter.PathPrefix("/api/"), httpadapter.HeaderPresent("X-Internal").Not()},
			GroupBy: []string{"ip", "header:Authorization"},
			Policy:  actorlimit.Policy{Algorithm: actorlimit.TokenBucket, Limit: 10, Period: 90 * time.Second, Burst: 20},
			Action:  httpadapter.Action{Status: http.StatusRequestEntityTooLarge},
		},
		`api: 10 per 1m30s per ip and header:Authorization (token_bucket, burst 20), when path prefix "/api/" and not header X-Internal present; over it: 413 (block)`,
	}, {
		httpadapter.Rule{Name: "spam", Policy: actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1, Period: 1500 * time.Millisecond},
			Action: httpadapter.Action{Kind: httpadapter.Shadow}},
		"spam: 1 per 1.5s for all requests together (gcra); over it: a fake 200 (shadow)",
	}, {
		httpadapter.Rule{Name: "watch", GroupBy: []string{"ip"}, Policy: actorlimit.Policy{Limit: 3, Period: 26 * time.Hour},
			Action: httpadapter.Action{Kind: httpadapter.Monitor}},
		"watch: 3 per 26h per ip (fixed_window); over it: counted only (monitor)",
	}}
	for _, tt := range tests {
		assert.Equal(t, tt.want, describeRule(tt.rule))
	}
}

// TestReadSecretKey: the key of -secret-key-file is the file without its
// trailing newlines, the bytes "$(cat FILE)" gives the documented openssl
// command.
func TestReadSecretKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(p, []byte("0123456789abcdef-key\n\n"), 0o600))
	key, err := readSecretKey(p)
	require.NoError(t, err)
	assert.Equal(t, "0123456789abcdef-key", string(key))
}
