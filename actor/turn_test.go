package actor

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// unknownCheck is a check the table panics on: no algorithm has its number.
func unknownCheck() algo.Check {
	c := hit("boom", 1)
	c.Algorithm = algo.Algorithm(200)
	return c
}

// TestTurnPanicGoesToTheSupervisor: a check that a caller runs on its own
// turn, and that makes the table panic, is answered with ErrPanicked and
// escalated to the supervisor, which restarts the limiter with its table:
// the counts before the panic are kept, and the next checks are decided.
func TestTurnPanicGoesToTheSupervisor(t *testing.T) {
	c := startWithStore(t, table.New(0), 0)
	require.True(t, c.h.turns)
	ctx := context.Background()
	for want := range int64(3) {
		d, err := c.Do(ctx, hit("k", 1))
		require.NoError(t, err)
		require.Equal(t, want+1, d.Count)
		_, err = c.Do(ctx, unknownCheck())
		require.ErrorIs(t, err, ErrPanicked, "panic %d", want+1)
	}
	d, err := c.Do(ctx, hit("k", 1))
	require.NoError(t, err)
	assert.Equal(t, int64(4), d.Count, "the counts before the panics were lost")
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, st.Restarts)
}

// TestTurnAfterTheLimiterStopped: once the supervisor has given up on a
// limiter that keeps panicking, a caller taking its turn is not served by
// the table any more: it gets ErrClosed, as from a stopped actor.
func TestTurnAfterTheLimiterStopped(t *testing.T) {
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	c, err := Start(sys.Root, Config{Clock: frozenClock{}, MaxRestarts: 1, RestartWindow: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.True(t, c.h.turns)
	ctx := context.Background()
	for range 2 {
		_, err := c.Do(ctx, unknownCheck())
		require.ErrorIs(t, err, ErrPanicked)
	}
	<-c.h.done // stopped for good
	_, err = c.Do(ctx, hit("k", 1))
	assert.ErrorIs(t, err, ErrClosed)
}

// breakableClock is a frozen clock whose reading panics while broken.
type breakableClock struct{ broken atomic.Bool }

func (c *breakableClock) Now() time.Time {
	if c.broken.Load() {
		panic("clock broken by the test")
	}
	return frozenClock{}.Now()
}

// TestTurnClockPanicGoesToTheSupervisor: a caller reads the clock before
// it waits for its turn, but a clock that panics is the limiter's failure:
// the caller gets ErrPanicked, not the panic, and the limiter is restarted
// with its table and serves again once the clock works.
func TestTurnClockPanicGoesToTheSupervisor(t *testing.T) {
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	clk := &breakableClock{}
	c, err := Start(sys.Root, Config{Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.True(t, c.h.turns)
	ctx := context.Background()
	_, err = c.Do(ctx, hit("k", 1))
	require.NoError(t, err)

	clk.broken.Store(true)
	_, err = c.Do(ctx, hit("k", 1))
	require.ErrorIs(t, err, ErrPanicked)
	err = c.DoMany(ctx, []algo.Check{hit("k", 1)}, make([]algo.Decision, 1))
	require.ErrorIs(t, err, ErrPanicked)

	clk.broken.Store(false)
	d, err := c.Do(ctx, hit("k", 1))
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Count, "the hits of the failed calls were counted, or the first was lost")
}

// TestTurnCheckGoesBehindTheQueue: a caller whose turn comes while a
// message is queued (here a reset of its key, sent while the turn was held)
// runs its check behind it, in a call of its own, and both are answered;
// the next caller, finding nothing queued, decides its check in place
// again.
func TestTurnCheckGoesBehindTheQueue(t *testing.T) {
	c := startWithStore(t, table.New(0), 0)
	require.True(t, c.h.turns)
	ctx := context.Background()
	_, err := c.Do(ctx, hit("k", 1))
	require.NoError(t, err)
	m := c.h.mailbox.Load()

	m.turn.Lock() // the turn is held: the reset is queued
	reset := hit("k", 1)
	reset.Op = algo.OpReset
	queued := &call{kind: callCheck, own: []algo.Check{reset}, ownDecs: make([]algo.Decision, 1), done: make(chan struct{}, 1)}
	queued.batch, queued.decs = queued.own, queued.ownDecs
	c.root.Send(c.pid, queued)
	require.Equal(t, int32(1), m.users.Load())
	var d algo.Decision
	var doErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		d, doErr = c.Do(ctx, hit("k", 1))
	}()
	for m.takers.Load() == 0 { // the caller waits for its turn
		runtime.Gosched()
	}
	m.turn.Unlock()
	<-done
	require.NoError(t, doErr)
	require.NoError(t, c.await(ctx, queued))
	assert.Equal(t, int64(1), d.Count, "the check did not go behind the reset queued ahead of it")
	assert.Equal(t, int32(0), m.users.Load())

	d, err = c.Do(ctx, hit("k", 1))
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Count)
}
