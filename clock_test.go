package actorlimit_test

import (
	"runtime"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// fakeClock is the tests' clock: held by one test, moved only by it; a
// TickerClock, so that moving it fires the tickers that are due (the
// janitor ticks when the test says so).
type fakeClock = testkit.Clock

// epoch is a Unix time aligned to 30 s windows: 56 666 667 * 30 000 ms.
var epoch = time.UnixMilli(1_700_000_010_000)

func newFakeClock() *fakeClock { return testkit.NewClock(epoch) }

var _ actorlimit.TickerClock = (*fakeClock)(nil)

// runtimeGosched yields the processor to other goroutines.
func runtimeGosched() { runtime.Gosched() }
