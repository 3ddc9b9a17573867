package testkit

import (
	"sync"
	"time"

	"github.com/actorlimit/actorlimit/janitor"
)

// Clock is a clock held by one test and moved only by it (never a
// package-global one): Set and Advance move it, and a stepping clock also
// moves on by its step at each reading. It is a ticker clock (the
// limiter's TickerClock, the cluster's Config.Clock): by default, moving it
// fires the tickers that are due, once, dropping the ticks a slow reader
// missed, as time.Ticker does; with HoldTickers, its tickers tick only when
// the test calls Tick. It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	step    time.Duration
	held    bool
	tickers []*ticker
}

// NewClock returns a clock at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// NewSteppingClock returns a clock at start that moves on by step at each
// reading: the time between two readings of the code under test is step.
func NewSteppingClock(start time.Time, step time.Duration) *Clock {
	return &Clock{now: start, step: step}
}

// HoldTickers makes c's tickers tick only when Tick is called, whatever
// the clock does, and returns c.
func (c *Clock) HoldTickers() *Clock {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = true
	return c
}

// Now returns the clock's time, and moves a stepping clock on by its step.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now
	c.now = c.now.Add(c.step)
	return now
}

// Set moves the clock to t, forward or back, and fires the tickers due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	c.fire()
}

// Advance moves the clock on by d and fires the tickers due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fire()
}

// ticker is one ticker of a Clock; its clock's lock guards next and
// stopped.
type ticker struct {
	clock   *Clock
	c       chan time.Time
	every   time.Duration
	next    time.Time
	stopped bool
}

func (t *ticker) C() <-chan time.Time { return t.c }

// Stop stops the ticker: it ticks no more.
func (t *ticker) Stop() {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	t.stopped = true
}

// NewTicker returns a ticker that ticks each time the clock passes a
// multiple of d after now (or, with HoldTickers, when Tick is called).
func (c *Clock) NewTicker(d time.Duration) janitor.Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &ticker{clock: c, every: d, next: c.now.Add(d)}
	if c.held {
		t.c = make(chan time.Time) // Tick waits until each tick is taken
	} else {
		t.c = make(chan time.Time, 1)
	}
	c.tickers = append(c.tickers, t)
	return t
}

// fire ticks every due ticker once, dropping the ticks a slow reader
// missed. c.mu is held.
func (c *Clock) fire() {
	if c.held {
		return
	}
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

// Tick delivers one tick, at the clock's time, to every ticker not
// stopped, and, for a clock with HoldTickers, waits until each is taken.
func (c *Clock) Tick() {
	c.mu.Lock()
	var live []*ticker
	for _, t := range c.tickers {
		if !t.stopped {
			live = append(live, t)
		}
	}
	now, held := c.now, c.held
	c.mu.Unlock()
	for _, t := range live {
		if held {
			t.c <- now
			continue
		}
		select {
		case t.c <- now:
		default:
		}
	}
}

// LiveTickers returns how many tickers of c are not stopped.
func (c *Clock) LiveTickers() int {
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
