package httpadapter_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// newFrozenClock returns a clock the test holds; it never moves unless
// told, so no window rolls over during a test.
func newFrozenClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
}

func startLimiter(t testing.TB) *actorlimit.Limiter {
	t.Helper()
	lim, err := actorlimit.Start(actorlimit.WithClock(newFrozenClock()), actorlimit.WithJanitor(0, 0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	return lim
}

// TestServerConcurrentClients drives a real server on 127.0.0.1 with many
// concurrent clients, a bounded number of requests each, and checks the
// exact totals.
func TestServerConcurrentClients(t *testing.T) {
	const (
		clients   = 16
		perClient = 40
		limit     = 15  // per client, block
		global    = 500 // all clients, monitor
	)
	lim := startLimiter(t)
	m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{
		{Name: "per-client", GroupBy: []string{"header:X-Client"}, Policy: perMinute(limit)},
		{Name: "all", Policy: perMinute(global), Action: httpadapter.Action{Kind: httpadapter.Monitor}},
	}})
	var handled atomic.Int64
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		handled.Add(1)
		_, _ = io.WriteString(w, "ok")
	})))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: clients},
	}
	defer client.CloseIdleConnections()

	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perClient {
				r, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/", nil)
				if !assert.NoError(t, err) {
					return
				}
				r.Header.Set("X-Client", fmt.Sprint("c", c))
				resp, err := client.Do(r)
				if !assert.NoError(t, err) {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	const total = clients * perClient
	assert.Equal(t, map[int]int{
		http.StatusOK:              clients * limit,
		http.StatusTooManyRequests: total - clients*limit,
	}, codes)
	assert.Equal(t, int64(clients*limit), handled.Load())
	s := m.Stats()
	assert.Equal(t, []httpadapter.RuleStats{
		{Rule: "per-client", Matched: total, Allowed: clients * limit, Blocked: total - clients*limit},
		{Rule: "all", Matched: total, Allowed: global, Monitored: total - global},
	}, s.Rules)
	assert.Zero(t, s.LimiterErrors)
}

// TestRealLimiterClosed checks fail open and fail closed against a real,
// closed limiter.
func TestRealLimiterClosed(t *testing.T) {
	lim := startLimiter(t)
	require.NoError(t, lim.Close())
	for _, closed := range []bool{false, true} {
		m := newMW(t, lim, httpadapter.Config{FailClosed: closed, Rules: []httpadapter.Rule{
			{Name: "r", Policy: perMinute(1)},
		}})
		w := serve(m.Handler(&okHandler{}), req("/"))
		if closed {
			assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		} else {
			assert.Equal(t, http.StatusOK, w.Code)
		}
		assert.Equal(t, uint64(1), m.Stats().Rules[0].Errors)
	}
}

// TestRealLimiterNever checks that a limit no wait can satisfy (Limit 0,
// RetryAfter actorlimit.Never) answers without Retry-After, and that a
// Timeout on the limiter call works with the real limiter.
func TestRealLimiterNever(t *testing.T) {
	lim := startLimiter(t)
	m := newMW(t, lim, httpadapter.Config{Timeout: 5 * time.Second, Rules: []httpadapter.Rule{{Name: "none", Policy: perMinute(0)}}})
	w := serve(m.Handler(&okHandler{}), req("/"))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Empty(t, w.Header().Values("Retry-After"))
	assert.Equal(t, `"none";r=0;t=60`, w.Header().Get("RateLimit"))
	assert.Equal(t, `"none";q=0;w=60`, w.Header().Get("RateLimit-Policy"))
}
