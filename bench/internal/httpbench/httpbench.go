// Package httpbench holds what the HTTP benchmarks of the bench module share
// with its test server (cmd/httpserver): the trivial handler that every
// middleware wraps, and actorlimit's middleware with one rule per client IP.
package httpbench

import (
	"net/http"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// Body is what Handler writes.
var Body = []byte("hello\n")

// Handler returns the handler under every middleware: it answers 200 with
// Body and does nothing else, so that what a benchmark measures on top of
// it is the middleware.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(Body)
	})
}

// Actorlimit returns actorlimit's middleware as a user would configure it
// for one limit per client IP: one block rule, grouped by "ip", with a
// fixed window of limit requests per period, and the default client IP
// (RemoteAddr; no proxy is trusted). lim must be started; the caller closes
// it.
func Actorlimit(lim *actorlimit.Limiter, limit int64, period time.Duration) (func(http.Handler) http.Handler, error) {
	m, err := httpadapter.New(lim, httpadapter.Config{Rules: []httpadapter.Rule{{
		Name:    "per-ip",
		GroupBy: []string{"ip"},
		Policy:  actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: limit, Period: period},
	}}})
	if err != nil {
		return nil, err
	}
	return m.Handler, nil
}
