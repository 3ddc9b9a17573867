package actor

import (
	"sync/atomic"
	"testing"
)

// parkAtOnce makes every caller park as soon as it has sent its call, with
// no yielding first, until t ends: the tests of the call's states then
// reach the parked state on every call, not only when the limiter is slow.
func parkAtOnce(t testing.TB) {
	old := spins
	spins = 0
	t.Cleanup(func() { spins = old })
}

// abandons counts how the abandons of parked calls ended.
type abandons struct {
	won  atomic.Int64 // the caller gave up first: the call is abandoned
	lost atomic.Int64 // the limiter had answered: the caller took the signal
}

// countAbandons counts how each abandon ends, until t ends.
func countAbandons(t testing.TB) *abandons {
	a := &abandons{}
	old := traceAbandon
	traceAbandon = func(won bool) {
		if won {
			a.won.Add(1)
		} else {
			a.lost.Add(1)
		}
	}
	t.Cleanup(func() { traceAbandon = old })
	return a
}
