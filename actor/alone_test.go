package actor

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
)

// whereStore is a countingStore that also notes where each Decide's
// checks live (the address of the first), so that a test can tell whether
// they were lent by the caller, carried by the mailbox, or copied into a
// call.
type whereStore struct {
	*countingStore
	mu    sync.Mutex
	first []*algo.Check
}

func (s *whereStore) Decide(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	s.mu.Lock()
	s.first = append(s.first, &checks[0])
	s.mu.Unlock()
	return s.countingStore.Decide(ctx, now, checks, out)
}

// TestLoneCallerDecidesInPlace: a caller of a store across the network
// that finds the limiter idle decides its checks in a Decide of its own,
// with no call: DoMany lends the store its own checks even when its
// context can end (nobody else can answer it late: it runs the Decide
// itself), and Do's check goes in the mailbox's own slot. Each gets its
// own decisions.
func TestLoneCallerDecidesInPlace(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	tests := []struct {
		name string
		ctx  context.Context
		many bool
	}{
		{"Do, a context that cannot end", context.Background(), false},
		{"Do, a context that can end", cancelled, false},
		{"DoMany, a context that cannot end", context.Background(), true},
		{"DoMany, a context that can end", cancelled, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &whereStore{countingStore: newCountingStore()}
			c := startWithStore(t, s, 0)
			require.False(t, c.h.turns)
			m := c.h.mailbox.Load()
			require.NotNil(t, m)
			for round := range 3 {
				if tt.many {
					checks := []algo.Check{hit("a", 2), hit("b", 3)}
					out := make([]algo.Decision, 2)
					require.NoError(t, c.DoMany(tt.ctx, checks, out))
					assert.Equal(t, []int64{2, 3}, []int64{out[0].Count, out[1].Count}, "round %d", round)
					assert.Same(t, &checks[0], s.first[round], "round %d: the store did not get the caller's own checks", round)
					continue
				}
				d, err := c.Do(tt.ctx, hit("a", int64(round+1)))
				require.NoError(t, err)
				assert.Equal(t, int64(round+1), d.Count)
				assert.Same(t, &m.one[0], s.first[round], "round %d: the check did not go in the mailbox's own slot", round)
				assert.Empty(t, m.one[0].ID, "the slot holds the id after the check")
			}
		})
	}
}

// TestLoneCallerAfterPanicAndClose: a lone caller whose check makes the
// store panic gets ErrPanicked, the limiter restarts and decides the next
// check; after Close a lone caller gets ErrClosed and reaches no store; a
// failing Decide's error is the caller's.
func TestLoneCallerAfterPanicAndClose(t *testing.T) {
	s := &whereStore{countingStore: newCountingStore()}
	s.panicOn, s.fail = "boom", "bad"
	c := startWithStore(t, s, 0)
	ctx := context.Background()
	steps := []struct {
		id      string
		many    bool
		wantErr error
	}{
		{"boom", false, ErrPanicked},
		{"ok", false, nil},
		{"boom", true, ErrPanicked},
		{"ok", true, nil},
		{"bad", false, nil}, // an error of the store's: checked below
	}
	for i, st := range steps {
		var err error
		if st.many {
			err = c.DoMany(ctx, []algo.Check{hit(st.id, 1)}, make([]algo.Decision, 1))
		} else {
			_, err = c.Do(ctx, hit(st.id, 1))
		}
		switch {
		case st.wantErr != nil:
			require.ErrorIs(t, err, st.wantErr, "step %d", i)
		case st.id == "bad":
			require.ErrorContains(t, err, "countingStore: bad", "step %d", i)
		default:
			require.NoError(t, err, "step %d", i)
		}
	}
	stats, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, stats.Restarts)
	require.NoError(t, c.Close())
	before := len(s.first)
	_, err = c.Do(ctx, hit("late", 1))
	require.ErrorIs(t, err, ErrClosed)
	err = c.DoMany(ctx, []algo.Check{hit("late", 1)}, make([]algo.Decision, 1))
	require.ErrorIs(t, err, ErrClosed)
	assert.Len(t, s.first, before, "a call after Close reached the store")
}

// TestLoneCallerAfterTheLimiterStopped: once the supervisor has given up
// on a limiter whose store keeps panicking, a lone caller that finds the
// mailbox idle is not served by the store any more: it gets ErrClosed, as
// from a stopped actor, with Do and with DoMany.
func TestLoneCallerAfterTheLimiterStopped(t *testing.T) {
	s := &whereStore{countingStore: newCountingStore()}
	s.panicOn = "boom"
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	c, err := Start(sys.Root, Config{Clock: frozenClock{}, Store: s, MaxRestarts: 1, RestartWindow: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for range 2 {
		_, err := c.Do(ctx, hit("boom", 1))
		require.ErrorIs(t, err, ErrPanicked)
	}
	<-c.h.done // stopped for good
	before := len(s.first)
	_, err = c.Do(ctx, hit("k", 1))
	assert.ErrorIs(t, err, ErrClosed)
	err = c.DoMany(ctx, []algo.Check{hit("k", 1)}, make([]algo.Decision, 1))
	assert.ErrorIs(t, err, ErrClosed)
	assert.Len(t, s.first, before, "a stopped limiter's store was asked")
}
