package bench

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
)

// full reports whether BENCH_FULL=1 asks for the largest key sets, which
// take minutes to set up; without it the benchmarks stay quick enough for CI.
func full() bool { return os.Getenv("BENCH_FULL") == "1" }

// limiterKeys are the key set sizes of BenchmarkLimiters.
func limiterKeys() []int {
	if full() {
		return []int{1, 10_000, 1_000_000}
	}
	return []int{1, 10_000}
}

// BenchmarkLimiters measures one hit through actorlimit and through each
// peer, on the same work (see peers_test.go), with every key already hit once
// (steady state), by 2 and by 256 concurrent callers. Each implementation's
// state is built once per key set and shared by its callers sub-benchmarks
// (and by the -count repetitions of each).
//
// impl=actorlimit-batch sends the hits of each caller 64 at a time through
// one HitMany call. Its b.N counts hits, as every other impl's does: each
// pb.Next() queues one hit, and a caller sends its batch when 64 are queued
// (and what is left when the run ends). So its ns/op and allocs/op are per
// hit, in the same unit as the single calls', and include the wait of
// filling a batch.
func BenchmarkLimiters(b *testing.B) {
	for _, p := range peers {
		for _, n := range limiterKeys() {
			b.Run(fmt.Sprintf("impl=%s/keys=%d", p.name, n), func(b *testing.B) {
				keys := keySet(n)
				inst, err := p.open()
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(inst.close)
				fill(b, inst.newHitter(), keys)
				for _, callers := range []int{2, 256} {
					b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
						benchParallel(b, inst, keys, callers)
					})
				}
			})
		}
	}
}

// benchParallel hits keys through inst from callers goroutines (rounded
// down to a multiple of GOMAXPROCS, at least GOMAXPROCS): SetParallelism
// is callers/GOMAXPROCS.
func benchParallel(b *testing.B, inst instance, keys []string, callers int) {
	procs := runtime.GOMAXPROCS(0)
	par := max(1, callers/procs)
	hitters := make([]hitter, par*procs) // made before the timer starts
	for i := range hitters {
		hitters[i] = inst.newHitter()
	}
	var started, next atomic.Uint64
	b.SetParallelism(par)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		h := hitters[started.Add(1)-1]
		i := int(next.Add(7919)) // spread the callers over the key set
		for pb.Next() {
			if ok, err := h.hit(keys[i%len(keys)]); !ok || err != nil {
				b.Error("denied or failed:", err)
				return
			}
			i++
		}
		if ok, err := h.flush(); !ok || err != nil {
			b.Error("denied or failed:", err)
		}
	})
}
