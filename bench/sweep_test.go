package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit"
)

// handClock is a clock the benchmark moves by hand, read without a lock:
// every check reads the limiter's clock, and a clock behind a mutex (as
// testkit's) would be a second lock that the callers queue on, whose tail
// the benchmark would measure (at 256 callers a p99 of milliseconds, with
// or without a sweep), not the limiter's. The wall clock is read without a
// lock too.
type handClock struct{ ns atomic.Int64 }

func newHandClock(t time.Time) *handClock {
	c := &handClock{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now implements actorlimit.Clock.
func (c *handClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock on by d.
func (c *handClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// percentile returns the p-quantile (0 <= p <= 1) of sorted, by nearest rank.
func percentile(sorted []time.Duration, p float64) float64 {
	return float64(sorted[int(p*float64(len(sorted)-1))])
}

// The sweep benchmark's two windows: live keys count in a window of a day,
// which never ends during a run; the keys to delete count in a window of a
// second, which has ended once the clock moves two seconds on.
const (
	liveMs  = 24 * 3_600_000
	endedMs = 1_000
	// maxSamples bounds the latencies recorded in one sub-benchmark, over all
	// its callers and iterations; later calls are still made, not recorded.
	maxSamples = 1 << 22
)

// sweepKeys is the number of entries of BenchmarkSweepUnderLoad.
func sweepKeys() int {
	if full() {
		return 1_000_000
	}
	return 100_000
}

// BenchmarkSweepUnderLoad fills a limiter with keys entries, a tenth of them
// in windows that have ended, and measures a Sweep that deletes that tenth
// while 2 or 256 goroutines call CheckRate on the live keys without pause.
// It reports the percentiles of those calls' latencies ("p50-ns", "p99-ns",
// "p999-ns", over every call made while a sweep ran, up to maxSamples; their
// number is "calls") and the sweep's own time ("sweep-ms"; ns/op is the
// same time). One sweep of 10 000 entries makes few calls: report.sh runs
// 20 sweeps (-benchtime=20x) for enough of them. The limiter
// reads a clock moved by hand and read without a lock (handClock); its
// janitor is off, so only the benchmark sweeps.
func BenchmarkSweepUnderLoad(b *testing.B) {
	n := sweepKeys()
	for _, callers := range []int{2, 256} {
		b.Run(fmt.Sprintf("keys=%d/callers=%d", n, callers), func(b *testing.B) {
			benchSweep(b, keySet(n), callers)
		})
	}
}

func benchSweep(b *testing.B, keys []string, callers int) {
	ended, live := keys[:len(keys)/10], keys[len(keys)/10:]
	clock := newHandClock(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)) // a minute into a day
	lim, err := actorlimit.Start(actorlimit.WithClock(clock), actorlimit.WithJanitor(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	defer lim.Close()
	hitAll(b, lim, live, liveMs)
	samples := make([][]time.Duration, callers)
	for i := range samples {
		samples[i] = make([]time.Duration, 0, maxSamples/callers)
	}
	var sweeping time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		hitAll(b, lim, ended, endedMs)
		clock.Advance(2 * time.Second)
		// Collect the setup's garbage now, so that no collection it
		// started runs during the sweep: neither the sweep nor the callers
		// allocate, so what is measured is the limiter alone.
		runtime.GC()
		b.StartTimer()
		sweeping += sweepUnderLoad(b, lim, live, samples, len(ended))
	}
	b.StopTimer()
	all := slices.Concat(samples...)
	if len(all) == 0 {
		b.Fatal("no CheckRate call completed during a sweep")
	}
	slices.Sort(all)
	b.ReportMetric(percentile(all, 0.5), "p50-ns")
	b.ReportMetric(percentile(all, 0.99), "p99-ns")
	b.ReportMetric(percentile(all, 0.999), "p999-ns")
	b.ReportMetric(float64(sweeping)/float64(time.Millisecond)/float64(b.N), "sweep-ms")
	b.ReportMetric(float64(len(all)), "calls")
}

// hitAll counts one hit on each of ids in a window of scaleMs, a thousand
// hits per HitMany call.
func hitAll(b *testing.B, lim *actorlimit.Limiter, ids []string, scaleMs int64) {
	p := actorlimit.Policy{Limit: perHour, Period: time.Duration(scaleMs) * time.Millisecond}
	hits := make([]actorlimit.HitRequest, 0, 1000)
	res := make([]actorlimit.Result, 1000)
	for i, id := range ids {
		hits = append(hits, actorlimit.HitRequest{ID: id, Policy: p})
		if len(hits) < cap(hits) && i < len(ids)-1 {
			continue
		}
		if err := lim.HitMany(context.Background(), hits, res[:len(hits)]); err != nil {
			b.Fatal(err)
		}
		hits = hits[:0]
	}
}

// sweepUnderLoad runs one Sweep, expected to delete want entries, while
// len(samples) goroutines call CheckRate on live and append each call's
// latency to their own slice of samples until it is full. It returns the
// sweep's time.
func sweepUnderLoad(b *testing.B, lim *actorlimit.Limiter, live []string, samples [][]time.Duration, want int) time.Duration {
	var recording, done atomic.Bool
	var ready, wg sync.WaitGroup
	ready.Add(len(samples))
	for g := range samples {
		wg.Go(func() {
			s := samples[g]
			defer func() { samples[g] = s }()
			i := g * 7919 // spread the callers over the keys
			for first := true; ; first = false {
				id := live[i%len(live)]
				i++
				start := time.Now()
				r, err := lim.CheckRate(id, liveMs, perHour)
				d := time.Since(start)
				if first {
					ready.Done()
				}
				if err != nil || !r.Allowed {
					b.Error("denied or failed:", err)
					return
				}
				if done.Load() {
					return
				}
				if recording.Load() && len(s) < cap(s) {
					s = append(s, d)
				}
			}
		})
	}
	ready.Wait() // every caller is calling
	recording.Store(true)
	start := time.Now()
	n, err := lim.Sweep(context.Background())
	took := time.Since(start)
	done.Store(true)
	wg.Wait()
	if err != nil || n != want {
		b.Fatalf("Sweep deleted %d entries, want %d (error %v)", n, want, err)
	}
	return took
}
