package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// startClient starts a limiter with a frozen clock in a system of its own.
func startClient(t testing.TB) *Client {
	t.Helper()
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	c, err := Start(sys.Root, Config{Clock: frozenClock{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// watchdog fails the test with every goroutine's stack if done is not
// closed within d: a hang is a failure, never a stuck CI job.
func watchdog(t *testing.T, d time.Duration, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("hung for %v; goroutines:\n%s", d, buf)
	}
}

func hit(id string, n int64) algo.Check {
	return algo.Check{Op: algo.OpHit, ID: id, Period: time.Hour, Limit: 1 << 50, N: n}
}

// slowTable is the embedded table behind a Decide that yields the
// processor a random few times first, as a networked store waits on its
// round trip, so that the limiter holds each call a while. Only the
// limiter calls Decide, so its rand needs no lock.
type slowTable struct {
	*table.Table
	r *rand.Rand
}

func (s *slowTable) Decide(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	for range s.r.IntN(4) {
		runtime.Gosched()
	}
	return s.Table.Decide(ctx, now, checks, out)
}

// netStore is a store that is not the embedded table, so that its callers
// take the path of a store across the network, answered at once. It counts
// the Decides of checks carried in the mailbox's own slot (m, once set):
// lone callers' checks decided in place.
type netStore struct {
	Store
	m     atomic.Pointer[mailbox]
	alone atomic.Int64
}

func (s *netStore) Decide(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	if m := s.m.Load(); m != nil && &checks[0] == &m.one[0] {
		s.alone.Add(1)
	}
	return s.Store.Decide(ctx, now, checks, out)
}

// cancellingClock is a frozen clock that ends callers' contexts exactly
// while the limiter holds calls: the limiter reads the clock once per
// message it serves, just before it decides and answers, and one read in
// four cancels the contexts of all the callers that registered theirs (the
// caller of the call being served, if it is one of them, and the others,
// queued or parked).
type cancellingClock struct {
	frozenClock
	mu      sync.Mutex
	r       *rand.Rand
	cancels []atomic.Pointer[context.CancelFunc] // one per caller that can give up
}

func (c *cancellingClock) Now() time.Time {
	c.mu.Lock()
	all := c.r.IntN(4) == 0
	c.mu.Unlock()
	if all {
		for i := range c.cancels {
			if cancel := c.cancels[i].Load(); cancel != nil {
				(*cancel)()
			}
		}
	}
	return c.frozenClock.Now()
}

// register lets the clock cancel the i-th caller's context; the returned
// function takes that back, once the call returned.
func (c *cancellingClock) register(i int, cancel context.CancelFunc) (undo func()) {
	c.cancels[i].Store(&cancel)
	return func() { c.cancels[i].Store(nil) }
}

// TestCallsGivenUpAtRandomNeverConfuseAnswers races callers that give up
// (contexts cancelled before, during and after the call, deadlines of a few
// microseconds, and cancellations while the limiter serves the call)
// against callers that never do, on a busy limiter, on the embedded table
// and on a slow store (whose callers queue and are gathered) and a fast
// one (whose lone callers decide in place). Every id
// belongs to one goroutine, which hits it in sequence, so every answer can
// be checked against its own call: a patient caller's i-th hit must see
// exactly i, an impatient caller's successful answers must grow and never
// pass the hits it sent, and a batch's decisions must be its own.
//
// Every caller parks at once (no yielding first), and the clock cancels
// contexts while the limiter holds the calls. The test counts how the
// abandons of parked calls ended, and fails if either side of the race,
// the caller giving up first or the limiter answering first, won too
// rarely for the race to have been tested.
func TestCallsGivenUpAtRandomNeverConfuseAnswers(t *testing.T) {
	tests := []struct {
		name  string
		store func() Store // nil: the embedded table
		// the fewest abandons each side must win. The slow store is the
		// case that must reach the race; on the embedded table most callers
		// run the limiter's mailbox themselves, and how often they park
		// depends on the scheduler.
		minWon, minLost int64
	}{
		{"embedded table", nil, 0, 0},
		{"slow store", func() Store { return &slowTable{Table: table.New(0), r: rand.New(rand.NewPCG(1, 2))} }, 1000, 300},
		// A store across the network that answers at once: a caller that
		// finds the limiter idle often decides in place (runAlone) while
		// the others queue behind it.
		{"fast store", func() Store { return &netStore{Store: table.New(0)} }, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parkAtOnce(t)
			tally := countAbandons(t)
			cfg := Config{}
			if tt.store != nil {
				cfg.Store = tt.store()
			}
			raceCancellations(t, cfg)
			won, lost := tally.won.Load(), tally.lost.Load()
			t.Logf("abandons of parked calls: %d won by the caller, %d lost to the limiter's answer", won, lost)
			assert.GreaterOrEqual(t, won, tt.minWon, "callers rarely gave up while the limiter held their call: the test saw too little")
			assert.GreaterOrEqual(t, lost, tt.minLost, "the limiter rarely answered a caller giving up: the test saw too little")
		})
	}
}

// raceCancellations runs the callers of TestCallsGivenUpAtRandomNeverConfuseAnswers
// on a limiter started with cfg and a cancelling clock, checks every answer,
// and checks that the limiter still answers and stops afterwards.
func raceCancellations(t *testing.T, cfg Config) {
	const patient, impatient, batchers, rounds = 16, 8, 4, 3000
	clk := &cancellingClock{r: rand.New(rand.NewPCG(3, 4)), cancels: make([]atomic.Pointer[context.CancelFunc], impatient+batchers)}
	cfg.Clock = clk
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	c, err := Start(sys.Root, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	if ns, ok := cfg.Store.(*netStore); ok {
		ns.m.Store(c.h.mailbox.Load())
		t.Cleanup(func() {
			t.Logf("checks decided in place by a lone caller: %d", ns.alone.Load())
			assert.Positive(t, ns.alone.Load(), "no caller found the limiter idle: the test saw too little")
		})
	}

	var wg sync.WaitGroup
	errs := make(chan error, patient+impatient+batchers)
	for g := range patient {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("patient-%d", g)
			for i := int64(1); i <= rounds; i++ {
				d, err := c.Do(context.Background(), hit(id, 1))
				if err != nil || d.Count != i {
					errs <- fmt.Errorf("%s hit %d: count %d, err %v", id, i, d.Count, err)
					return
				}
			}
		}()
	}
	for g := range impatient {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			id := fmt.Sprintf("impatient-%d", g)
			var sent, last int64
			for range rounds {
				ctx, cancel := impatientContext(r)
				undo := clk.register(g, cancel)
				sent++
				d, err := c.Do(ctx, hit(id, 1))
				undo()
				cancel()
				switch {
				case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
				case err != nil:
					errs <- fmt.Errorf("%s: %v", id, err)
					return
				case d.Count <= last || d.Count > sent:
					errs <- fmt.Errorf("%s: count %d after %d, with %d hits sent", id, d.Count, last, sent)
					return
				default:
					last = d.Count
				}
			}
		}()
	}
	for g := range batchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			ids := []string{fmt.Sprintf("batch-%d-a", g), fmt.Sprintf("batch-%d-b", g)}
			checks := []algo.Check{hit(ids[0], 1), hit(ids[1], 2)}
			out := make([]algo.Decision, 2)
			var sent [2]int64
			var last [2]int64
			for range rounds / 2 {
				ctx, cancel := impatientContext(r)
				undo := clk.register(impatient+g, cancel)
				sent[0], sent[1] = sent[0]+1, sent[1]+2
				out[0], out[1] = algo.Decision{Count: -7}, algo.Decision{Count: -7}
				err := c.DoMany(ctx, checks, out)
				undo()
				cancel()
				if err != nil {
					if out[0].Count != -7 || out[1].Count != -7 {
						errs <- fmt.Errorf("%s: a failed DoMany wrote %v", ids[0], out)
						return
					}
					continue
				}
				for j := range 2 {
					if out[j].Count <= last[j] || out[j].Count > sent[j] || out[j].Count%(int64(j)+1) != 0 {
						errs <- fmt.Errorf("%s: count %d after %d, %d sent", ids[j], out[j].Count, last[j], sent[j])
						return
					}
					last[j] = out[j].Count
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
	// The limiter still answers, and its state holds exactly the patient
	// callers' hits.
	for g := range patient {
		d, err := c.Do(context.Background(), algo.Check{Op: algo.OpPeek, ID: fmt.Sprintf("patient-%d", g), Period: time.Hour, Limit: 1 << 50, N: 1})
		if err != nil || d.Count != rounds {
			t.Fatalf("patient-%d after the race: count %d, err %v; want %d", g, d.Count, err, rounds)
		}
	}
	stopped := make(chan struct{})
	go func() {
		if _, err := c.Stats(context.Background()); err != nil {
			t.Error(err)
		}
		_ = c.Close()
		close(stopped)
	}()
	watchdog(t, 30*time.Second, stopped)
}

// impatientContext returns a context that is already cancelled, cancelled
// soon by another goroutine, or ends after a deadline of a few microseconds,
// or, one time in four, never ends.
func impatientContext(r *rand.Rand) (context.Context, context.CancelFunc) {
	switch r.IntN(4) {
	case 0:
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	case 1:
		ctx, cancel := context.WithCancel(context.Background())
		spin := r.IntN(50)
		go func() {
			for range spin {
				runtime.Gosched()
			}
			cancel()
		}()
		return ctx, cancel
	case 2:
		return context.WithTimeout(context.Background(), time.Duration(1+r.IntN(200))*time.Microsecond)
	}
	return context.WithCancel(context.Background())
}

// TestAnswerNeverBlocks answers calls in every state twice over: the
// limiter must return at once whatever the caller did.
func TestAnswerNeverBlocks(t *testing.T) {
	for _, st := range []uint32{waiting, parked, abandoned} {
		k := &call{done: make(chan struct{}, 1)}
		k.state.Store(st)
		finished := make(chan struct{})
		go func() {
			k.answer(nil)
			k.answer(nil) // nor does a second one, though the limiter never answers twice (TestScreenPanicAnswersEachCallOnce)
			close(finished)
		}()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Fatalf("answer blocked on a call in state %d", st)
		}
		if st == abandoned && k.state.Load() != abandoned {
			t.Errorf("answer moved an abandoned call to %d", k.state.Load())
		}
	}
}

// TestAbandonedCallIsNotServed: a call given up before the limiter reaches
// it counts nothing.
func TestAbandonedCallIsNotServed(t *testing.T) {
	c := startClient(t)
	k := &call{done: make(chan struct{}, 1), kind: callCheck, batch: []algo.Check{hit("x", 5)}, decs: make([]algo.Decision, 1)}
	k.state.Store(abandoned)
	c.root.Send(c.pid, k)
	d, err := c.Do(context.Background(), hit("x", 1))
	if err != nil || d.Count != 1 {
		t.Fatalf("after an abandoned call, a hit sees %d, %v; want 1", d.Count, err)
	}
}
