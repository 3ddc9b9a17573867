package actor

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
)

// screenPanicStore is a countingStore whose Screen refuses the id
// "refused" and panics on the id "boom", once gate is closed.
type screenPanicStore struct {
	*countingStore
	gate chan struct{}
}

var errRefused = errors.New("screenPanicStore: refused")

func (s screenPanicStore) Screen(c *algo.Check) error {
	switch c.ID {
	case "refused":
		return errRefused
	case "boom":
		<-s.gate
		panic("screenPanicStore: boom")
	}
	return nil
}

// parkedCall returns a check call whose caller has parked, as roundTrip
// leaves it.
func parkedCall(id string) *call {
	k := &call{kind: callCheck, done: make(chan struct{}, 1)}
	k.own = []algo.Check{hit(id, 1)}
	k.ownDecs = make([]algo.Decision, 1)
	k.batch, k.decs = k.own, k.ownDecs
	k.state.Store(parked)
	return k
}

// takeAnswer waits for k's one signal, as its parked caller does, and
// returns the answer.
func takeAnswer(t *testing.T, k *call, who string) error {
	t.Helper()
	select {
	case <-k.done:
		return k.err
	case <-time.After(time.Minute):
		t.Fatalf("%s was never answered", who)
		return nil
	}
}

// TestScreenPanicAnswersEachCallOnce: when Screen panics in the middle of a
// gathered batch, every call of the batch is answered exactly once. The
// call refused before the panic keeps its refusal and is not answered again
// once its caller has reused it (that would wake the next use with another
// call's answer); the calls not answered yet get ErrPanicked, once (a
// second answer, racing with the caller that took the first, shows under
// -race).
func TestScreenPanicAnswersEachCallOnce(t *testing.T) {
	for _, order := range [][]string{
		{"kept", "refused", "boom"},
		{"refused", "kept", "boom"},
		{"kept", "refused", "kept2", "boom"},
	} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			s := screenPanicStore{countingStore: newCountingStore(), gate: make(chan struct{})}
			c := startWithStore(t, s, 0)
			g := &gather{}
			var refused *call
			var others []*call
			for _, id := range order {
				k := parkedCall(id)
				g.calls = append(g.calls, k)
				if id == "refused" {
					refused = k
				} else {
					others = append(others, k)
				}
			}
			go c.root.Send(c.pid, g) // Screen blocks on the gate: not on this goroutine

			require.ErrorIs(t, takeAnswer(t, refused, "the refused call"), errRefused)
			// Its caller returns, and the call is reused by the next
			// caller, which parks; only then does Screen panic on a later
			// call of the batch.
			refused.err = nil
			refused.state.Store(parked)
			close(s.gate)

			for _, k := range others {
				assert.ErrorIs(t, takeAnswer(t, k, k.batch[0].ID), ErrPanicked)
			}
			// The limiter restarted; a call behind the panicking batch is
			// served, so that batch is over.
			d, err := c.Do(context.Background(), hit("after", 3))
			require.NoError(t, err)
			assert.Equal(t, int64(3), d.Count)

			assert.Equal(t, parked, refused.state.Load(), "the reused call was answered again")
			assert.Zero(t, len(refused.done), "a stray signal waits for the reused call's next caller")
			assert.NoError(t, refused.err, "the reused call got another answer")
			_, ids := s.seen()
			assert.Equal(t, map[string]int{"after": 1}, ids, "nothing of the panicking batch was decided")
		})
	}
}

// TestRefusalsWrapErrInvalid: a call that the store refuses (a Screener's
// refusal, whether the call was screened in a gathered batch or refused by
// Decide on its own) fails with an error wrapping algo.ErrInvalid, the
// root's ErrInvalidArgument, as well as the store's: nothing was counted.
// A store that fails is no refusal.
func TestRefusalsWrapErrInvalid(t *testing.T) {
	tests := []struct {
		name        string
		id          string
		wantErr     error
		wantInvalid bool
	}{
		{"refused", "odd", errOdd, true},
		{"failed", "down", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := screeningStore{newCountingStore()}
			s.fail = "down"
			c := startWithStore(t, s, 0)
			_, err := c.Do(context.Background(), hit(tt.id, 1)) // an idle limiter: no gathering
			require.Error(t, err)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			}
			assert.Equal(t, tt.wantInvalid, errors.Is(err, algo.ErrInvalid), "%v", err)
			_, ids := s.seen()
			assert.NotContains(t, ids, "odd", "a refused check reaches no Decide that applies it")
		})
	}
}

// TestAnswerRacesAbandon races the two moves out of parked head on, on one
// call reused round after round as the pool reuses it: the limiter's answer
// on one goroutine, the caller's abandon on another, each after a random
// skew from a common start. Whichever wins, the round must end clean: the
// caller returns the answer only if the limiter won, the call is in the
// winner's state, and no signal is left on done for the call's next use
// (the stale signal of issue 8's fault 1). Both sides must win often, or
// the race was not tested.
func TestAnswerRacesAbandon(t *testing.T) {
	const rounds = 20000
	errWhy, errAnswer := errors.New("gone"), errors.New("the answer")
	k := &call{done: make(chan struct{}, 1)}
	var arrived atomic.Int64 // both sides count in, then go
	skews := make(chan int)
	finished := make(chan struct{})
	go func() {
		for skew := range skews {
			arrived.Add(1)
			for arrived.Load()%2 != 0 {
				runtime.Gosched()
			}
			for range skew {
				runtime.Gosched()
			}
			k.answer(errAnswer)
			finished <- struct{}{}
		}
	}()
	defer close(skews)
	r := rand.New(rand.NewPCG(5, 6))
	var won, lost int
	for i := range rounds {
		k.err = nil
		k.state.Store(parked)
		skews <- r.IntN(3)
		arrived.Add(1)
		for arrived.Load()%2 != 0 {
			runtime.Gosched()
		}
		for range r.IntN(3) {
			runtime.Gosched()
		}
		err := abandon(k, errWhy)
		select {
		case <-finished:
		case <-time.After(time.Minute):
			t.Fatalf("round %d: the limiter's answer blocked", i)
		}
		switch {
		case err == errWhy && k.state.Load() == abandoned:
			won++
		case err == errAnswer && k.state.Load() == answered:
			lost++
		default:
			t.Fatalf("round %d: abandon returned %v with the call in state %d", i, err, k.state.Load())
		}
		require.Zero(t, len(k.done), "round %d: a signal is left for the call's next use (abandon won: %v)", i, err == errWhy)
	}
	t.Logf("%d rounds: the caller gave up first %d times, the limiter answered first %d times", rounds, won, lost)
	assert.GreaterOrEqual(t, won, rounds/50, "the caller rarely won: the race was hardly tested")
	assert.GreaterOrEqual(t, lost, rounds/50, "the limiter rarely won: the race was hardly tested")
}

// answeringStore is a countingStore with an Answerer that answers every
// hit it is asked about (Count -1) and counts the questions; quietStore
// and loudStore add an Answering method that reports false and true.
type answeringStore struct {
	*countingStore
	asked atomic.Int32
}

func (s *answeringStore) Answer(int64, *algo.Check) (algo.Decision, bool) {
	s.asked.Add(1)
	return algo.Decision{Count: -1}, true
}

type quietStore struct{ *answeringStore }

func (quietStore) Answering() bool { return false }

type loudStore struct{ *answeringStore }

func (loudStore) Answering() bool { return true }

// TestAnsweringFalseIsNeverAsked: a store whose Answering reports false is
// never asked to answer (its hits go to Decide, with no clock read and no
// copy of the check for it); one that reports true, or has no Answering
// method, is asked first, and its answer is the caller's.
func TestAnsweringFalseIsNeverAsked(t *testing.T) {
	for _, tc := range []struct {
		name      string
		store     func(*answeringStore) Store
		wantAsked int32
	}{
		{"Answering false", func(s *answeringStore) Store { return quietStore{s} }, 0},
		{"Answering true", func(s *answeringStore) Store { return loudStore{s} }, 3},
		{"no Answering method", func(s *answeringStore) Store { return s }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &answeringStore{countingStore: newCountingStore()}
			c := startWithStore(t, tc.store(s), 0)
			for range 3 {
				d, err := c.Do(context.Background(), hit("a", 1))
				require.NoError(t, err)
				if tc.wantAsked == 0 {
					assert.Equal(t, algo.Decision{Allowed: true, Count: 1}, d, "decided by the store's Decide")
				} else {
					assert.Equal(t, algo.Decision{Count: -1}, d, "the Answerer's answer")
				}
			}
			assert.Equal(t, tc.wantAsked, s.asked.Load())
			_, ids := s.seen()
			assert.Equal(t, 3-int(tc.wantAsked), ids["a"], "hits that reached Decide")
		})
	}
}
