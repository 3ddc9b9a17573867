package httpadapter_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// discardWriter is a ResponseWriter that keeps nothing but its header map,
// cleared for every request, so the benchmark measures the middleware.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// benchRules returns n rules, every one matching the benchmark's requests,
// with limits never reached.
func benchRules(n int) []httpadapter.Rule {
	p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: math.MaxInt64 / 2, Period: time.Minute}
	all := []httpadapter.Rule{
		{Name: "ip", GroupBy: []string{"ip"}, Policy: p},
		{Name: "ip-host", When: []httpadapter.Condition{httpadapter.Method("GET", "POST")}, GroupBy: []string{"ip", "host"}, Policy: p},
		{Name: "path", When: []httpadapter.Condition{httpadapter.PathPrefix("/api/")}, GroupBy: []string{"ip", "path"}, Policy: p},
		{Name: "ua", When: []httpadapter.Condition{httpadapter.HeaderPresent("User-Agent")}, GroupBy: []string{"header:User-Agent", "host"}, Policy: p},
		{Name: "user", When: []httpadapter.Condition{httpadapter.PathGlob("/api/*/items")}, GroupBy: []string{"query:user", "method"}, Policy: p},
	}
	return all[:n]
}

// benchRequests returns requests from keys different client IPs.
func benchRequests(keys int) []*http.Request {
	rs := make([]*http.Request, keys)
	for i := range rs {
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/v1/items?user=u%d", i%100), nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:40000", i>>16&255, i>>8&255, i&255)
		r.Header.Set("User-Agent", "bench/1.0")
		rs[i] = r
	}
	return rs
}

func benchHandler(b *testing.B, rules int) http.Handler {
	app := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	if rules == 0 {
		return app // the bare handler
	}
	lim := startLimiter(b)
	m, err := httpadapter.New(lim, httpadapter.Config{Rules: benchRules(rules)})
	if err != nil {
		b.Fatal(err)
	}
	return m.Handler(app)
}

const benchKeys = 10000

func BenchmarkMiddleware(b *testing.B) {
	for _, n := range []int{0, 1, 5} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			h := benchHandler(b, n)
			reqs := benchRequests(benchKeys)
			if len(reqs) == 0 {
				b.Fatal("no requests")
			}
			w := &discardWriter{h: http.Header{}}
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
	for _, n := range []int{0, 1, 5} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			h := benchHandler(b, n)
			reqs := benchRequests(benchKeys)
			if len(reqs) == 0 {
				b.Fatal("no requests")
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

// BenchmarkAdapterOnly measures the middleware alone: its limiter answers
// at once and allocates nothing.
func BenchmarkAdapterOnly(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			m, err := httpadapter.New(allowAll{}, httpadapter.Config{Rules: benchRules(n)})
			if err != nil {
				b.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			reqs := benchRequests(benchKeys)
			if len(reqs) == 0 {
				b.Fatal("no requests")
			}
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				clear(w.h)
				h.ServeHTTP(w, reqs[i%len(reqs)])
			}
		})
	}
}

// BenchmarkAdapterOnlySecret measures what hashing a secret grouping value
// costs: one rule grouped by a 47-byte token, kept as it is (X-Token) or
// hashed (Authorization), on a limiter that answers at once.
func BenchmarkAdapterOnlySecret(b *testing.B) {
	for _, c := range []struct{ value, header string }{{"clear", "X-Token"}, {"secret", "Authorization"}} {
		b.Run("value="+c.value, func(b *testing.B) {
			m, err := httpadapter.New(allowAll{}, httpadapter.Config{Rules: []httpadapter.Rule{{
				Name: "token", GroupBy: []string{"header:" + c.header}, Policy: actorlimit.Policy{Limit: 1 << 40, Period: time.Minute}}}})
			if err != nil {
				b.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			reqs := benchRequests(benchKeys)
			if len(reqs) == 0 {
				b.Fatal("no requests")
			}
			for i, r := range reqs {
				r.Header.Set(c.header, fmt.Sprintf("Bearer eyJhbGciOiJIUzI1NiJ9.token-%08d", i))
			}
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				clear(w.h)
				h.ServeHTTP(w, reqs[i%len(reqs)])
			}
		})
	}
}
