package testkit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/testkit"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ticked reports whether tk has a tick waiting, and takes it.
func ticked(tk interface{ C() <-chan time.Time }) bool {
	select {
	case <-tk.C():
		return true
	default:
		return false
	}
}

// A ticker ticks when the clock passes it, once however far the clock
// jumps (the ticks a slow reader missed are dropped), and not after Stop.
func TestClockTickers(t *testing.T) {
	c := testkit.NewClock(start)
	tk := c.NewTicker(time.Second)
	c.Advance(999 * time.Millisecond)
	assert.False(t, ticked(tk), "before its time")
	c.Advance(time.Millisecond)
	assert.True(t, ticked(tk), "at its time")
	c.Advance(5 * time.Second)
	assert.True(t, ticked(tk))
	assert.False(t, ticked(tk), "one tick for a jump of five")
	c.Set(start.Add(7 * time.Second))
	assert.True(t, ticked(tk), "Set passes it too")
	require.Equal(t, 1, c.LiveTickers())
	tk.Stop()
	assert.Zero(t, c.LiveTickers())
	c.Advance(time.Hour)
	assert.False(t, ticked(tk), "stopped")
}

// With HoldTickers, moving the clock ticks nothing; Tick ticks every live
// ticker, waiting until each tick is taken.
func TestClockHeldTickers(t *testing.T) {
	c := testkit.NewClock(start).HoldTickers()
	tk := c.NewTicker(time.Second)
	c.Advance(time.Hour)
	assert.False(t, ticked(tk))
	got := make(chan time.Time)
	go func() { got <- <-tk.C() }()
	c.Tick()
	assert.Equal(t, start.Add(time.Hour), <-got)
	tk.Stop()
	c.Tick() // a stopped ticker is not waited for
}

// A stepping clock moves on by its step at each reading.
func TestSteppingClock(t *testing.T) {
	c := testkit.NewSteppingClock(start, time.Millisecond)
	assert.Equal(t, start, c.Now())
	assert.Equal(t, start.Add(time.Millisecond), c.Now())
	c.Advance(time.Second)
	assert.Equal(t, start.Add(time.Second+2*time.Millisecond), c.Now())
}
