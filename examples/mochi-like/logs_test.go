package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

// logBuffer is the stderr of a run: written by its goroutines, read by the
// test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines logged so far that contain substr.
func (b *logBuffer) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for l := range strings.Lines(b.buf.String()) {
		if strings.Contains(l, substr) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// running is the example serving in the background for a test.
type running struct {
	url   string // the file server's, ending in "/"
	admin string // the admin server's, with -admin
	logs  *logBuffer
}

// startRun runs the example with args and opts until the test ends, once
// it serves.
func startRun(t *testing.T, args []string, opts ...actorlimit.Option) running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	r := running{logs: &logBuffer{}}
	errc := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw, r.logs, opts...)
		pw.Close()
		errc <- err
	}()
	t.Cleanup(func() {
		cancel()
		go func() { _, _ = io.Copy(io.Discard, pr) }() // the lines printed at the end
		assert.NoError(t, <-errc)
	})
	lines := bufio.NewScanner(pr)
	for r.url == "" && lines.Scan() {
		for _, f := range strings.Fields(lines.Text()) {
			f = strings.TrimSuffix(f, ",")
			switch {
			case strings.HasPrefix(lines.Text(), "admin:") && strings.HasSuffix(f, "/metrics"):
				r.admin = strings.TrimSuffix(f, "/metrics")
			case strings.HasPrefix(lines.Text(), "serving") && strings.HasPrefix(f, "http://"):
				r.url = f
			}
		}
	}
	require.NotEmpty(t, r.url, "the example did not say where it serves")
	return r
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestRunLogsStateChangesOnce: the example gives its logger to the limiter
// and to the middleware, and logs its own per-peer limit's failures, each
// once per state change. The limiter fails while the fake clock is broken
// (reading it panics): every request meets the failure, each component
// says so once, and once that it works again.
func TestRunLogsStateChangesOnce(t *testing.T) {
	clock := newFakeClock()
	r := startRun(t, []string{"-addr", "127.0.0.1:0", "-dir", newTestDir(t), "-limit", "100", "-rules", "rules.yaml"},
		limiterOptions(clock)...)
	assert.Len(t, r.logs.lines(`level=INFO msg="actor system started"`), 1, "the limiter's logger")
	assert.Equal(t, http.StatusOK, status(t, r.url+testFile))

	clock.Break(true)
	for range 3 {
		assert.Equal(t, http.StatusServiceUnavailable, status(t, r.url+testFile),
			"the rules fail open, the per-peer limit answers 503")
	}
	clock.Break(false)
	for range 2 {
		assert.Equal(t, http.StatusOK, status(t, r.url+testFile))
	}

	assert.NotEmpty(t, r.logs.lines(`level=WARN msg="actorlimit: limiter restarting"`), "the limiter's restarts")
	for _, want := range []string{
		`level=WARN msg="httpadapter: the limiter fails; requests pass (fail open)`,
		`level=INFO msg="httpadapter: the limiter answers again"`,
		`level=WARN msg="mochi-like: the limiter fails; answering 503`,
		`level=INFO msg="mochi-like: the limiter answers again"`,
	} {
		assert.Len(t, r.logs.lines(want), 1, "%s\nlogged:\n%s", want, strings.Join(r.logs.lines(""), "\n"))
	}
}

// TestRunLogFlag: text at INFO and up by default, -log sets the lowest
// level, -log off silences everything.
func TestRunLogFlag(t *testing.T) {
	for _, tt := range []struct {
		flag     []string
		wantInfo bool
	}{
		{nil, true},
		{[]string{"-log", "debug"}, true},
		{[]string{"-log", "warn"}, false},
		{[]string{"-log", "off"}, false},
	} {
		var logs logBuffer
		args := append([]string{"-demo", "-limit", "1", "-dir", newTestDir(t)}, tt.flag...)
		require.NoError(t, run(t.Context(), args, io.Discard, &logs, limiterOptions(newFakeClock())...))
		if tt.wantInfo {
			assert.Len(t, logs.lines(`level=INFO msg="actor system started"`), 1, "%q", tt.flag)
		} else {
			assert.Empty(t, logs.lines(""), "%q", tt.flag)
		}
	}
	err := run(t.Context(), []string{"-log", "loud"}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid value "loud" for flag -log`)
}
