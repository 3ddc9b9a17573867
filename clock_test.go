package actorlimit_test

import (
	"runtime"
	"sync"
	"time"

	"github.com/actorlimit/actorlimit"
)

// fakeClock is a clock held by one test, moved only by that test. It is a
// TickerClock: moving it fires the tickers that are due, so the janitor
// ticks when the test says so.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
}

// fakeTicker ticks when its clock passes next.
type fakeTicker struct {
	c       chan time.Time
	every   time.Duration
	next    time.Time
	stopped bool
}

func (t *fakeTicker) C() <-chan time.Time { return t.c }

// Stop is called by the janitor's goroutine; the clock's lock guards
// stopped.
func (t *fakeTicker) Stop() { t.stopped = true }

// epoch is a Unix time aligned to 30 s windows: 56 666 667 * 30 000 ms.
var epoch = time.UnixMilli(1_700_000_010_000)

func newFakeClock() *fakeClock { return &fakeClock{now: epoch} }

var _ actorlimit.TickerClock = (*fakeClock)(nil)

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTicker returns a ticker that fires each time the clock passes a
// multiple of d after now.
func (c *fakeClock) NewTicker(d time.Duration) actorlimit.Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTicker{c: make(chan time.Time, 1), every: d, next: c.now.Add(d)}
	c.tickers = append(c.tickers, t)
	return &lockedTicker{t: t, mu: &c.mu}
}

// lockedTicker stops its ticker under the clock's lock.
type lockedTicker struct {
	t  *fakeTicker
	mu *sync.Mutex
}

func (l *lockedTicker) C() <-chan time.Time { return l.t.C() }
func (l *lockedTicker) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Stop()
}

// Set moves the clock to epoch + d.
func (c *fakeClock) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = epoch.Add(d)
	c.fire()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fire()
}

// fire ticks every due ticker once, dropping the ticks a slow reader
// missed, as time.Ticker does. c.mu is held.
func (c *fakeClock) fire() {
	for _, t := range c.tickers {
		if t.stopped || c.now.Before(t.next) {
			continue
		}
		select {
		case t.c <- c.now:
		default:
		}
		for !c.now.Before(t.next) {
			t.next = t.next.Add(t.every)
		}
	}
}

// tickers returns how many live tickers the clock has.
func (c *fakeClock) liveTickers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.tickers {
		if !t.stopped {
			n++
		}
	}
	return n
}

// runtimeGosched yields the processor to other goroutines.
func runtimeGosched() { runtime.Gosched() }
