package rls

import (
	"context"
	"slices"
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
}

// PerSecond is the requests answered a second.
func (r loadResult) PerSecond() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// report reports r as b's metrics: req/s, p50-µs and p99-µs (ns/op is then
// the elapsed time over the requests, the inverse of req/s).
func (r loadResult) report(b *testing.B) {
	b.ReportMetric(r.PerSecond(), "req/s")
	b.ReportMetric(float64(r.P50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(r.P99.Nanoseconds())/1e3, "p99-µs")
}

// runLoad sends n requests from len(workers) goroutines, each with its own
// call (its own gRPC connection), as fast as they are answered: a closed
// loop, every worker waiting for its answer before it sends again. Each
// worker sends one request first (i is -1), untimed, so that connections
// are up before the clock starts; then onStart runs, and b's timer covers
// the rest. It fails b at the first error.
func runLoad(b *testing.B, n int, workers []call, onStart func()) loadResult {
	b.Helper()
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
	onStart()
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
	if firstErr != nil {
		b.Fatalf("request: %v", firstErr)
	}
	slices.Sort(lat)
	return loadResult{Requests: n, Elapsed: elapsed, P50: percentile(lat, 0.50), P99: percentile(lat, 0.99)}
}

// percentile returns the q-quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
