package rls

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// call sends one request of a benchmark's worker; i counts the worker's
// requests.
type call func(ctx context.Context, i int) error

// loadResult is what runLoad measured.
type loadResult struct {
	Requests int
	Elapsed  time.Duration
	P50, P99 time.Duration
	// ClientGCs is how many garbage collections the benchmark's own
	// process (the clients) ran while the requests were timed.
	ClientGCs uint64
}

// PerSecond is the requests answered a second.
func (r loadResult) PerSecond() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// report reports r as b's metrics: req/s, p50-µs, p99-µs and
// client-gcs/kreq, the clients' collections a thousand requests (ns/op is
// then the elapsed time over the requests, the inverse of req/s).
func (r loadResult) report(b *testing.B) {
	b.ReportMetric(r.PerSecond(), "req/s")
	b.ReportMetric(float64(r.P50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(r.P99.Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(r.ClientGCs)*1000/float64(r.Requests), "client-gcs/kreq")
}

// clientGOGC reads BENCH_RLS_CLIENT_GOGC, the GOGC of the clients' process
// while a run is timed: a percentage, or off (-1); set reports whether it
// is given. The clients are grpc-go, 80 allocations a request: with Go's
// default (100) their process collects every 1 600 requests or so, each
// collection stalls every call in flight for 1 to 7 ms on a 2-core
// machine, and at 16 clients those calls are the slowest 1%: the p99 is
// then the clients' collector's, whatever the server (Envoy, the client
// in production, has no collector).
func clientGOGC(s string) (pct int, set bool, err error) {
	switch s {
	case "":
		return 0, false, nil
	case "off":
		return -1, true, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, false, fmt.Errorf("BENCH_RLS_CLIENT_GOGC=%q: want a percentage, at least 1, or off", s)
	}
	return n, true, nil
}

// clientGCs is how many collections the process has run.
func clientGCs() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// runLoad sends n requests from len(workers) goroutines, each with its own
// call (its own gRPC connection), as fast as they are answered: a closed
// loop, every worker waiting for its answer before it sends again. Each
// worker sends one request first (i is -1), untimed, so that connections
// are up before the clock starts; then onStart runs, and b's timer covers
// the rest. With BENCH_RLS_CLIENT_GOGC set, the process collects its
// garbage before onStart and runs the timed requests with that GOGC (Go's
// default again after them). It fails b at the first error.
func runLoad(b *testing.B, n int, workers []call, onStart func()) loadResult {
	b.Helper()
	gogc, gogcSet, err := clientGOGC(os.Getenv("BENCH_RLS_CLIENT_GOGC"))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, w := range workers {
		if err := w(ctx, -1); err != nil {
			b.Fatalf("first request: %v", err)
		}
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		lat      = make([]time.Duration, 0, n)
		firstErr error
	)
	if gogcSet {
		runtime.GC()
		defer debug.SetGCPercent(debug.SetGCPercent(gogc))
	}
	onStart()
	gc0 := clientGCs()
	b.ResetTimer()
	start := time.Now()
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, n/len(workers)+1)
			for i := 0; next.Add(1) <= int64(n); i++ {
				t0 := time.Now()
				err := w(ctx, i)
				mine = append(mine, time.Since(t0))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					break
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	gcs := clientGCs() - gc0
	if firstErr != nil {
		b.Fatalf("request: %v", firstErr)
	}
	slices.Sort(lat)
	return loadResult{Requests: n, Elapsed: elapsed, P50: percentile(lat, 0.50), P99: percentile(lat, 0.99), ClientGCs: gcs}
}

// percentile returns the q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
