package bench

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// tailCalls is how many calls each caller of BenchmarkTail makes and times
// per iteration.
const tailCalls = 2_000

// BenchmarkTail measures the latencies of CheckRate calls with no sweep
// running: the baseline of BenchmarkSweepUnderLoad's percentiles.
// BenchmarkTail/impl=<name>/callers=<c> fills the sweep benchmark's keys
// (100 000, or 1 000 000 with BENCH_FULL=1: see sweepKeys), then, for each
// iteration, c goroutines each make tailCalls timed calls on them without
// pause; it reports the p50, p99 and p99.9 of every call of the run
// ("p50-ns", "p99-ns", "p999-ns"). ns/op is one iteration. impl=actor is
// actorlimit on a frozen clock, as in BenchmarkCheckRate, beside the two
// mutex versions: a peer's tail at 256 callers says what the machine and
// the Go scheduler add, whatever the limiter. It reports no allocs/op: the
// latencies' own buffers would be all it counted (BenchmarkLimiters
// reports the calls' allocations).
func BenchmarkTail(b *testing.B) {
	keys := keySet(sweepKeys())
	for _, im := range impls {
		for _, callers := range []int{2, 256} {
			b.Run(fmt.Sprintf("impl=%s/callers=%d", im.name, callers), func(b *testing.B) {
				check := im.make(b)
				for _, k := range keys {
					if _, err := check(k); err != nil {
						b.Fatal(err)
					}
				}
				var all []time.Duration
				b.ResetTimer()
				for range b.N {
					all = append(all, timedCalls(b, check, keys, callers)...)
				}
				b.StopTimer()
				slices.Sort(all)
				b.ReportMetric(percentile(all, 0.5), "p50-ns")
				b.ReportMetric(percentile(all, 0.99), "p99-ns")
				b.ReportMetric(percentile(all, 0.999), "p999-ns")
			})
		}
	}
}

// timedCalls has callers goroutines make tailCalls calls each to check on
// keys, and returns every call's latency.
func timedCalls(b *testing.B, check checkFunc, keys []string, callers int) []time.Duration {
	res := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			s := make([]time.Duration, 0, tailCalls)
			for i := range tailCalls {
				id := keys[(g*7919+i)%len(keys)]
				start := time.Now()
				ok, err := check(id)
				s = append(s, time.Since(start))
				if !ok || err != nil {
					b.Error("denied or failed:", err)
					return
				}
			}
			res[g] = s
		})
	}
	wg.Wait()
	return slices.Concat(res...)
}
