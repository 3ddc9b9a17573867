package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/didip/tollbooth/v7"
	tollboothlimiter "github.com/didip/tollbooth/v7/limiter"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	ulule "github.com/ulule/limiter/v3"
	ululestdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/actorlimit/actorlimit/bench/internal/httpbench"
)

// middleware is one implementation of BenchmarkMiddleware: open wraps next
// in it, limited to limit requests per hour (period) per client IP, and
// returns the handler and what releases its state.
type middleware struct {
	name string
	open func(limit int64, next http.Handler) (http.Handler, func(), error)
}

// middlewares are the implementations, each configured as its users would
// for one limit per client IP: the IP is RemoteAddr's host, no forwarding
// header is believed.
var middlewares = []middleware{
	{"bare", func(_ int64, next http.Handler) (http.Handler, func(), error) { return next, func() {}, nil }},
	{"actorlimit", openActorlimitMiddleware},
	{"go-limiter", openGoLimiterMiddleware},
	{"ulule", openUluleMiddleware},
	{"tollbooth", openTollbooth},
}

// openActorlimitMiddleware is httpadapter with one block rule grouped by
// "ip": a fixed window of limit requests an hour.
func openActorlimitMiddleware(limit int64, next http.Handler) (http.Handler, func(), error) {
	lim, err := startActorlimit()
	if err != nil {
		return nil, nil, err
	}
	mw, err := httpbench.Actorlimit(lim, limit, period)
	if err != nil {
		_ = lim.Close()
		return nil, nil, err
	}
	return mw(next), func() { _ = lim.Close() }, nil
}

// openGoLimiterMiddleware is go-limiter's httplimit over its memorystore
// (limit tokens an hour), keyed by httplimit.IPKeyFunc() without headers.
func openGoLimiterMiddleware(limit int64, next http.Handler) (http.Handler, func(), error) {
	st, err := memorystore.New(&memorystore.Config{Tokens: uint64(limit), Interval: period})
	if err != nil {
		return nil, nil, err
	}
	closeStore := func() { _ = st.Close(context.Background()) }
	mw, err := httplimit.NewMiddleware(st, httplimit.IPKeyFunc())
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	return mw.Handle(next), closeStore, nil
}

// openUluleMiddleware is ulule/limiter's stdlib middleware over its memory
// store, with its defaults: a fixed window of limit requests an hour, keyed
// by the client IP, forwarding headers not trusted.
func openUluleMiddleware(limit int64, next http.Handler) (http.Handler, func(), error) {
	l := ulule.New(ululememory.NewStore(), ulule.Rate{Period: period, Limit: limit})
	return ululestdlib.NewMiddleware(l).Handler(next), func() {}, nil
}

// openTollbooth is tollbooth's LimitHandler: a token bucket per client IP
// that holds limit requests and refills limit an hour (its rate is per
// second), buckets expiring an hour after they are made. Its IP lookups are
// narrowed to RemoteAddr (its default reads X-Forwarded-For and X-Real-IP
// first, from anyone) and its key leaves out the path (by default it is IP
// and path), so that it limits per IP as the others do.
func openTollbooth(limit int64, next http.Handler) (http.Handler, func(), error) {
	lmt := tollbooth.NewLimiter(float64(limit)/period.Seconds(), &tollboothlimiter.ExpirableOptions{DefaultExpirationTTL: period})
	lmt.SetBurst(int(limit)).SetIPLookups([]string{"RemoteAddr"}).SetIgnoreURL(true)
	return tollbooth.LimitHandler(lmt, next), func() {}, nil
}

// client sends requests through a handler. It reuses one request and one
// recorder, reset before each request to what httptest.NewRecorder made
// (with the same header map and body buffer, emptied), so that a benchmark
// measures the handler, not their construction.
type client struct {
	req   *http.Request
	rec   *httptest.ResponseRecorder
	fresh httptest.ResponseRecorder // *rec as NewRecorder returned it
}

func newClient() *client {
	rec := httptest.NewRecorder()
	return &client{req: httptest.NewRequest(http.MethodGet, "/", nil), rec: rec, fresh: *rec}
}

// do sends the request from remoteAddr through h and returns the status.
// The handler must not keep the request or the recorder once it returns.
func (c *client) do(h http.Handler, remoteAddr string) int {
	*c.rec = c.fresh
	clear(c.rec.Header())
	c.rec.Body.Reset()
	c.req.RemoteAddr = remoteAddr
	h.ServeHTTP(c.rec, c.req)
	return c.rec.Code
}

// remoteAddrs returns n client addresses (host:port) of n different IPs.
func remoteAddrs(n int) []string {
	addrs := make([]string, 0, n)
	for _, ip := range keySet(n) {
		addrs = append(addrs, net.JoinHostPort(ip, "40000"))
	}
	return addrs
}

// BenchmarkMiddleware measures one request through each middleware of
// middlewares around the same trivial handler (impl=bare is the handler
// alone), with a limit per client IP never reached, keys client IPs each
// seen once before the timer starts, by one caller (a loop) and by 2 and
// 256 concurrent callers (b.RunParallel). Each middleware is built once per
// key set and shared by its callers sub-benchmarks.
func BenchmarkMiddleware(b *testing.B) {
	for _, m := range middlewares {
		for _, n := range []int{1, 10_000} {
			b.Run(fmt.Sprintf("impl=%s/keys=%d", m.name, n), func(b *testing.B) {
				addrs := remoteAddrs(n)
				if len(addrs) == 0 {
					b.Fatal("no client addresses")
				}
				h, release, err := m.open(perHour, httpbench.Handler())
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(release)
				c := newClient()
				for _, a := range addrs {
					if code := c.do(h, a); code != http.StatusOK {
						b.Fatalf("first request from %s: status %d", a, code)
					}
				}
				b.Run("callers=1", func(b *testing.B) { serveSerial(b, h, addrs) })
				for _, callers := range []int{2, 256} {
					b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
						serveParallel(b, h, addrs, callers)
					})
				}
			})
		}
	}
}

// serveSerial sends b.N requests through h from one goroutine, cycling
// over addrs.
func serveSerial(b *testing.B, h http.Handler, addrs []string) {
	c := newClient()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if code := c.do(h, addrs[i%len(addrs)]); code != http.StatusOK {
			b.Fatalf("status %d", code)
		}
	}
}

// serveParallel sends requests through h from callers goroutines (rounded
// as benchParallel does), each with its own client, cycling over addrs.
func serveParallel(b *testing.B, h http.Handler, addrs []string, callers int) {
	procs := runtime.GOMAXPROCS(0)
	par := max(1, callers/procs)
	clients := make([]*client, par*procs) // made before the timer starts
	for i := range clients {
		clients[i] = newClient()
	}
	var started, next atomic.Uint64
	b.SetParallelism(par)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := clients[started.Add(1)-1]
		i := int(next.Add(7919)) // spread the callers over the addresses
		for pb.Next() {
			if code := c.do(h, addrs[i%len(addrs)]); code != http.StatusOK {
				b.Errorf("status %d", code)
				return
			}
			i++
		}
	})
}

// TestMiddlewarePeersLimit checks that every middleware of
// BenchmarkMiddleware limits, per client IP and only by RemoteAddr: with 2
// requests an hour, the third from one IP (from another port, and with a
// forged X-Forwarded-For) is refused with 429, while another IP still
// passes; impl=bare passes everything.
func TestMiddlewarePeersLimit(t *testing.T) {
	for _, m := range middlewares {
		t.Run(m.name, func(t *testing.T) {
			h, release, err := m.open(2, httpbench.Handler())
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			limited := http.StatusTooManyRequests
			if m.name == "bare" {
				limited = http.StatusOK
			}
			c := newClient()
			for i, step := range []struct {
				addr, forwardedFor string
				want               int
			}{
				{"192.0.2.1:1001", "", http.StatusOK},
				{"192.0.2.1:1002", "", http.StatusOK},
				{"192.0.2.1:1003", "", limited},
				{"192.0.2.1:1004", "198.51.100.7", limited},
				{"192.0.2.2:1001", "", http.StatusOK},
			} {
				c.req.Header.Del("X-Forwarded-For")
				if step.forwardedFor != "" {
					c.req.Header.Set("X-Forwarded-For", step.forwardedFor)
				}
				got := c.do(h, step.addr)
				if got != step.want {
					t.Errorf("step %d, from %s (X-Forwarded-For %q): status %d, want %d", i, step.addr, step.forwardedFor, got, step.want)
				}
				if got == http.StatusOK && !bytes.Equal(c.rec.Body.Bytes(), httpbench.Body) {
					t.Errorf("step %d: body %q, want %q", i, c.rec.Body.Bytes(), httpbench.Body)
				}
			}
		})
	}
}
