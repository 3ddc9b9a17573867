// Package heapfloor keeps the garbage collector's heap goal at or above a
// floor, for a server whose live heap is small and whose requests allocate:
// with Go's default (GOGC=100) such a process collects each time its heap
// doubles, which for a heap of a few MiB is many times a second, and each
// collection takes processor time from the requests and stretches their
// tail. Raising the goal to the floor trades memory (up to the floor of
// garbage between collections) for fewer collections; once the live heap
// passes the floor, the collector runs as GOGC says.
//
// After each collection it reads the live heap the collection marked and
// sets GOGC (debug.SetGCPercent) to the larger of the percentage in force
// when it started and the one that puts the next goal at the floor. A
// memory limit (GOMEMLIMIT, debug.SetMemoryLimit) still bounds the heap:
// the collector runs when the limit is near, whatever the goal.
package heapfloor

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// heapMinimum is the runtime's least heap goal at GOGC=100 (its
// defaultHeapMinimum), which it scales by GOGC/100: a GOGC above
// floor/heapMinimum x 100 would put the goal above the floor however small
// the heap.
const heapMinimum = 4 << 20

// Floor keeps the heap goal at or above its floor until Stop.
type Floor struct {
	floor uint64
	base  int // the GOGC in force at Start, restored by Stop

	mu      sync.Mutex
	stopped bool
	percent int // the GOGC it set last
	cycles  int // the collections it adjusted after
	sample  []metrics.Sample
}

// Start keeps the heap goal at or above floor bytes (floor > 0), or returns
// an error when the collector is off (GOGC=off): there is no goal to raise.
func Start(floor uint64) (*Floor, error) {
	if floor == 0 {
		return nil, fmt.Errorf("heapfloor: the floor is 0")
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 {
		return nil, fmt.Errorf("heapfloor: the collector is off (GOGC=off): there is no goal to raise")
	}
	f := &Floor{floor: floor, base: base, percent: base,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	f.adjust()
	f.arm()
	return f, nil
}

// arm sets a finalizer on a new object that nothing references, which the
// next collection finds unreachable: it runs once that collection is done.
func (f *Floor) arm() {
	runtime.SetFinalizer(&cycle{f: f}, func(c *cycle) {
		if c.f.adjust() {
			c.f.arm()
		}
	})
}

// cycle is the object whose finalizer marks the end of a collection. It
// holds a pointer, so that it is not a tiny allocation sharing a block with
// others (whose finalizer might never run).
type cycle struct{ f *Floor }

// adjust sets GOGC for the live heap the last collection marked, and
// reports whether to go on.
func (f *Floor) adjust() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	metrics.Read(f.sample)
	var v [3]uint64 // the live heap, the stacks and the globals scanned
	for i, s := range f.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	p := percentFor(f.floor, v[0], v[0]+v[1]+v[2], f.base)
	if p != f.percent {
		debug.SetGCPercent(p)
		f.percent = p
	}
	f.cycles++
	return true
}

// percentFor is the GOGC that puts the heap goal at the floor at least,
// and never below base: the runtime's goal is live + scanned x GOGC/100,
// where scanned is the live heap, the stacks and the globals the last
// collection scanned, and at least heapMinimum x GOGC/100.
func percentFor(floor, live, scanned uint64, base int) int {
	if live >= floor {
		return base
	}
	most := math.Floor(float64(floor) * 100 / heapMinimum)
	p := most
	if scanned > 0 {
		p = min(most, math.Ceil(float64(floor-live)*100/float64(scanned)))
	}
	return max(base, int(p))
}

// Percent returns the GOGC it set last.
func (f *Floor) Percent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.percent
}

// Stop gives GOGC back the percentage in force at Start. It is idempotent.
func (f *Floor) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	debug.SetGCPercent(f.base)
}
