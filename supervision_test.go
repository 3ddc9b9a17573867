package actorlimit_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// quietSystem returns an actor system that logs nothing, shut down at the
// end of the test.
func quietSystem(t *testing.T) *protoactor.ActorSystem {
	t.Helper()
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	return sys
}

// bomb makes the limiter panic on id "boom". If hold is set, it first
// signals entered and waits for hold, so the test can queue messages
// behind the panicking one.
type bomb struct {
	entered chan struct{}
	hold    chan struct{}
}

func (b *bomb) inject(id string) {
	if id != "boom" {
		return
	}
	if b.hold != nil {
		close(b.entered)
		<-b.hold
	}
	panic("injected fault")
}

func TestPanicAnswersCallerKeepsTableAndServesQueue(t *testing.T) {
	sys := quietSystem(t)
	b := &bomb{entered: make(chan struct{}), hold: make(chan struct{})}
	lim, err := actorlimit.Spawn(sys.Root, actorlimit.WithClock(newFakeClock()),
		actorlimit.WithJanitor(0, 0), actorlimit.WithInject(b.inject))
	require.NoError(t, err)
	defer lim.Close()
	p := actorlimit.Policy{Limit: 10, Period: time.Minute}
	for range 3 {
		_, err := lim.Hit(context.Background(), "kept", p)
		require.NoError(t, err)
	}

	boom := make(chan error, 1)
	go func() {
		_, err := lim.Hit(context.Background(), "boom", p)
		boom <- err
	}()
	// While the limiter is stuck in "boom", queue requests behind it: the
	// mailbox is busy, so Send returns once a message is queued.
	<-b.entered
	var queued []*protoactor.Future
	for i := range 5 {
		f := sys.Root.RequestFuture(lim.PID(), &actorlimit.HitRequest{ID: fmt.Sprint("q", i), Policy: p}, 5*time.Second)
		queued = append(queued, f)
	}
	close(b.hold)

	select {
	case err := <-boom:
		require.ErrorIs(t, err, actorlimit.ErrPanicked)
		assert.Contains(t, err.Error(), "injected fault")
	case <-time.After(5 * time.Second):
		t.Fatal("the caller of the panicking message was not answered")
	}
	for i, f := range queued {
		reply, err := f.Result()
		require.NoError(t, err, "queued request %d", i)
		resp, ok := reply.(*actorlimit.HitResponse)
		require.True(t, ok, "queued request %d got %T", i, reply)
		require.NoError(t, resp.Err)
		assert.True(t, resp.Result.Allowed)
		assert.Equal(t, int64(1), resp.Result.Count)
	}
	res, err := lim.Hit(context.Background(), "kept", p)
	require.NoError(t, err)
	assert.Equal(t, int64(4), res.Count, "the table did not survive the restart")
	st, err := lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, st.Restarts)
}

func TestPanicInBatchAnswersCaller(t *testing.T) {
	lim := start(t, newFakeClock(), actorlimit.WithInject((&bomb{}).inject))
	p := actorlimit.Policy{Limit: 10, Period: time.Minute}
	hits := []actorlimit.HitRequest{{ID: "a", Policy: p}, {ID: "boom", Policy: p}}
	err := lim.HitMany(context.Background(), hits, make([]actorlimit.Result, 2))
	require.ErrorIs(t, err, actorlimit.ErrPanicked)
	res, err := lim.Peek(context.Background(), "a", p)
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Count, "hits before the panic stay applied")
}

func TestTooManyRestartsStopTheLimiter(t *testing.T) {
	lim := start(t, newFakeClock(), actorlimit.WithInject((&bomb{}).inject),
		actorlimit.WithRestarts(2, time.Hour))
	p := actorlimit.Policy{Limit: 10, Period: time.Minute}
	for i := range 3 {
		_, err := lim.Hit(context.Background(), "boom", p)
		require.ErrorIs(t, err, actorlimit.ErrPanicked, "panic %d", i)
	}
	// The third failure stops the limiter: calls now fail fast, queued
	// or not, and none hangs.
	done := make(chan error, 1)
	go func() {
		_, err := lim.Hit(context.Background(), "a", p)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, actorlimit.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("a call to a stopped limiter hung")
	}
	_, err := lim.Stats(context.Background())
	require.ErrorIs(t, err, actorlimit.ErrClosed)
}

func TestProtocolRequestsFromAnActor(t *testing.T) {
	sys := quietSystem(t)
	lim, err := actorlimit.Spawn(sys.Root, actorlimit.WithClock(newFakeClock()), actorlimit.WithJanitor(0, 0))
	require.NoError(t, err)
	defer lim.Close()
	replies := make(chan any, 8)
	p := actorlimit.Policy{Limit: 1, Period: time.Second}
	app := sys.Root.Spawn(protoactor.PropsFromFunc(func(c protoactor.Context) {
		switch m := c.Message().(type) {
		case string:
			switch m {
			case "hit":
				c.Request(lim.PID(), &actorlimit.HitRequest{ID: "u", Policy: p})
			case "peek":
				c.Request(lim.PID(), &actorlimit.PeekRequest{ID: "u", Policy: p})
			case "reset":
				c.Request(lim.PID(), &actorlimit.ResetRequest{ID: "u", Policy: p})
			case "bad":
				c.Request(lim.PID(), &actorlimit.HitRequest{ID: "", Policy: p})
			}
		case *actorlimit.HitResponse, *actorlimit.ResetResponse:
			replies <- m
		}
	}))
	next := func(msg string) any {
		sys.Root.Send(app, msg)
		select {
		case r := <-replies:
			return r
		case <-time.After(5 * time.Second):
			t.Fatalf("no reply to %s", msg)
			return nil
		}
	}
	hit := next("hit").(*actorlimit.HitResponse)
	assert.True(t, hit.Result.Allowed)
	assert.Equal(t, "u", hit.ID)
	assert.False(t, next("hit").(*actorlimit.HitResponse).Result.Allowed)
	assert.Equal(t, int64(2), next("peek").(*actorlimit.HitResponse).Result.Count)
	require.NoError(t, next("reset").(*actorlimit.ResetResponse).Err)
	assert.Equal(t, int64(0), next("peek").(*actorlimit.HitResponse).Result.Count)
	assert.ErrorIs(t, next("bad").(*actorlimit.HitResponse).Err, actorlimit.ErrInvalidArgument)
}

func TestSpawnedLimiterStopsWithItsParent(t *testing.T) {
	sys := quietSystem(t)
	var lim *actorlimit.Limiter
	started := make(chan error, 1)
	parent, err := sys.Root.SpawnNamed(protoactor.PropsFromFunc(func(c protoactor.Context) {
		if _, ok := c.Message().(*protoactor.Started); ok {
			var err error
			lim, err = actorlimit.Spawn(c, actorlimit.WithJanitor(0, 0))
			started <- err
		}
	}), "app")
	require.NoError(t, err)
	require.NoError(t, <-started)
	_, err = lim.CheckRate("a", 1000, 1)
	require.NoError(t, err)
	require.NoError(t, sys.Root.StopFuture(parent).Wait())
	assert.Eventually(t, func() bool {
		_, err := lim.CheckRate("a", 1000, 1)
		return err != nil
	}, 5*time.Second, time.Millisecond)
	_, err = lim.CheckRate("a", 1000, 1)
	require.ErrorIs(t, err, actorlimit.ErrClosed)
	require.NoError(t, lim.Close())
}

func TestJanitorDeletesOldEntriesKeepsLiveOnes(t *testing.T) {
	clk := newFakeClock()
	lim, err := actorlimit.Start(actorlimit.WithClock(clk), actorlimit.WithJanitor(time.Minute, 0))
	require.NoError(t, err)
	defer lim.Close()
	require.Eventually(t, func() bool { return clk.LiveTickers() == 1 }, 10*time.Second, time.Millisecond,
		"the janitor did not start a ticker on the limiter's clock")
	short := actorlimit.Policy{Limit: 5, Period: time.Second}
	long := actorlimit.Policy{Limit: 5, Period: time.Hour}
	for i := range 100 {
		_, err := lim.Hit(context.Background(), fmt.Sprint("s", i), short)
		require.NoError(t, err)
	}
	_, err = lim.Hit(context.Background(), "long", long)
	require.NoError(t, err)
	clk.Advance(59 * time.Second) // the short windows have ended; no tick yet
	st, err := lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 101, st.Entries, "a sweep ran before the janitor's interval had passed")
	clk.Advance(time.Second) // the tick: the hour has not ended
	require.Eventually(t, func() bool {
		st, err := lim.Stats(context.Background())
		return err == nil && st.Entries == 1
	}, 10*time.Second, time.Millisecond, "the janitor did not delete the ended windows")
	res, err := lim.Peek(context.Background(), "long", long)
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Count)
	st, err = lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(100), st.Expired)
	require.NoError(t, lim.Close())
	assert.Zero(t, clk.LiveTickers(), "Close left the janitor's ticker running")
}

func TestSweepDeletesInChunksAndHonoursTimeout(t *testing.T) {
	clk := newFakeClock()
	lim := start(t, clk, actorlimit.WithJanitor(0, 10*time.Second))
	p := actorlimit.Policy{Limit: 5, Period: time.Second}
	const dead = 5000 // several chunks of 1024
	ids := make([]actorlimit.HitRequest, dead)
	for i := range ids {
		ids[i] = actorlimit.HitRequest{ID: fmt.Sprint("d", i), Policy: p}
	}
	require.NoError(t, lim.HitMany(context.Background(), ids, make([]actorlimit.Result, dead)))
	clk.Advance(5 * time.Second)
	_, err := lim.Hit(context.Background(), "live", p)
	require.NoError(t, err)

	n, err := lim.Sweep(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n, "entries within the timeout were deleted")

	clk.Advance(6 * time.Second) // 11 s after the dead windows ended, 5 s after the live one
	n, err = lim.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, dead, n)
	st, err := lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, st.Entries)
	assert.Equal(t, uint64(2), st.Sweeps, "both sweeps counted, the empty one too")
	assert.Zero(t, st.SweepTime, "the clock did not move during either")
}

func TestStatsTimeSweeps(t *testing.T) {
	lim, err := actorlimit.Start(actorlimit.WithClock(testkit.NewSteppingClock(epoch, time.Millisecond)), actorlimit.WithJanitor(0, 0))
	require.NoError(t, err)
	defer lim.Close()
	for range 3 {
		_, err := lim.Sweep(context.Background())
		require.NoError(t, err)
	}
	st, err := lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(3), st.Sweeps)
	assert.Equal(t, 3*time.Millisecond, st.SweepTime, "each sweep reads the clock as it begins and as it ends: one step apart")
}

func TestMaxEntriesBoundsMemory(t *testing.T) {
	clk := newFakeClock()
	lim := start(t, clk, actorlimit.WithMaxEntries(100))
	p := actorlimit.Policy{Limit: 5, Period: time.Minute}
	_, err := lim.Hit(context.Background(), "old", actorlimit.Policy{Limit: 5, Period: time.Hour})
	require.NoError(t, err)
	clk.Advance(time.Hour)
	for i := range 1000 {
		_, err := lim.Hit(context.Background(), fmt.Sprint("flood", i), p)
		require.NoError(t, err)
	}
	st, err := lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 100, st.Entries)
	assert.Equal(t, uint64(901), st.Evictions)
	res, err := lim.Peek(context.Background(), "flood999", p)
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Count, "the newest entry was evicted")
}

func TestQuietUnlessGivenALogger(t *testing.T) {
	// Not parallel: it swaps os.Stderr.
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stderr
	os.Stderr = w
	lim, err := actorlimit.Start(actorlimit.WithInject((&bomb{}).inject))
	if err == nil {
		_, _ = lim.CheckRate("boom", 1000, 1)
		_, _ = lim.CheckRate("a", 1000, 1)
		_ = lim.Close()
	}
	os.Stderr = saved
	require.NoError(t, w.Close())
	out, _ := io.ReadAll(r)
	require.NoError(t, err)
	assert.Empty(t, string(out), "the library wrote to stderr without a logger")

	var buf bytes.Buffer
	lim, err = actorlimit.Start(actorlimit.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))),
		actorlimit.WithInject((&bomb{}).inject))
	require.NoError(t, err)
	_, err = lim.CheckRate("boom", 1000, 1)
	require.ErrorIs(t, err, actorlimit.ErrPanicked)
	_, err = lim.CheckRate("a", 1000, 1)
	require.NoError(t, err)
	require.NoError(t, lim.Close())
	assert.Contains(t, buf.String(), "limiter restarting")
}
