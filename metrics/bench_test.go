package metrics_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/metrics"
)

type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkMiddleware is the cost of the collector per request: the
// middleware over a real limiter, one per-IP rule, 1000 client IPs, with
// no collector, with the collector as observer only, and with it also
// timing each limiter call (Wrap: two clock readings a request).
func BenchmarkMiddleware(b *testing.B) {
	for _, mode := range []string{"off", "observe", "observe+wrap"} {
		b.Run("metrics="+mode, func(b *testing.B) {
			lim, err := actorlimit.Start(actorlimit.WithJanitor(0, 0))
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			col, err := metrics.New(metrics.Config{})
			if err != nil {
				b.Fatal(err)
			}
			cfg := httpadapter.Config{Rules: []httpadapter.Rule{{Name: "ip", GroupBy: []string{"ip"},
				Policy: actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: math.MaxInt64 / 2, Period: time.Minute}}}}
			var l httpadapter.Limiter = lim
			if mode != "off" {
				cfg.Observers = []httpadapter.Observer{col}
			}
			if mode == "observe+wrap" {
				l = col.Wrap(lim)
			}
			m, err := httpadapter.New(l, cfg)
			if err != nil {
				b.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			reqs := make([]*http.Request, 1000)
			for i := range reqs {
				reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
				reqs[i].RemoteAddr = fmt.Sprintf("10.0.%d.%d:4000", i>>8, i&255)
			}
			w := &nopWriter{h: http.Header{}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				clear(w.h)
				h.ServeHTTP(w, reqs[i%len(reqs)])
			}
		})
	}
}

// BenchmarkCheckRate is the cost of timing an application's own check:
// CheckRate on a real limiter, 1000 ids, directly and through
// WrapLimiter (two clock readings and a histogram observation a call).
func BenchmarkCheckRate(b *testing.B) {
	for _, mode := range []string{"direct", "wrapped"} {
		b.Run("call="+mode, func(b *testing.B) {
			lim, err := actorlimit.Start(actorlimit.WithJanitor(0, 0))
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			col, err := metrics.New(metrics.Config{})
			if err != nil {
				b.Fatal(err)
			}
			var c interface {
				CheckRate(id string, scaleMs, limit int64) (actorlimit.Result, error)
			} = lim
			if mode == "wrapped" {
				c = col.WrapLimiter(lim)
			}
			ids := make([]string, 1000)
			for i := range ids {
				ids[i] = fmt.Sprintf("10.0.%d.%d", i>>8, i&255)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := c.CheckRate(ids[i%len(ids)], 60_000, math.MaxInt64/2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
