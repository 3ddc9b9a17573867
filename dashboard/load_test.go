package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

const botIP = "203.0.113.66"

// drive runs a mixed load through a real limiter and the middleware, with
// the analytics observing, over slots 10 s slots of a fake clock: 40
// normal clients making 0 to 3 requests a slot, and one bot making 60 a
// slot. Rules: "per-ip", 100 a minute per client IP, blocking; and
// "api-watch", 20 a minute per IP on /api/, monitoring; the analytics
// list them in that order, the rule set's (SetOrder), as an application
// does.
func drive(t *testing.T, slots int) (*analytics.Analytics, *testkit.Clock) {
	t.Helper()
	clk := testkit.NewClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	lim, err := actorlimit.Start(actorlimit.WithClock(clk), actorlimit.WithJanitor(0, 0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	an, err := analytics.New(analytics.Config{Clock: clk})
	require.NoError(t, err)
	perMinute := func(n int64) actorlimit.Policy {
		return actorlimit.Policy{Algorithm: actorlimit.SlidingWindow, Limit: n, Period: time.Minute}
	}
	m, err := httpadapter.New(lim, httpadapter.Config{
		Rules: []httpadapter.Rule{
			{Name: "per-ip", GroupBy: []string{"ip"}, Policy: perMinute(100)},
			{Name: "api-watch", When: []httpadapter.Condition{httpadapter.PathPrefix("/api/")}, GroupBy: []string{"ip"},
				Policy: perMinute(20), Action: httpadapter.Action{Kind: httpadapter.Monitor}},
		},
		Observers: []httpadapter.Observer{an},
	})
	require.NoError(t, err)
	an.SetOrder("per-ip", "api-watch")
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	hit := func(ip, path string) {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.RemoteAddr = ip + ":5000"
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	for s := range slots {
		for c := range 40 {
			for range (c + s) % 4 {
				hit(fmt.Sprintf("198.51.100.%d", c+1), "/api/items")
			}
		}
		for range 60 {
			hit(botIP, "/api/search")
		}
		clk.Advance(10 * time.Second)
	}
	clk.Advance(-5 * time.Second) // the middle of the last slot driven
	return an, clk
}
