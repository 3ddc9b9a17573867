package actor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/algo"
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
//   - A synchronous caller of a store that decides in memory (the embedded
//     table) takes its turn: it waits until the mailbox is idle and then
//     runs it itself (see [mailbox.Take]). The check then runs
//     on the caller's own processor, with no hand-off and no wake-up to
//     wait for; only one goroutine at a time runs the actor, as always.
//   - A sweep that the limiter leaves to the callers taking turns (its
//     chore) is done a little at a time by the caller handing the turn on
//     to a waiting one (see [mailbox.tendChore]), and goes back in the
//     queue when nobody waits.
//   - Consecutive check calls of one run are handed to the limiter as one
//     [gather] message, up to maxChecks checks, so that the store decides
//     them in one Decide: under load a networked store makes one round trip
//     for many callers. Any other message ends a gather, so sweeps, stats
//     and other actors' messages keep their place among the calls.
//
// Producers append to pending under a mutex; the runner swaps pending for an
// empty slice and processes the batch outside the lock.
//
// turn is held by whichever goroutine runs the mailbox: locked is running,
// unlocked is idle. A producer that must not wait takes it with TryLock,
// and queues its message if that fails. It is released by the goroutine
// that runs the mailbox last, which need not be the one that took it (a
// drainer takes over a caller's run).
type mailbox struct {
	mu      sync.Mutex
	pending []any
	spare   []any
	system  []any

	turn      sync.Mutex   // held while running: see above
	takers    atomic.Int32 // callers in Take
	users     atomic.Int32 // user messages queued
	systems   atomic.Int32 // system messages queued
	suspended atomic.Bool

	invoker   protoactor.MessageInvoker
	batch     int     // most user messages a caller runs before handing off
	maxChecks int     // most checks gathered into one message; < 2: no gathering
	g         *gather // reused across runs; only the running goroutine touches it
	drain     func()  // m.runDrainer, bound once

	// h is the limiter's heir, set before the mailbox is used (nil in
	// tests of the mailbox alone): runCheck does the limiter's work on a
	// check call through it, without going through protoactor's actor
	// context, and, for a limiter whose callers take turns (the embedded
	// table), runSolo decides a lone check in place.
	h *heir

	// chore is a sweep that the limiter left to the callers taking turns
	// (see [heir.sendSelf]), nil if none; bit is the limiter's work on it
	// (heir.sweepBit), set with h for the embedded table; since counts the
	// turns handed on since its last bit. [mailbox.tendChore] runs it.
	// Only the goroutine holding the turn touches chore and since.
	chore *sweep
	bit   func(*sweep) bool
	since int

	// one and oneDec carry the check of a lone caller of a networked
	// store that decides it in place ([mailbox.runAlone]): only the
	// goroutine holding the turn touches them, and the check's id is
	// cleared once decided.
	one    [1]algo.Check
	oneDec [1]algo.Decision
}

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
	if m.turn.TryLock() {
		m.runOwn(msg)
		return
	}
	m.enqueue(msg)
	m.schedule()
}

// Take is PostUserMessage for a synchronous caller whose message is cheap
// to serve (a check on the embedded table): it waits for its turn to run
// the mailbox and then runs it on its own goroutine, msg alone if nothing
// is queued, or behind the queued messages (up to a batch; a drainer
// goroutine takes the rest, and maybe msg). The check runs on the caller's
// processor, with no hand-off to another goroutine and no wake-up to wait
// for.
//
// A caller that finds the mailbox busy waits on the turn as on any
// sync.Mutex, which it is: the runtime spins a little while the holder
// runs on another processor, then parks the caller, and hands the turn
// straight to the longest waiter once one has waited a millisecond. The
// cost of a contended check is thus a mutex's around the store's work, on
// any CPU and scheduler, with no spin counts or yields of our own to tune
// (earlier ones, tuned on one CPU, cost 2-4 times a mutex on another).
//
// If ctx has ended when a caller that had to wait gets its turn, Take does
// not run msg and reports false: the caller gave up while it waited, which
// is at most one message for each caller ahead of it. Otherwise it reports
// true. ctx is looked at only after a wait, so the uncontended path costs
// nothing more. Take must not be called from the goroutine running the
// mailbox (the limiter's own Receive).
func (m *mailbox) Take(ctx context.Context, msg any) bool {
	if !m.lockTurn(ctx) {
		return false
	}
	m.runOwn(msg)
	return true
}

// lockTurn waits for the turn as [mailbox.Take] does, and reports whether
// the caller holds it: false if the caller had to wait and ctx had ended
// when the turn came, which it then passed on.
func (m *mailbox) lockTurn(ctx context.Context) bool {
	if m.turn.TryLock() {
		return true
	}
	m.takers.Add(1)
	m.turn.Lock()
	m.takers.Add(-1)
	if ctx.Err() != nil {
		if m.release() { // the turn is taken: pass on what is queued
			m.process(m.batch, nil)
		}
		return false
	}
	return true
}

// runSolo is [mailbox.runOwn] for one check of a caller that holds the
// turn (see [Client.Do]), when nothing is queued and the mailbox is not
// suspended: it decides chk in place ([mailbox.serveOne]), with the clock
// read at at (see [heir.instant]), writes its decision to d, releases the
// turn and reports true with the check's error. No call carries the check:
// chk and d stay where the caller has them, and the turn is held for the
// table's work alone, with nothing written that the next caller, on
// another processor, must fetch back but the table's own lines. Otherwise
// runSolo does nothing and reports false: the turn is still held, and the
// check must go behind what is queued, in a call of its own.
func (m *mailbox) runSolo(chk *algo.Check, at int64, d *algo.Decision) (bool, error) {
	if m.h == nil || !m.h.turns || m.users.Load() != 0 || m.systems.Load() != 0 || m.suspended.Load() {
		return false, nil
	}
	err := m.serveOne(chk, at, d)
	if m.release() {
		m.process(max(1, m.batch-1), nil)
	}
	return true, err
}

// runAlone is [mailbox.runSolo] for a store across the network: with the
// turn held, when nothing is queued and the mailbox is not suspended, it
// decides checks in place, in one Decide on the caller's goroutine (see
// [mailbox.serveAlone]), writes their decisions to out, releases the turn
// and reports true with their error. No call carries them: a lone caller
// pays no pooled call, no copy of its checks and none of a call's states,
// which exist for a caller that waits for someone else to answer it. The
// calls queued meanwhile go in the next round trip, run by this caller
// after its own, as behind a call it ran itself. Otherwise runAlone does
// nothing and reports false: the turn is still held, and the checks must
// go behind what is queued, in a call.
//
// checks and out are lent to the store until Decide returns, as a caller
// whose context cannot end lends them to a call: the caller runs the
// Decide itself, so nothing touches them after runAlone returns.
func (m *mailbox) runAlone(checks []algo.Check, out []algo.Decision) (bool, error) {
	if m.h == nil || m.h.turns || m.users.Load() != 0 || m.systems.Load() != 0 || m.suspended.Load() {
		return false, nil
	}
	err := m.serveAlone(checks, out)
	if m.release() {
		m.process(max(1, m.batch-1), nil)
	}
	return true, err
}

// runAloneOne is runAlone for one check, carried in the mailbox's own
// one and oneDec (the turn is held), so that chk and d, which the caller
// may have on its stack, are not handed to the store's interface, which
// would move them to the heap.
func (m *mailbox) runAloneOne(chk *algo.Check, d *algo.Decision) (bool, error) {
	if m.h == nil || m.h.turns || m.users.Load() != 0 || m.systems.Load() != 0 || m.suspended.Load() {
		return false, nil
	}
	m.one[0] = *chk
	err := m.serveAlone(m.one[:], m.oneDec[:])
	if err == nil {
		*d = m.oneDec[0]
	}
	m.one[0] = algo.Check{} // hold no id alive
	if m.release() {
		m.process(max(1, m.batch-1), nil)
	}
	return true, err
}

// serveAlone is runCheck for the checks of a caller holding the turn when
// nothing is queued, on a store across the network: the limiter's work on
// them, with the turn held, nothing queued and the mailbox not suspended,
// as for runCheck. Once the limiter has stopped for good they are not
// decided and the caller gets ErrClosed. A panic is the caller's
// ErrPanicked, and is escalated to the supervisor with a call holding
// copies of the checks, answered, as if it had been queued (as serveOne
// does).
func (m *mailbox) serveAlone(checks []algo.Check, out []algo.Decision) (err error) {
	if m.h.over.Load() {
		return ErrClosed
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanicked, r)
			k := &call{kind: callBatch, own: append([]algo.Check(nil), checks...), ownDecs: make([]algo.Decision, len(checks)), done: make(chan struct{}, 1)}
			k.batch, k.decs = k.own, k.ownDecs
			k.answer(err)
			m.invoker.EscalateFailure(r, k)
		}
	}()
	return m.h.decide(checks, out, m.h.instant(0))
}

// runOwn runs msg, with the turn held: directly when nothing is queued and
// the mailbox is not suspended, else from the queue behind the others.
func (m *mailbox) runOwn(msg any) {
	if m.users.Load() == 0 && m.systems.Load() == 0 && !m.suspended.Load() {
		if k, ok := msg.(*call); ok && m.h != nil && k.checks() {
			m.runCheck(k)
		} else {
			m.direct(msg)
		}
		if m.release() {
			m.process(max(1, m.batch-1), nil)
		}
		return
	}
	m.enqueue(msg)
	m.process(m.batch, msg)
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

// runCheck is direct for a check call: it runs the limiter's work on k
// itself, as the limiter's Receive would, without protoactor's actor
// context around it, so that the turn is held for the store's work and
// little else. The actor's contract holds: the turn is held, nothing is
// queued (no system message goes after it) and the mailbox is not
// suspended; a panic is escalated to the supervisor with k, as in direct,
// k's caller having been answered with ErrPanicked. Once the limiter has
// stopped for good k is dropped, as protoactor drops a stopped actor's
// messages, and its caller gets ErrClosed.
func (m *mailbox) runCheck(k *call) {
	if m.h.over.Load() {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, k)
		}
	}()
	m.h.serveCheck(k)
}

// serveOne is runCheck for the one check of a caller holding the turn when
// nothing is queued, decided by the embedded table in place: chk, d and
// the caller's error are the caller's own, on its stack. The actor's
// contract holds as in runCheck. Once the limiter has stopped for good the
// check is not decided and the caller gets ErrClosed. A panic is the
// caller's ErrPanicked, and is escalated to the supervisor with a call
// holding the check, answered, as if it had been queued: the supervisor
// may keep that message, so it is made only then.
func (m *mailbox) serveOne(chk *algo.Check, at int64, d *algo.Decision) (err error) {
	if m.h.over.Load() {
		return ErrClosed
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanicked, r)
			k := &call{kind: callCheck, own: []algo.Check{*chk}, ownDecs: make([]algo.Decision, 1), done: make(chan struct{}, 1)}
			k.batch, k.decs = k.own, k.ownDecs
			k.answer(err)
			m.invoker.EscalateFailure(r, k)
		}
	}()
	m.h.decideOne(chk, d, m.h.instant(at))
	return nil
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
	if m.turn.TryLock() {
		m.process(m.batch, nil)
	}
}

func (m *mailbox) runDrainer() { m.process(0, nil) }

// How a run ends.
type runEnd uint8

const (
	runEmpty  runEnd = iota // the mailbox is empty or suspended
	runBudget               // the budget ran out with messages left
	runYield                // a caller waits in Take for its turn
)

// process runs the mailbox until it is empty, or, with a positive budget,
// until budget user messages ran; then a drainer goroutine takes over. If
// a caller waits in [mailbox.Take] for its turn, process stops as soon as
// own has run (at once if own is nil) and leaves the turn, and the queue,
// to that caller: nobody waits for more than a message and their own.
func (m *mailbox) process(budget int, own any) {
	for {
		switch m.run(budget, own) {
		case runBudget:
			go m.drain() // still running: the drainer owns the mailbox now
			return
		case runYield:
			m.unlock() // a waiting caller takes it, and runs the rest
			return
		}
		if !m.release() {
			return
		}
		own = nil // it ran, or waits for a resume that someone else runs
	}
}

// release sets the mailbox idle and reports whether the caller took it back
// (it is running again) because something arrived after the last look and
// nobody else runs it. A caller waiting in Take for its turn always runs
// it: it runs the queue before its own message.
func (m *mailbox) release() bool {
	m.unlock()
	if m.takers.Load() > 0 {
		return false // a caller waiting in Take runs what is left
	}
	if m.systems.Load() == 0 && (m.suspended.Load() || m.users.Load() == 0) {
		return false
	}
	return m.turn.TryLock()
}

// unlock lets go of the turn, after tending the chore, if there is one.
func (m *mailbox) unlock() {
	if m.chore != nil {
		m.tendChore()
	}
	m.turn.Unlock()
}

// tendChore does a bit of the chore, a sweep, on the turn of a caller that
// is handing it on to a caller waiting for it: in every [choreEvery] such
// turns it deletes one entry, which costs about as much as a check, so a
// sweep adds a fraction of a check to each turn, no goroutine is started
// or woken for it, and it goes on under any load, as fast as the turns go
// round. A sweep that holds the turn for a chunk instead, while the
// callers of the other processors park one behind the other, leaves them
// to be woken one at a time (the mutex's starvation mode), which under
// load lasts as long as the sweep. The chore is done once a bit finds
// nothing more to delete.
//
// If nobody waits, or the mailbox is suspended or has a system message to
// run first, the chore goes back in the queue as the message it was, to
// go on in whole chunks (or after the restart): a chore never waits for a
// caller that may not come. A panic is escalated to the supervisor with
// the sweep, whose caller has been answered with ErrPanicked, as in
// runCheck; once the limiter has stopped for good the chore is dropped,
// as protoactor drops a stopped actor's messages.
func (m *mailbox) tendChore() {
	s := m.chore
	if m.h.over.Load() {
		m.chore = nil
		return
	}
	if m.takers.Load() == 0 || m.systems.Load() != 0 || m.suspended.Load() {
		m.chore, m.since = nil, 0
		m.enqueue(s)
		return
	}
	if m.since++; m.since < choreEvery {
		return
	}
	m.since = 0
	defer func() {
		if r := recover(); r != nil {
			m.chore = nil
			m.invoker.EscalateFailure(r, s)
		}
	}()
	if !m.bit(s) {
		m.chore = nil
	}
}

// run processes system messages first, then user messages in batches. It
// reports why it stopped: the budget ran out with messages left, or a
// caller waits for its turn and own (if not nil) has run, or the mailbox
// is empty or suspended. After a panic the
// messages of the batch behind the failing one go back to the front of the
// queue, and the failure is escalated to the supervisor.
func (m *mailbox) run(budget int, own any) (end runEnd) {
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
			end = runEmpty
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
			return runEmpty
		}
		if budget > 0 && ran >= budget {
			if m.users.Load() == 0 && m.systems.Load() == 0 {
				return runEmpty
			}
			return runBudget
		}
		batch = m.swap(batch)
		if len(batch) == 0 {
			return runEmpty
		}
		for rest = batch; len(rest) > 0; {
			var n int
			msg, rest, n = m.next(rest)
			if own != nil && carries(msg, own) {
				own = nil // after this one, a waiting caller may take over
			}
			m.users.Add(-int32(n))
			m.invoker.InvokeUserMessage(msg)
			ran += n
			if m.systems.Load() > 0 { // a stop or suspend goes before the rest
				m.requeue(rest)
				rest = nil
			} else if own == nil && m.takers.Load() > 0 {
				m.requeue(rest)
				return runYield
			}
		}
	}
}

// carries reports whether msg is own, or a gather of calls that holds it.
func carries(msg, own any) bool {
	if msg == own {
		return true
	}
	if g, ok := msg.(*gather); ok {
		for _, k := range g.calls {
			if any(k) == own {
				return true
			}
		}
	}
	return false
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
