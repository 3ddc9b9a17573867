package analytics_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/httpadapter"
)

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// benchMiddleware returns the middleware over a real limiter with one
// per-IP rule, with the analytics as its only observer (on) or no observer
// at all (off), the analytics (nil when off), and requests from keys
// client IPs. Nothing else differs between on and off.
func benchMiddleware(b testing.TB, on bool, keys int) (http.Handler, *analytics.Analytics, []*http.Request) {
	lim, err := actorlimit.Start(actorlimit.WithJanitor(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lim.Close() })
	var a *analytics.Analytics
	cfg := httpadapter.Config{Rules: []httpadapter.Rule{{
		Name: "ip", GroupBy: []string{"ip"},
		Policy: actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: math.MaxInt64 / 2, Period: time.Minute},
	}}}
	if on {
		a, err = analytics.New(analytics.Config{})
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
	return m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })), a, reqs
}

// onOff names the two halves of the A/B, so that benchstat can set them
// side by side: benchstat -col /analytics.
func onOff(on bool) string {
	if on {
		return "analytics=on"
	}
	return "analytics=off"
}

// BenchmarkMiddleware is the cost of the analytics per request, the
// figure the README quotes: the middleware over a real limiter with them
// off and on (BenchmarkMiddleware/analytics=off/keys=1000 against
// .../analytics=on/...; compare with benchstat -col /analytics). 1000 keys
// stay within MaxGroups, so every group is tracked.
func BenchmarkMiddleware(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(onOff(on)+"/keys=1000", func(b *testing.B) {
			h, _, reqs := benchMiddleware(b, on, 1000)
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

// BenchmarkMiddlewareParallel is BenchmarkMiddleware from GOMAXPROCS
// goroutines at once.
func BenchmarkMiddlewareParallel(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(onOff(on)+"/keys=1000", func(b *testing.B) {
			h, _, reqs := benchMiddleware(b, on, 1000)
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

// BenchmarkObserve is the analytics alone, per observation: where the
// time of analytics=on goes, not the cost per request (that is
// BenchmarkMiddleware's A/B).
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

// TestBenchMiddlewareAB checks what the benchmarks compare: with the
// analytics on, they see every request the middleware decides; off, the
// middleware has nothing else to do.
func TestBenchMiddlewareAB(t *testing.T) {
	for _, on := range []bool{false, true} {
		h, a, reqs := benchMiddleware(t, on, 1000)
		require.Len(t, reqs, 1000)
		w := &discardWriter{h: http.Header{}}
		for _, r := range reqs {
			w.h = http.Header{}
			h.ServeHTTP(w, r)
			assert.NotEmpty(t, w.h.Get("RateLimit"), "%s: the limiter decided", onOff(on))
		}
		if !on {
			assert.Nil(t, a, "off: no analytics")
			continue
		}
		require.NotNil(t, a)
		snap := a.Snapshot()
		require.Len(t, snap.Rules, 1)
		groups := 0
		for _, sl := range snap.Rules[0].Slots {
			groups += sl.Groups
		}
		assert.GreaterOrEqual(t, groups, len(reqs), "on: every request's group observed")
	}
	assert.Equal(t, "analytics=off", onOff(false))
	assert.Equal(t, "analytics=on", onOff(true))
}
