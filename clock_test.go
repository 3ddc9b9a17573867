package actorlimit_test

import (
	"runtime"
	"sync"
	"time"
)

// fakeClock is a clock held by one test, moved only by that test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// epoch is a Unix time aligned to 30 s windows: 56 666 667 * 30 000 ms.
var epoch = time.UnixMilli(1_700_000_010_000)

func newFakeClock() *fakeClock { return &fakeClock{now: epoch} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to epoch + d.
func (c *fakeClock) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = epoch.Add(d)
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// runtimeGosched yields the processor to other goroutines.
func runtimeGosched() { runtime.Gosched() }
