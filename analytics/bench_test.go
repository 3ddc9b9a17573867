package analytics_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/httpadapter"
)

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// benchMiddleware returns the middleware over a real limiter with one
// per-IP rule, with the analytics as its observer or none, and requests
// from keys client IPs.
func benchMiddleware(b *testing.B, on bool, keys int) (http.Handler, []*http.Request) {
	lim, err := actorlimit.Start(actorlimit.WithJanitor(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lim.Close() })
	cfg := httpadapter.Config{Rules: []httpadapter.Rule{{
		Name: "ip", GroupBy: []string{"ip"},
		Policy: actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: math.MaxInt64 / 2, Period: time.Minute},
	}}}
	if on {
		a, err := analytics.New(analytics.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = a.Close() })
		cfg.Observers = []httpadapter.Observer{a}
	}
	m, err := httpadapter.New(lim, cfg)
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*http.Request, keys)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:40000", i>>16&255, i>>8&255, i&255)
		reqs[i] = r
	}
	if len(reqs) == 0 {
		b.Fatal("no requests")
	}
	return m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })), reqs
}

// BenchmarkMiddleware is the cost of the analytics per request: the
// middleware over a real limiter with them off and on. 1000 keys stay
// within MaxGroups, so every group is tracked.
func BenchmarkMiddleware(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("analytics=%v/keys=1000", on), func(b *testing.B) {
			h, reqs := benchMiddleware(b, on, 1000)
			w := &discardWriter{h: http.Header{}}
			for _, r := range reqs { // every group seen once: the maps are grown
				h.ServeHTTP(w, r)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				clear(w.h)
				h.ServeHTTP(w, reqs[i%len(reqs)])
			}
		})
	}
}

func BenchmarkMiddlewareParallel(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("analytics=%v/keys=1000", on), func(b *testing.B) {
			h, reqs := benchMiddleware(b, on, 1000)
			w0 := &discardWriter{h: http.Header{}}
			for _, r := range reqs {
				h.ServeHTTP(w0, r)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					h.ServeHTTP(w, reqs[next.Add(1)%int64(len(reqs))])
				}
			})
		})
	}
}

// BenchmarkObserve is the analytics alone, per observation.
func BenchmarkObserve(b *testing.B) {
	a, err := analytics.New(analytics.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	groups := make([]string, 1000)
	for i := range groups {
		groups[i] = fmt.Sprintf("10.0.%d.%d", i>>8, i&255)
	}
	for _, g := range groups {
		a.Observe(obs("ip", g, 100, 50))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		a.Observe(obs("ip", groups[i%len(groups)], 100, 50))
	}
}
