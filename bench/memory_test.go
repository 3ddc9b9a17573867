package bench

import (
	"fmt"
	"runtime"
	"testing"
)

// memoryKeys are the key set sizes of BenchmarkMemory.
func memoryKeys() []int {
	if full() {
		return []int{100_000, 1_000_000}
	}
	return []int{100_000}
}

// BenchmarkMemory reports the heap each implementation holds per key
// ("B/key"), after one hit on every key of a set of fixed-window keys.
// impl=actorlimit-batch is left out: it is the same limiter as
// impl=actorlimit.
//
// The reading is runtime.MemStats.HeapAlloc after a GC: the bytes of live
// heap objects. (HeapInuse would add the free room in partly used spans,
// which depends on what earlier benchmarks left behind.) The id strings are
// made before the first reading, so nobody is charged for them; an
// implementation that copies or prefixes an id pays for its copy. The first
// reading is taken before the implementation is built, so its fixed cost
// counts too, spread over the keys.
func BenchmarkMemory(b *testing.B) {
	for _, p := range peers {
		if p.name == "actorlimit-batch" {
			continue
		}
		for _, n := range memoryKeys() {
			b.Run(fmt.Sprintf("impl=%s/keys=%d", p.name, n), func(b *testing.B) {
				keys := keySet(n)
				var sum float64
				for range b.N {
					sum += bytesPerKey(b, p, keys)
				}
				b.ReportMetric(sum/float64(b.N), "B/key")
				b.ReportMetric(0, "ns/op") // the time to fill the keys means nothing here
			})
		}
	}
}

// bytesPerKey builds p, hits every key once and returns the heap it grew
// by, divided by the number of keys.
func bytesPerKey(b *testing.B, p peer, keys []string) float64 {
	before := heapAlloc()
	inst, err := p.open()
	if err != nil {
		b.Fatal(err)
	}
	fill(b, inst.newHitter(), keys)
	after := heapAlloc()
	runtime.KeepAlive(inst)
	inst.close()
	return (float64(after) - float64(before)) / float64(len(keys))
}

// heapAlloc returns the live heap after a full collection. The second GC
// also empties the sync.Pools' victim caches.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
