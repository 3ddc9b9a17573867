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
// ("B/key"), after one hit on every key of a set of fixed-window keys, and
// what it holds before the first key ("empty-B": the actor system, a
// store's preallocated map, ...). impl=actorlimit-batch is left out: it is
// the same limiter as impl=actorlimit.
//
// Each reading is runtime.MemStats.HeapAlloc after a GC: the bytes of live
// heap objects. (HeapInuse would add the free room in partly used spans,
// which depends on what earlier benchmarks left behind.) Three readings:
// before the implementation is built, once it is built, and after the keys
// are in; B/key is (third - second) / keys. The id strings are made before
// the first reading, so nobody is charged for them; an implementation that
// copies or prefixes an id pays for its copy.
func BenchmarkMemory(b *testing.B) {
	for _, p := range contenders {
		if p.name == "actorlimit-batch" {
			continue
		}
		for _, n := range memoryKeys() {
			b.Run(fmt.Sprintf("impl=%s/keys=%d", p.name, n), func(b *testing.B) {
				keys := keySet(n)
				var perKey, empty float64
				for range b.N {
					k, e := bytesPerKey(b, p, keys)
					perKey, empty = perKey+k, empty+e
				}
				b.ReportMetric(perKey/float64(b.N), "B/key")
				b.ReportMetric(empty/float64(b.N), "empty-B")
				b.ReportMetric(0, "ns/op") // the time to fill the keys means nothing here
			})
		}
	}
}

// BenchmarkMemoryID16 is BenchmarkMemory with ids of 16 bytes
// ("user-00000012345"), the longest a fixed-window key of actorlimit holds
// in its node, for actorlimit and the plainest peer, mutex-btree.
func BenchmarkMemoryID16(b *testing.B) {
	for _, p := range contenders {
		if p.name != "actorlimit" && p.name != "mutex-btree" {
			continue
		}
		for _, n := range memoryKeys() {
			b.Run(fmt.Sprintf("impl=%s/keys=%d", p.name, n), func(b *testing.B) {
				keys := make([]string, n)
				for i := range keys {
					keys[i] = fmt.Sprintf("user-%011d", i)
				}
				var perKey float64
				for range b.N {
					k, _ := bytesPerKey(b, p, keys)
					perKey += k
				}
				b.ReportMetric(perKey/float64(b.N), "B/key")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// bytesPerKey builds p and hits every key once. It returns the heap that
// the keys grew, divided by the number of keys, and the heap of p empty.
func bytesPerKey(b *testing.B, p contender, keys []string) (perKey, empty float64) {
	start := heapAlloc()
	inst, err := p.open()
	if err != nil {
		b.Fatal(err)
	}
	before := heapAlloc()
	fill(b, inst.newHitter(), keys)
	after := heapAlloc()
	runtime.KeepAlive(inst) // its state lives until after the last reading
	inst.close()
	return (float64(after) - float64(before)) / float64(len(keys)), float64(before) - float64(start)
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
