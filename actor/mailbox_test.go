package actor

import (
	"context"
	"fmt"
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

// recorder is a MessageInvoker that records what the mailbox hands it and
// escalates failures as protoactor does: by suspending the mailbox.
type recorder struct {
	m        *mailbox
	mu       sync.Mutex
	user     []any
	system   []any
	failures []any
	panicOn  any
	onInvoke func(msg any) // called first, on the running goroutine
}

func (r *recorder) InvokeUserMessage(msg any) {
	if r.onInvoke != nil {
		r.onInvoke(msg)
	}
	if msg == r.panicOn {
		panic("boom")
	}
	r.mu.Lock()
	r.user = append(r.user, msg)
	r.mu.Unlock()
}

func (r *recorder) InvokeSystemMessage(msg any) {
	r.mu.Lock()
	r.system = append(r.system, msg)
	r.mu.Unlock()
}

func (r *recorder) EscalateFailure(_ any, msg any) {
	r.mu.Lock()
	r.failures = append(r.failures, msg)
	r.mu.Unlock()
	r.m.PostSystemMessage(&protoactor.SuspendMailbox{})
}

func newRecorded(batch int) (*mailbox, *recorder) {
	m := newMailbox(batch, 0)
	r := &recorder{m: m}
	m.RegisterHandlers(r, nil)
	return m, r
}

type msg struct{ producer, seq int }

func TestMailboxDeliversEveryMessageOnceInOrder(t *testing.T) {
	for _, batch := range []int{1, 2, 300} { // small batches force hand-offs
		m, r := newRecorded(batch)
		const producers, each = 8, 2000
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					m.PostUserMessage(msg{p, i})
				}
			}()
		}
		wg.Wait()
		require.Eventually(t, func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return len(r.user) == producers*each
		}, 10e9, 1e6, "batch %d", batch)
		next := make([]int, producers)
		r.mu.Lock()
		for _, u := range r.user {
			x := u.(msg)
			require.Equal(t, next[x.producer], x.seq, "batch %d: producer %d out of order", batch, x.producer)
			next[x.producer]++
		}
		r.mu.Unlock()
		assert.Zero(t, m.UserMessageCount())
	}
}

func TestMailboxLoneCallerRunsInline(t *testing.T) {
	m, r := newRecorded(300)
	m.PostUserMessage("a")
	// no goroutine was needed: the message ran before Post returned
	assert.Equal(t, []any{"a"}, r.user)
}

func TestMailboxIdleCallerSkipsTheQueue(t *testing.T) {
	m, r := newRecorded(300)
	var queued []int32
	r.onInvoke = func(any) { queued = append(queued, m.users.Load()) }
	for _, s := range []string{"a", "b", "c"} {
		m.PostUserMessage(s)
	}
	assert.Equal(t, []any{"a", "b", "c"}, r.user)
	assert.Equal(t, []int32{0, 0, 0}, queued, "a message to an idle mailbox was counted as queued")
	assert.Nil(t, m.pending, "a message to an idle mailbox went through the queue")
	assert.True(t, isIdle(m), "the mailbox was left running")
}

func TestMailboxMessagesPostedDuringADirectRunGoNext(t *testing.T) {
	for _, batch := range []int{1, 2, 300} {
		m, r := newRecorded(batch)
		done := make(chan struct{})
		r.onInvoke = func(msg any) {
			switch msg {
			case "a": // as the limiter sends itself a sweep's next chunk
				m.PostUserMessage("b")
				m.PostUserMessage("c")
			case "c":
				close(done)
			}
		}
		m.PostUserMessage("a")
		<-done // with batch 1 a drainer goroutine runs the rest
		r.mu.Lock()
		assert.Equal(t, []any{"a", "b", "c"}, r.user, "batch %d", batch)
		r.mu.Unlock()
	}
}

func TestMailboxDirectPanicSuspendsUntilResumed(t *testing.T) {
	m, r := newRecorded(300)
	r.panicOn = "bad"
	m.PostUserMessage("bad") // idle: run directly, and fails
	assert.Equal(t, []any{"bad"}, r.failures)
	assert.Empty(t, r.user)
	assert.True(t, m.suspended.Load())

	m.PostUserMessage("a") // suspended: queued, not run
	assert.Empty(t, r.user)
	assert.Equal(t, 1, m.UserMessageCount())

	m.PostSystemMessage(&protoactor.ResumeMailbox{})
	assert.Equal(t, []any{"a"}, r.user)
	assert.Zero(t, m.UserMessageCount())
	assert.True(t, isIdle(m), "the mailbox was left running")
}

func TestMailboxPanicKeepsQueuedMessagesUntilResumed(t *testing.T) {
	m, r := newRecorded(300)
	// Queue several messages while the mailbox is busy, so that they are
	// taken as one batch with the panicking one in the middle.
	m.turn.Lock() // busy
	for _, s := range []string{"a", "bad", "b", "c"} {
		m.PostUserMessage(s)
	}
	r.panicOn = "bad"
	m.turn.Unlock()
	m.PostSystemMessage("sys") // wakes the mailbox
	assert.Equal(t, []any{"a"}, r.user)
	assert.Equal(t, []any{"bad"}, r.failures)
	assert.Equal(t, []any{"sys"}, r.system)
	assert.Equal(t, 2, m.UserMessageCount(), "the messages behind the panic were lost")

	m.PostSystemMessage(&protoactor.ResumeMailbox{})
	assert.Equal(t, []any{"a", "b", "c"}, r.user)
	assert.Zero(t, m.UserMessageCount())
}

func TestMailboxSystemMessagesGoFirst(t *testing.T) {
	m, r := newRecorded(300)
	m.turn.Lock() // busy
	m.PostUserMessage("u1")
	m.PostSystemMessage("s1")
	m.turn.Unlock()
	m.PostUserMessage("u2")
	assert.Equal(t, []any{"s1"}, r.system)
	assert.Equal(t, []any{"u1", "u2"}, r.user)
}

// isIdle reports whether nobody runs m.
func isIdle(m *mailbox) bool {
	if !m.turn.TryLock() {
		return false
	}
	m.turn.Unlock()
	return true
}

func TestMailboxTakeRunsOnTheCaller(t *testing.T) {
	m, r := newRecorded(300)
	m.Take(context.Background(), "a")
	assert.Equal(t, []any{"a"}, r.user, "Take returned before its message ran")
	assert.True(t, isIdle(m))
}

func TestMailboxTakeWaitsForTheTurnBehindTheQueue(t *testing.T) {
	m, r := newRecorded(300)
	m.turn.Lock() // another goroutine runs the mailbox
	m.PostUserMessage("queued")
	taken := make(chan struct{})
	go func() {
		defer close(taken)
		m.Take(context.Background(), "mine")
	}()
	select {
	case <-taken:
		t.Fatal("Take returned while another goroutine held the turn")
	case <-time.After(10 * time.Millisecond): // a check of what did not happen
	}
	r.mu.Lock()
	assert.Empty(t, r.user)
	r.mu.Unlock()
	m.turn.Unlock() // the runner lets go, leaving "queued" to the next one
	<-taken
	r.mu.Lock()
	defer r.mu.Unlock()
	// the queued message went first, and both ran before Take returned
	assert.Equal(t, []any{"queued", "mine"}, r.user)
	assert.True(t, isIdle(m))
}

func TestMailboxTakeKeepsEveryCallersOrder(t *testing.T) {
	// Callers taking turns and producers posting: every message once, each
	// producer's in order, none left queued.
	m, r := newRecorded(4)
	const producers, each = 8, 2000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				if p%2 == 0 {
					m.Take(context.Background(), msg{p, i})
				} else {
					m.PostUserMessage(msg{p, i})
				}
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.user) == producers*each
	}, 10e9, 1e6)
	next := make([]int, producers)
	r.mu.Lock()
	for _, u := range r.user {
		x := u.(msg)
		require.Equal(t, next[x.producer], x.seq, "producer %d out of order", x.producer)
		next[x.producer]++
	}
	r.mu.Unlock()
	assert.Zero(t, m.UserMessageCount())
}

func TestMailboxRunnerHandsTheTurnToAWaitingCaller(t *testing.T) {
	m, r := newRecorded(300)
	blockB := make(chan struct{})
	taken := make(chan struct{})
	r.onInvoke = func(msg any) {
		switch msg {
		case "a":
			// As a sweep sends itself its next chunk: queued behind us.
			m.PostUserMessage("b")
			// A caller comes for its turn while we run.
			go func() {
				defer close(taken)
				m.Take(context.Background(), "t")
			}()
			for m.takers.Load() == 0 {
				runtime.Gosched()
			}
		case "b":
			<-blockB // whoever runs "b" waits here
		}
	}
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		m.PostUserMessage("a")
	}()
	select {
	case <-posted: // it left "b" to the waiting caller
	case <-time.After(10 * time.Second):
		t.Fatal("the runner kept the turn and ran the queue while a caller waited")
	}
	close(blockB)
	<-taken
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Equal(t, []any{"a", "b", "t"}, r.user)
	assert.True(t, isIdle(m))
}

func TestMailboxTakeGivesUpWhenCancelledWhileWaiting(t *testing.T) {
	m, r := newRecorded(300)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	// Not waiting: the message runs, whatever the channel says.
	assert.True(t, m.Take(cancelled, "now"))

	m.turn.Lock() // another goroutine runs the mailbox
	m.PostUserMessage("queued")
	ran := make(chan bool)
	go func() { ran <- m.Take(cancelled, "mine") }()
	for m.takers.Load() == 0 {
		runtime.Gosched()
	}
	m.turn.Unlock()
	assert.False(t, <-ran, "a caller that gave up while it waited had its message run")
	r.mu.Lock()
	defer r.mu.Unlock()
	// the queue it found was run, its own message was not
	assert.Equal(t, []any{"now", "queued"}, r.user)
	assert.True(t, isIdle(m))
}

// TestCallerGivingUpWhileItWaitsForItsTurn: with the embedded table, a
// caller that finds the limiter busy waits for its turn; if its context
// ends meanwhile, it gets the context's error when the turn comes, and its
// hit is not counted.
func TestCallerGivingUpWhileItWaitsForItsTurn(t *testing.T) {
	c := startWithStore(t, table.New(0), 0)
	require.True(t, c.h.turns)
	m := c.h.mailbox.Load()
	m.turn.Lock() // the limiter is busy
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, hit("k", 1))
		done <- err
	}()
	for m.takers.Load() == 0 { // it waits for its turn
		runtime.Gosched()
	}
	cancel()
	m.turn.Unlock()
	require.ErrorIs(t, <-done, context.Canceled)
	peek := hit("k", 1)
	peek.Op = algo.OpPeek
	d, err := c.Do(context.Background(), peek)
	require.NoError(t, err)
	assert.Zero(t, d.Count, "the hit of a caller that gave up while it waited was counted")
}

// TestSweepAmongCallersTakingTurns: a sweep of many chunks while more
// callers than processors keep taking turns. It is left to them while they
// wait (a bit of it on some of their turns), and it still finishes and
// deletes every ended entry; every caller's check is decided.
func TestSweepAmongCallersTakingTurns(t *testing.T) {
	const ended = 40 * SweepChunk
	tb := table.New(0)
	past := frozenClock{}.Now().Add(-2 * time.Hour).UnixNano()
	for i := range ended {
		c := hit(fmt.Sprint("old", i), 1)
		tb.Apply(&c, past)
	}
	c := startWithStore(t, tb, 0)
	require.True(t, c.h.turns)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var checks atomic.Int64
	for g := range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := c.Do(context.Background(), hit(fmt.Sprint("live", g, "-", i%50), 1))
				assert.NoError(t, err)
				checks.Add(1)
			}
		})
	}
	for checks.Load() < 100 { // the callers are at it
		runtime.Gosched()
	}
	n, err := c.Sweep(context.Background())
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	assert.Equal(t, ended, n)
}

// choreMailbox returns a recorded mailbox whose chore is a sweep that
// takes bits bits to end (a bit that panics when panics is set); done
// counts the bits run.
func choreMailbox(bits int, panics bool) (m *mailbox, r *recorder, s *sweep, done *int) {
	m, r = newRecorded(300)
	m.h = &heir{}
	done = new(int)
	m.bit = func(*sweep) bool {
		*done++
		if panics {
			panic("boom")
		}
		return *done < bits
	}
	s = &sweep{}
	m.chore = s
	return m, r, s, done
}

// TestMailboxChoreBitsGoWithTheTurns: while a caller waits for the turn,
// a chore (a sweep left to the callers) gets a bit in every choreEvery
// turns handed on, and only then; the bit that finds nothing more ends it.
func TestMailboxChoreBitsGoWithTheTurns(t *testing.T) {
	m, r, _, done := choreMailbox(3, false)
	m.takers.Add(1) // a caller waits for the turn, always
	for turn := 1; turn <= 3*choreEvery; turn++ {
		m.turn.Lock()
		m.unlock()
		require.Equal(t, turn/choreEvery, *done, "bits after %d turns", turn)
	}
	assert.Nil(t, m.chore, "the chore did not end with its last bit")
	m.turn.Lock()
	m.unlock()
	assert.Equal(t, 3, *done, "a chore that had ended got another bit")
	assert.Empty(t, r.user, "a chore went in the queue while callers waited")
}

// TestMailboxChoreGoesBackInTheQueue: a turn let go with no caller waiting
// for it, or by a mailbox that is suspended or has a system message to
// run first, puts the chore back in the queue as the message it was, with
// no bit: it then runs as a message, at once or after the resume. Once the
// limiter has stopped for good, the chore is dropped.
func TestMailboxChoreGoesBackInTheQueue(t *testing.T) {
	tests := []struct {
		name            string
		takers          int32
		suspended, over bool
		system          bool
		queued, ran     bool
	}{
		{name: "nobody waits", queued: true, ran: true},
		{name: "suspended", takers: 1, suspended: true, queued: true},
		{name: "a system message first", takers: 1, system: true, queued: true, ran: true},
		{name: "stopped for good", takers: 1, over: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, r, s, done := choreMailbox(1, false)
			m.takers.Add(tt.takers)
			m.suspended.Store(tt.suspended)
			m.h.over.Store(tt.over)
			m.turn.Lock()
			if tt.system {
				m.mu.Lock()
				m.system = append(m.system, "sys")
				m.mu.Unlock()
				m.systems.Add(1)
			}
			for range choreEvery {
				m.unlock()
				m.turn.Lock()
			}
			m.takers.Add(-tt.takers)
			if m.release() { // as after a caller's turn
				m.process(m.batch, nil)
			}
			assert.Zero(t, *done, "a bit ran")
			assert.Nil(t, m.chore)
			r.mu.Lock()
			defer r.mu.Unlock()
			switch {
			case tt.ran:
				assert.Equal(t, []any{s}, r.user, "the chore did not run as a message")
			case tt.queued:
				assert.Empty(t, r.user)
				assert.Equal(t, 1, m.UserMessageCount(), "the chore is not queued")
			default:
				assert.Empty(t, r.user)
				assert.Zero(t, m.UserMessageCount(), "a stopped limiter's chore was queued")
			}
		})
	}
}

// TestMailboxChorePanicGoesToTheSupervisor: a bit that panics is escalated
// with the sweep as the failing message, the chore is dropped, and the
// mailbox is suspended until the supervisor resumes it.
func TestMailboxChorePanicGoesToTheSupervisor(t *testing.T) {
	m, r, s, done := choreMailbox(1, true)
	m.takers.Add(1)
	for range choreEvery {
		m.turn.Lock()
		m.unlock()
	}
	assert.Equal(t, 1, *done)
	assert.Nil(t, m.chore)
	r.mu.Lock()
	assert.Equal(t, []any{s}, r.failures)
	r.mu.Unlock()
	assert.Equal(t, int32(1), m.systems.Load(), "no suspend posted")
}
