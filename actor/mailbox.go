package actor

import (
	"sync"
	"sync/atomic"

	protoactor "github.com/asynkron/protoactor-go/actor"
)

// mailbox is the limiter's protoactor Mailbox. It keeps protoactor's
// contract (system messages first, suspend and resume, a panic escalated to
// the supervisor with the failing message) and changes two things:
//
//   - It allocates nothing to schedule itself: protoactor's default mailbox
//     passes a new method value to its dispatcher every time it wakes.
//   - A caller that finds it idle runs it on its own goroutine, as the
//     synchronized dispatcher does, but for at most one batch of messages:
//     if more arrived meanwhile, a goroutine is started to drain them and
//     the caller returns. A lone caller thus never waits for a goroutine to
//     wake, and under load no caller is kept busy serving the others. When
//     nothing is queued either, its message skips the queue (see
//     [mailbox.PostUserMessage]).
//   - Consecutive check calls of one run are handed to the limiter as one
//     [gather] message, up to maxChecks checks, so that the store decides
//     them in one Decide: under load a networked store makes one round trip
//     for many callers. Any other message ends a gather, so sweeps, stats
//     and other actors' messages keep their place among the calls.
//
// Producers append to pending under a mutex; the runner swaps pending for an
// empty slice and processes the batch outside the lock.
type mailbox struct {
	mu      sync.Mutex
	pending []any
	spare   []any
	system  []any

	status    atomic.Int32 // idle or running
	users     atomic.Int32 // user messages queued
	systems   atomic.Int32 // system messages queued
	suspended atomic.Bool

	invoker   protoactor.MessageInvoker
	batch     int     // most user messages a caller runs before handing off
	maxChecks int     // most checks gathered into one message; < 2: no gathering
	g         *gather // reused across runs; only the running goroutine touches it
	drain     func()  // m.runDrainer, bound once
}

const (
	idle int32 = iota
	running
)

// newMailbox returns a mailbox whose callers run at most batch messages and
// that gathers consecutive check calls into messages of at most maxChecks
// checks (a single call with more is handed on whole).
func newMailbox(batch, maxChecks int) *mailbox {
	m := &mailbox{batch: batch, maxChecks: maxChecks}
	m.drain = m.runDrainer
	return m
}

// PostUserMessage implements protoactor.Mailbox. A caller that finds the
// mailbox idle, with nothing queued and not suspended, hands msg to the
// invoker at once without queuing it: no lock, no counter, no swap of the
// queue, each of which is a cache line that the other cores' callers take
// away between two checks. Messages posted meanwhile are run after it, as
// they would be behind it in the queue.
func (m *mailbox) PostUserMessage(msg any) {
	if m.status.CompareAndSwap(idle, running) {
		if m.users.Load() == 0 && m.systems.Load() == 0 && !m.suspended.Load() {
			m.direct(msg)
			if m.release() {
				m.process(max(1, m.batch-1))
			}
			return
		}
		m.enqueue(msg)
		m.process(m.batch)
		return
	}
	m.enqueue(msg)
	m.schedule()
}

// enqueue appends msg to the user messages and counts it.
func (m *mailbox) enqueue(msg any) {
	m.mu.Lock()
	m.pending = append(m.pending, msg)
	m.mu.Unlock()
	m.users.Add(1)
}

// direct runs msg, which was never queued, on the running goroutine. A panic
// is escalated to the supervisor with msg, as in run.
func (m *mailbox) direct(msg any) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	m.invoker.InvokeUserMessage(msg)
}

// PostSystemMessage implements protoactor.Mailbox.
func (m *mailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system = append(m.system, msg)
	m.mu.Unlock()
	m.systems.Add(1)
	m.schedule()
}

// RegisterHandlers implements protoactor.Mailbox.
func (m *mailbox) RegisterHandlers(invoker protoactor.MessageInvoker, _ protoactor.Dispatcher) {
	m.invoker = invoker
}

// Start implements protoactor.Mailbox.
func (m *mailbox) Start() {}

// UserMessageCount implements protoactor.Mailbox.
func (m *mailbox) UserMessageCount() int { return int(m.users.Load()) }

func (m *mailbox) schedule() {
	if m.status.CompareAndSwap(idle, running) {
		m.process(m.batch)
	}
}

func (m *mailbox) runDrainer() { m.process(0) }

// process runs the mailbox until it is empty, or, with a positive budget,
// until budget user messages ran; then a drainer goroutine takes over.
func (m *mailbox) process(budget int) {
	for {
		if !m.run(budget) {
			go m.drain() // still running: the drainer owns the mailbox now
			return
		}
		if !m.release() {
			return
		}
	}
}

// release sets the mailbox idle and reports whether the caller took it back
// (it is running again) because something arrived after the last look and
// nobody else runs it.
func (m *mailbox) release() bool {
	m.status.Store(idle)
	if m.systems.Load() == 0 && (m.suspended.Load() || m.users.Load() == 0) {
		return false
	}
	return m.status.CompareAndSwap(idle, running)
}

// run processes system messages first, then user messages in batches. It
// reports false if it stopped because the budget ran out with messages
// left, true once the mailbox is empty or suspended. After a panic the
// messages of the batch behind the failing one go back to the front of the
// queue, and the failure is escalated to the supervisor.
func (m *mailbox) run(budget int) (done bool) {
	var msg any
	var batch, rest []any // rest: the batch's messages not yet processed
	defer func() {
		r := recover()
		if r != nil {
			m.requeue(rest)
			if msg == any(m.g) {
				m.g = nil // the supervisor is handed it: never reuse it
			}
		}
		m.swapBack(batch)
		if r != nil {
			m.invoker.EscalateFailure(r, msg)
			done = true
		}
	}()
	ran := 0
	for {
		for msg = m.popSystem(); msg != nil; msg = m.popSystem() {
			switch msg.(type) {
			case *protoactor.SuspendMailbox:
				m.suspended.Store(true)
			case *protoactor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
		}
		if m.suspended.Load() {
			return true
		}
		if budget > 0 && ran >= budget {
			return m.users.Load() == 0 && m.systems.Load() == 0
		}
		batch = m.swap(batch)
		if len(batch) == 0 {
			return true
		}
		for rest = batch; len(rest) > 0; {
			var n int
			msg, rest, n = m.next(rest)
			m.users.Add(-int32(n))
			m.invoker.InvokeUserMessage(msg)
			ran += n
			if m.systems.Load() > 0 { // a stop or suspend goes before the rest
				m.requeue(rest)
				rest = nil
			}
		}
	}
}

// next takes the next message off rest: a check call together with the
// check calls right behind it, as one gather, or any other message alone.
// It returns how many queued messages the one it returns stands for.
func (m *mailbox) next(rest []any) (msg any, left []any, n int) {
	k, ok := rest[0].(*call)
	if !ok || m.maxChecks < 2 || len(rest) < 2 || !k.checks() {
		return rest[0], rest[1:], 1
	}
	if next, ok := rest[1].(*call); !ok || !next.checks() || len(k.batch)+len(next.batch) > m.maxChecks {
		return rest[0], rest[1:], 1 // nothing to gather: the call goes as it is
	}
	if m.g == nil {
		m.g = &gather{}
	}
	g := m.g
	g.calls = append(g.calls[:0], k)
	checks := len(k.batch)
	for n = 1; n < len(rest); n++ {
		next, ok := rest[n].(*call)
		if !ok || !next.checks() || checks+len(next.batch) > m.maxChecks {
			break
		}
		g.calls = append(g.calls, next)
		checks += len(next.batch)
	}
	return g, rest[n:], n
}

func (m *mailbox) popSystem() any {
	if m.systems.Load() == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.system) == 0 {
		return nil
	}
	msg := m.system[0]
	m.system[0] = nil
	m.system = m.system[1:]
	m.systems.Add(-1)
	return msg
}

// swap gives back done, the batch just processed, and takes the messages
// pending since: one lock for both. The two arrays take turns, so a steady
// flow of messages allocates nothing.
func (m *mailbox) swap(done []any) []any {
	clear(done) // hold no message alive
	m.mu.Lock()
	defer m.mu.Unlock()
	if done != nil && m.spare == nil {
		m.spare = done[:0]
	}
	if len(m.pending) == 0 {
		return nil
	}
	batch := m.pending
	m.pending, m.spare = m.spare[:0], nil
	return batch
}

// swapBack gives back a batch abandoned by a panic.
func (m *mailbox) swapBack(batch []any) {
	clear(batch)
	m.mu.Lock()
	if batch != nil && m.spare == nil {
		m.spare = batch[:0]
	}
	m.mu.Unlock()
}

// requeue puts messages taken but not processed back before those queued
// since, and counts them again.
func (m *mailbox) requeue(rest []any) {
	if len(rest) == 0 {
		return
	}
	m.mu.Lock()
	m.pending = append(append(make([]any, 0, len(rest)+len(m.pending)), rest...), m.pending...)
	m.mu.Unlock()
	clear(rest) // their counts were never taken off: nothing to add back
}
