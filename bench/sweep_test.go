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
// janitor is off, so only the benchmark sweeps. BenchmarkNoSweep is the
// same with no sweep.
func BenchmarkSweepUnderLoad(b *testing.B) {
	n := sweepKeys()
	for _, callers := range []int{2, 256} {
		b.Run(fmt.Sprintf("keys=%d/callers=%d", n, callers), func(b *testing.B) {
			benchSweep(b, keySet(n), callers, true)
		})
	}
}

// noSweepWindow is how long each iteration of BenchmarkNoSweep records
// calls: about as long as a sweep of 10 000 entries under 256 callers.
const noSweepWindow = 400 * time.Millisecond

// BenchmarkNoSweep is BenchmarkSweepUnderLoad's baseline, in its own
// harness: the same table, the same callers calling without pause, their
// latencies recorded for noSweepWindow an iteration, with no sweep.
// impl=actorlimit is the limiter of BenchmarkSweepUnderLoad (the ended tenth
// is hit again each iteration, and left there); impl=mutex-btree is a
// sync.Mutex around a google/btree on the same clock, filled the same way.
// It reports the same percentiles; ns/op is one window.
func BenchmarkNoSweep(b *testing.B) {
	n := sweepKeys()
	for _, name := range []string{"actorlimit", "mutex-btree"} {
		for _, callers := range []int{2, 256} {
			b.Run(fmt.Sprintf("impl=%s/keys=%d/callers=%d", name, n, callers), func(b *testing.B) {
				if name == "actorlimit" {
					benchSweep(b, keySet(n), callers, false)
					return
				}
				benchMutexNoSweep(b, keySet(n), callers)
			})
		}
	}
}

func benchSweep(b *testing.B, keys []string, callers int, sweep bool) {
	ended, live := keys[:len(keys)/10], keys[len(keys)/10:]
	clock := newHandClock(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)) // a minute into a day
	lim, err := actorlimit.Start(actorlimit.WithClock(clock), actorlimit.WithJanitor(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	defer lim.Close()
	hitAll(b, lim, live, liveMs)
	check := func(id string) (bool, error) {
		r, err := lim.CheckRate(id, liveMs, perHour)
		return r.Allowed, err
	}
	during := func() {
		n, err := lim.Sweep(context.Background())
		if err != nil || n != len(ended) {
			b.Fatalf("Sweep deleted %d entries, want %d (error %v)", n, len(ended), err)
		}
	}
	if !sweep {
		during = func() { time.Sleep(noSweepWindow) }
	}
	samples := newSamples(callers)
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
		sweeping += callDuring(b, check, live, samples, during)
	}
	b.StopTimer()
	reportSamples(b, samples)
	if sweep {
		b.ReportMetric(float64(sweeping)/float64(time.Millisecond)/float64(b.N), "sweep-ms")
	}
}

// benchMutexNoSweep is benchSweep, with no sweep, for a sync.Mutex around a
// google/btree.
func benchMutexNoSweep(b *testing.B, keys []string, callers int) {
	ended, live := keys[:len(keys)/10], keys[len(keys)/10:]
	clock := newHandClock(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
	l := newMutexBTree(func() int64 { return clock.ns.Load() })
	for _, id := range live {
		l.CheckRate(id, liveMs, perHour)
	}
	check := func(id string) (bool, error) { return l.CheckRate(id, liveMs, perHour), nil }
	samples := newSamples(callers)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for _, id := range ended {
			l.CheckRate(id, endedMs, perHour)
		}
		clock.Advance(2 * time.Second)
		runtime.GC()
		b.StartTimer()
		callDuring(b, check, live, samples, func() { time.Sleep(noSweepWindow) })
	}
	b.StopTimer()
	reportSamples(b, samples)
}

// newSamples returns a latency buffer for each of callers goroutines, their
// capacities summing to maxSamples.
func newSamples(callers int) [][]time.Duration {
	samples := make([][]time.Duration, callers)
	for i := range samples {
		samples[i] = make([]time.Duration, 0, maxSamples/callers)
	}
	return samples
}

// reportSamples reports the percentiles of every latency in samples and
// how many there are.
func reportSamples(b *testing.B, samples [][]time.Duration) {
	all := slices.Concat(samples...)
	if len(all) == 0 {
		b.Fatal("no CheckRate call completed during a sweep")
	}
	slices.Sort(all)
	b.ReportMetric(percentile(all, 0.5), "p50-ns")
	b.ReportMetric(percentile(all, 0.99), "p99-ns")
	b.ReportMetric(percentile(all, 0.999), "p999-ns")
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

// callDuring runs during (a Sweep, or a wait) while len(samples) goroutines
// call check on live and append the latency of each call that overlaps
// during (it ends after during began and starts before during ended) to
// their own slice of samples until it is full. It returns how long during
// took. A call in flight when during begins counts: with few callers and
// a short sweep, the calls queued behind the sweep may all start before
// it and end after it, and they are the ones it delays.
func callDuring(b *testing.B, check checkFunc, live []string, samples [][]time.Duration, during func()) time.Duration {
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
				before := !done.Load() // starts before during has ended
				start := time.Now()
				ok, err := check(id)
				d := time.Since(start)
				if first {
					ready.Done()
				}
				if err != nil || !ok {
					b.Error("denied or failed:", err)
					return
				}
				if before && recording.Load() && len(s) < cap(s) {
					s = append(s, d)
				}
				if done.Load() {
					return
				}
			}
		})
	}
	ready.Wait() // every caller is calling
	recording.Store(true)
	start := time.Now()
	during()
	took := time.Since(start)
	done.Store(true)
	wg.Wait()
	return took
}
