package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
)

// countingStore is a fake [Store] that records every Decide it gets. Its
// decision for a check echoes it back (Count = N, Remaining = the check's
// place in the batch), so a caller can tell its own answer. Until open is
// closed, Decide waits on it; fail and panicOn make a Decide fail or panic
// when one of its checks has that id.
type countingStore struct {
	open    chan struct{}
	entered chan struct{} // one signal per Decide, if room
	fail    string
	panicOn string

	mu      sync.Mutex
	batches [][]algo.Check // copies of what each Decide got
}

func newCountingStore() *countingStore {
	s := &countingStore{open: make(chan struct{}), entered: make(chan struct{}, 1)}
	close(s.open)
	return s
}

var _ Store = (*countingStore)(nil)

func (s *countingStore) Decide(_ context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.open
	s.mu.Lock()
	s.batches = append(s.batches, append([]algo.Check(nil), checks...))
	s.mu.Unlock()
	for i, c := range checks {
		if s.panicOn != "" && c.ID == s.panicOn {
			panic("countingStore: " + c.ID)
		}
		if s.fail != "" && c.ID == s.fail {
			return errors.New("countingStore: " + c.ID)
		}
		out[i] = algo.Decision{Allowed: true, Count: c.N, Remaining: int64(i)}
	}
	return nil
}

func (s *countingStore) Expire(int64, int) (int, bool) { return 0, false }
func (s *countingStore) Len() int                      { return -1 }
func (s *countingStore) Evictions() uint64             { return 0 }

// seen returns the batch sizes and every check id the store was given.
func (s *countingStore) seen() (sizes []int, ids map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids = map[string]int{}
	for _, b := range s.batches {
		sizes = append(sizes, len(b))
		for _, c := range b {
			ids[c.ID]++
		}
	}
	return sizes, ids
}

func startWithStore(t *testing.T, s Store, maxBatch int) *Client {
	t.Helper()
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	c, err := Start(sys.Root, Config{Clock: frozenClock{}, Store: s, MaxBatch: maxBatch})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// holdLimiter makes the limiter busy in a Decide that waits for the
// returned release, so that the calls sent meanwhile queue up one behind
// the other. It returns once the held call is inside Decide.
func holdLimiter(t *testing.T, c *Client, s *countingStore) (release func(), held <-chan error) {
	t.Helper()
	gate := make(chan struct{})
	s.open = gate
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(context.Background(), hit("held", 1))
		errc <- err
	}()
	select {
	case <-s.entered:
	case <-time.After(time.Minute):
		t.Fatal("the held call never reached the store")
	}
	return func() { close(gate) }, errc
}

// waitFor polls cond, yielding, until it holds; a watchdog fails the test
// if it never does.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		runtime.Gosched()
	}
}

// queued returns how many user messages wait in the limiter's mailbox.
func queued(c *Client) int { return c.h.mailbox.Load().UserMessageCount() }

// TestGatheredCallsShareOneDecide: while the limiter is busy, N callers
// queue; they are decided in fewer Decide calls than N, and each caller,
// single checks and batches alike, gets its own decisions.
func TestGatheredCallsShareOneDecide(t *testing.T) {
	cases := []struct {
		name              string
		singles, batchers int
		maxBatch          int
		wantDecides       int // besides the held one
	}{
		{"singles", 40, 0, 0, 1},
		{"singles and batches", 20, 10, 0, 1},
		{"bounded", 40, 0, 16, 3}, // 16 + 16 + 8
		{"one check bound: no gathering", 5, 0, 1, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newCountingStore()
			c := startWithStore(t, s, tc.maxBatch)
			release, held := holdLimiter(t, c, s)
			var wg sync.WaitGroup
			errs := make(chan error, tc.singles+tc.batchers)
			for i := range tc.singles {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d, err := c.Do(context.Background(), hit(fmt.Sprintf("single-%d", i), int64(i+1)))
					if err != nil || d.Count != int64(i+1) {
						errs <- fmt.Errorf("single %d: %+v, %v", i, d, err)
					}
				}()
			}
			for i := range tc.batchers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					checks := []algo.Check{hit(fmt.Sprintf("batch-%d-a", i), int64(1000+i)), hit(fmt.Sprintf("batch-%d-b", i), int64(2000+i))}
					out := make([]algo.Decision, 2)
					err := c.DoMany(context.Background(), checks, out)
					if err != nil || out[0].Count != int64(1000+i) || out[1].Count != int64(2000+i) || out[1].Remaining != out[0].Remaining+1 {
						errs <- fmt.Errorf("batch %d: %+v, %v", i, out, err)
					}
				}()
			}
			waitFor(t, func() bool { return queued(c) == tc.singles+tc.batchers })
			release()
			wg.Wait()
			require.NoError(t, <-held)
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			sizes, ids := s.seen()
			assert.Len(t, sizes, 1+tc.wantDecides, "Decide calls, batch sizes %v", sizes)
			if tc.maxBatch != 1 {
				assert.Less(t, len(sizes)-1, tc.singles+tc.batchers)
			}
			assert.Len(t, ids, 1+tc.singles+2*tc.batchers, "every check decided")
			for id, n := range ids {
				assert.Equal(t, 1, n, "%s decided %d times", id, n)
			}
		})
	}
}

// TestGatherSkipsCallersThatGaveUp: callers whose context ended while they
// waited in the queue are left out of the gathered Decide; the others are
// answered.
func TestGatherSkipsCallersThatGaveUp(t *testing.T) {
	s := newCountingStore()
	c := startWithStore(t, s, 0)
	release, held := holdLimiter(t, c, s)
	const patient, impatient = 10, 10
	var wg sync.WaitGroup
	errs := make(chan error, patient+impatient)
	ctx, cancel := context.WithCancel(context.Background())
	for i := range patient + impatient {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, callCtx := fmt.Sprintf("patient-%d", i), context.Background()
			if i%2 == 1 {
				id, callCtx = fmt.Sprintf("impatient-%d", i), ctx
			}
			d, err := c.Do(callCtx, hit(id, int64(i+1)))
			switch {
			case i%2 == 1 && !errors.Is(err, context.Canceled):
				errs <- fmt.Errorf("%s: %+v, %v; want cancelled", id, d, err)
			case i%2 == 0 && (err != nil || d.Count != int64(i+1)):
				errs <- fmt.Errorf("%s: %+v, %v", id, d, err)
			}
		}()
	}
	waitFor(t, func() bool { return queued(c) == patient+impatient })
	cancel()
	// the impatient callers parked and gave up; their calls stay queued
	waitFor(t, func() bool {
		n := 0
		for _, m := range c.h.mailbox.Load().pendingCopy() {
			if m.(*call).gone() {
				n++
			}
		}
		return n == impatient
	})
	release()
	wg.Wait()
	require.NoError(t, <-held)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sizes, ids := s.seen()
	assert.Equal(t, []int{1, patient}, sizes)
	for id := range ids {
		assert.NotContains(t, id, "impatient")
	}
}

// TestGatherFailsOrPanicsAsOne: a Decide that fails answers every caller of
// its batch with the error; one that panics answers them with ErrPanicked,
// the limiter restarts, and later calls are served.
func TestGatherFailsOrPanicsAsOne(t *testing.T) {
	for _, mode := range []string{"error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			s := newCountingStore()
			if mode == "error" {
				s.fail = "bad"
			} else {
				s.panicOn = "bad"
			}
			c := startWithStore(t, s, 0)
			release, held := holdLimiter(t, c, s)
			const callers = 12
			results := make(chan error, callers)
			for i := range callers {
				go func() {
					id := fmt.Sprintf("c-%d", i)
					if i == callers/2 {
						id = "bad"
					}
					_, err := c.Do(context.Background(), hit(id, 1))
					results <- err
				}()
			}
			waitFor(t, func() bool { return queued(c) == callers })
			release()
			require.NoError(t, <-held)
			for range callers {
				err := <-results
				require.Error(t, err)
				if mode == "panic" {
					assert.ErrorIs(t, err, ErrPanicked)
				} else {
					assert.Contains(t, err.Error(), "countingStore: bad")
				}
			}
			d, err := c.Do(context.Background(), hit("after", 3))
			require.NoError(t, err)
			assert.Equal(t, int64(3), d.Count)
			st, err := c.Stats(context.Background())
			require.NoError(t, err)
			if mode == "panic" {
				assert.Equal(t, 1, st.Restarts)
			}
		})
	}
}

// TestGatherRacesCancellations: many callers on a store that yields inside
// Decide, some giving up at random moments; every answer is the caller's
// own, and gathering does happen.
func TestGatherRacesCancellations(t *testing.T) {
	s := &yieldingStore{}
	c := startWithStore(t, s, 0)
	const callers, rounds = 32, 300
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 11))
			for i := range rounds {
				n := int64(g*rounds + i + 1)
				ctx, cancel := context.WithCancel(context.Background())
				if g%4 == 0 {
					ctx, cancel = impatientContext(r)
				}
				if i%5 == 0 {
					checks := []algo.Check{hit("x", n), hit("y", -n)}
					out := []algo.Decision{{Count: -7}, {Count: -7}}
					err := c.DoMany(ctx, checks, out)
					cancel()
					if err == nil && (out[0].Count != n || out[1].Count != -n) {
						errs <- fmt.Errorf("caller %d round %d: batch got %+v", g, i, out)
						return
					}
					continue
				}
				d, err := c.Do(ctx, hit("x", n))
				cancel()
				if err == nil && d.Count != n {
					errs <- fmt.Errorf("caller %d round %d: got count %d, want %d", g, i, d.Count, n)
					return
				}
				if err != nil && g%4 != 0 {
					errs <- fmt.Errorf("caller %d round %d: %v", g, i, err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	watchdog(t, 2*time.Minute, done)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Greater(t, s.most, 1, "no Decide ever got more than one call's checks")
}

// yieldingStore echoes checks like countingStore, yielding the processor
// inside Decide as a networked store waits on its round trip.
type yieldingStore struct {
	mu   sync.Mutex
	most int
}

func (s *yieldingStore) Decide(_ context.Context, _ int64, checks []algo.Check, out []algo.Decision) error {
	s.mu.Lock()
	s.most = max(s.most, len(checks))
	s.mu.Unlock()
	for range 3 {
		runtime.Gosched()
	}
	for i, c := range checks {
		out[i] = algo.Decision{Count: c.N}
	}
	return nil
}

func (s *yieldingStore) Expire(int64, int) (int, bool) { return 0, false }
func (s *yieldingStore) Len() int                      { return -1 }
func (s *yieldingStore) Evictions() uint64             { return 0 }

// pendingCopy returns the messages queued and not yet taken.
func (m *mailbox) pendingCopy() []any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]any(nil), m.pending...)
}

// screeningStore is a countingStore that refuses checks on the id "odd"
// before any batch is sent, as a networked store refuses what its scripts
// cannot decide.
type screeningStore struct{ *countingStore }

var errOdd = errors.New("screeningStore: odd")

func (s screeningStore) Screen(c *algo.Check) error {
	if c.ID == "odd" {
		return errOdd
	}
	return nil
}

func (s screeningStore) Decide(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	for i := range checks {
		if err := s.Screen(&checks[i]); err != nil {
			return err
		}
	}
	return s.countingStore.Decide(ctx, now, checks, out)
}

// TestGatherScreensEachCall: a check the store refuses fails its own call
// only; the others gathered with it are decided in one batch.
func TestGatherScreensEachCall(t *testing.T) {
	s := screeningStore{newCountingStore()}
	c := startWithStore(t, s, 0)
	release, held := holdLimiter(t, c, s.countingStore)
	const callers = 10
	type answer struct {
		i   int
		d   algo.Decision
		err error
	}
	answers := make(chan answer, callers)
	for i := range callers {
		go func() {
			if i == 4 {
				out := make([]algo.Decision, 2)
				err := c.DoMany(context.Background(), []algo.Check{hit("fine", 1), hit("odd", 1)}, out)
				answers <- answer{i, out[0], err}
				return
			}
			d, err := c.Do(context.Background(), hit(fmt.Sprintf("c-%d", i), int64(i+1)))
			answers <- answer{i, d, err}
		}()
	}
	waitFor(t, func() bool { return queued(c) == callers })
	release()
	require.NoError(t, <-held)
	for range callers {
		a := <-answers
		if a.i == 4 {
			assert.ErrorIs(t, a.err, errOdd)
			assert.ErrorIs(t, a.err, algo.ErrInvalid, "a refusal counts nothing, like bad input")
			continue
		}
		require.NoError(t, a.err, "caller %d", a.i)
		assert.Equal(t, int64(a.i+1), a.d.Count, "caller %d", a.i)
	}
	sizes, ids := s.seen()
	assert.Equal(t, []int{1, callers - 1}, sizes)
	assert.NotContains(t, ids, "odd")
	assert.NotContains(t, ids, "fine", "a refused call's other checks are not decided either")
}

// TestStatsCountsQueuedCalls: Stats says how many messages wait behind it in
// the mailbox when it is served.
func TestStatsCountsQueuedCalls(t *testing.T) {
	s := newCountingStore()
	c := startWithStore(t, s, DefaultMaxBatch)
	release, held := holdLimiter(t, c, s)
	stats := make(chan Stats, 1)
	go func() {
		st, err := c.Stats(context.Background())
		assert.NoError(t, err)
		stats <- st
	}()
	waitFor(t, func() bool { return queued(c) == 1 })
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Do(context.Background(), hit(fmt.Sprintf("behind-%d", i), 1))
			assert.NoError(t, err)
		}()
	}
	waitFor(t, func() bool { return queued(c) == 4 })
	release()
	require.NoError(t, <-held)
	require.Equal(t, 3, (<-stats).Queued)
	wg.Wait()
}
