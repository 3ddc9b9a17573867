package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/redistest"
)

// startServer runs the example with args until the test ends, and returns
// its URL and the first line it printed.
func startServer(t *testing.T, args ...string) (url, first string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw, io.Discard)
		pw.Close()
		errc <- err
	}()
	t.Cleanup(func() {
		cancel()
		go func() { _, _ = io.Copy(io.Discard, pr) }() // the "shutting down" line
		assert.NoError(t, <-errc)
	})
	lines := bufio.NewScanner(pr)
	require.True(t, lines.Scan(), "no first line")
	for _, f := range strings.Fields(lines.Text()) {
		if strings.HasPrefix(f, "http://") {
			url = f
		}
	}
	require.NotEmpty(t, url, "no URL in %q", lines.Text())
	return url, lines.Text()
}

// TestTwoServersShareOneRedis runs two servers of the example, on two
// ports, with -redis on one real redis-server: a peer's requests count
// against one limit across both.
func TestTwoServersShareOneRedis(t *testing.T) {
	srv := redistest.Start(t)
	dir := newTestDir(t)
	// An hour's window, so that Redis's clock does not start a new one
	// during the test.
	args := []string{"-addr", "127.0.0.1:0", "-dir", dir, "-limit", "3", "-scale", "3600000", "-redis", srv.Addr}
	urlA, first := startServer(t, args...)
	urlB, _ := startServer(t, args...)
	require.NotEqual(t, urlA, urlB)
	assert.Contains(t, first, "counted in Redis at "+srv.Addr)
	var codes []int
	for i := range 6 {
		url := urlA
		if i%2 == 1 {
			url = urlB
		}
		resp, err := http.Get(url + testFile)
		require.NoError(t, err)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	assert.Equal(t, []int{200, 200, 200, 413, 413, 413}, codes)
}

// TestRedisFlagErrors: a bad or silent -redis is an error at start.
func TestRedisFlagErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port that accepts and never answers
	require.NoError(t, err)
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusing := closed.Addr().String()
	closed.Close()
	tests := []struct {
		addr, want string
	}{
		{"nonsense", `-redis "nonsense": want host:port`},
		{refusing, "-redis " + refusing + ": no answer"},
		{ln.Addr().String(), "-redis " + ln.Addr().String() + ": no answer"},
	}
	for _, tt := range tests {
		err := run(t.Context(), []string{"-addr", "127.0.0.1:0", "-dir", newTestDir(t), "-redis", tt.addr}, io.Discard, io.Discard)
		if assert.Error(t, err, tt.addr) {
			assert.Contains(t, err.Error(), tt.want)
		}
	}
}

// TestRedisOutageLoggedAndExported: with -redis and -admin, the example
// gives the Redis store its logger and the metrics the store's counters.
// Redis killed under it: the requests are decided by the fallback, the
// outage is logged once however many requests it spans (go-redis's line
// per failed dial goes to DEBUG), /metrics counts it; Redis back: the
// recovery is logged once.
func TestRedisOutageLoggedAndExported(t *testing.T) {
	srv := redistest.Start(t)
	clock := newFakeClock() // moves the store's probe interval, not Redis's windows
	r := startRun(t, []string{"-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-dir", newTestDir(t),
		"-limit", "100", "-redis", srv.Addr, "-log", "debug"}, limiterOptions(clock)...)
	require.NotEmpty(t, r.admin)
	assert.Equal(t, http.StatusOK, status(t, r.url+testFile))
	assert.Contains(t, fetch(t, r.admin+"/metrics"), "actorlimit_store_outages_total 0")
	assert.Equal(t, "limiter: ok\nredis: ok\n", fetch(t, r.admin+"/readyz"))

	srv.Kill()
	for range 3 {
		assert.Equal(t, http.StatusOK, status(t, r.url+testFile), "decided by the fallback")
	}
	m := fetch(t, r.admin+"/metrics")
	for _, want := range []string{
		"actorlimit_store_errors_total 1",
		"actorlimit_store_outages_total 1",
		"actorlimit_store_fallbacks_total 3",
	} {
		assert.Contains(t, m, want)
	}
	code, body := getAuth(t, r.admin+"/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, code, "Redis down: not ready")
	assert.Contains(t, body, "limiter: ok\nredis: not ready: ")
	srv.Restart()
	assert.Equal(t, "limiter: ok\nredis: ok\n", fetch(t, r.admin+"/readyz"), "ready again")
	clock.Advance(time.Second) // past the probe interval: the next check probes
	assert.Equal(t, http.StatusOK, status(t, r.url+testFile))

	for _, want := range []string{
		`level=WARN msg="redisstore: redis unavailable`,
		`level=INFO msg="redisstore: redis answers again"`,
	} {
		assert.Len(t, r.logs.lines(want), 1, "%s\nlogged:\n%s", want, strings.Join(r.logs.lines(""), "\n"))
	}
	assert.NotEmpty(t, r.logs.lines(`level=DEBUG msg="go-redis: `), "go-redis's own lines, at DEBUG, not on the process's stderr")
}
