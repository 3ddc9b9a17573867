package actor

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/algo"
)

// spins is how many times a caller yields, waiting for its answer, before
// it parks. It is a variable only so that tests can set it to 0 and make
// every caller park (export_test.go); nothing else changes it.
var spins = 16

// startTimeout bounds how long [Start] waits for the limiter's first start.
const startTimeout = 10 * time.Second

// Client is the synchronous handle of a running limiter: ordinary Go code
// calls the limiter through it. A Client is safe for concurrent use.
type Client struct {
	h    *heir
	root *protoactor.RootContext
	sup  *protoactor.PID
	pid  *protoactor.PID
	jan  *protoactor.PID

	fast      Answerer // the store's, if it answers some checks itself
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error // the Journal's, set by Close
	calls     sync.Pool
}

// Start spawns a supervisor, a limiter and (when cfg.SweepEvery > 0) a
// janitor under parent, and waits until the limiter runs.
func Start(parent protoactor.SpawnerContext, cfg Config) (*Client, error) {
	cfg.defaults()
	if cfg.SweepEvery < 0 || cfg.SweepTimeout < 0 {
		return nil, errors.New("actorlimit: janitor interval and timeout must not be negative")
	}
	h := newHeir(cfg)
	var target atomic.Pointer[protoactor.PID]
	if cfg.Journal != nil {
		if err := h.startJournal(parent.ActorSystem().Root, &target); err != nil {
			return nil, err
		}
	}
	sup := parent.SpawnPrefix(supervisorProps(h), "actorlimit")
	system := parent.ActorSystem()
	c := &Client{
		h:    h,
		root: system.Root,
		sup:  sup,
		pid:  protoactor.NewPID(sup.Address, sup.Id+"/"+limiterName),
	}
	if cfg.SweepEvery > 0 {
		c.jan = protoactor.NewPID(sup.Address, sup.Id+"/"+janitorName)
	}
	c.calls.New = func() any { return &call{done: make(chan struct{}, 1)} }
	if a, ok := h.store.(Answerer); ok && answers(a) {
		c.fast = a
	}
	target.Store(c.pid)
	select {
	case <-h.ready:
		select {
		case <-h.done: // the limiter could not be spawned
		default:
			return c, nil
		}
	case <-time.After(startTimeout):
	}
	c.Close()
	return nil, errors.New("actorlimit: limiter did not start")
}

// PID returns the limiter actor's PID, for actors that message it directly.
func (c *Client) PID() *protoactor.PID { return c.pid }

// Do runs one check through the limiter's mailbox and returns its decision.
// A nil error means the check was applied exactly once. If ctx ends (or the
// limiter stops) first, Do returns at once with that error, and the check
// may or may not have been applied: the limiter skips a call whose caller
// has gone, unless it was already serving it (as net/http says of a request
// whose context ends). With the embedded table the caller runs its check
// itself when its turn comes (see the package doc): a context that ends
// while it waits for its turn is seen when the turn comes, after at most
// one message of each caller ahead of it, and the check is then skipped.
func (c *Client) Do(ctx context.Context, chk algo.Check) (algo.Decision, error) {
	var d algo.Decision
	err := c.DoCheck(ctx, &chk, &d)
	return d, err
}

// DoCheck is [Client.Do] with the check and its decision passed by
// pointer: it decides *chk and writes the decision to *d (untouched on
// error). It keeps neither pointer after it returns. The root's Limiter
// calls it, to spare a check's path the copies of an 80-byte Check and its
// Decision.
func (c *Client) DoCheck(ctx context.Context, chk *algo.Check, d *algo.Decision) error {
	if c.fast != nil && chk.Op == algo.OpHit && !c.closed.Load() && ctx.Err() == nil {
		if dec, ok := c.answer(*chk); ok {
			*d = dec
			return nil
		}
	}
	if m := c.h.mailbox.Load(); m != nil {
		if c.h.turns {
			return c.doTurn(ctx, m, chk, d)
		}
		if ok, err := c.ready(ctx); !ok {
			return err
		}
		if m.turn.TryLock() {
			return c.doAlone(ctx, m, chk, d)
		}
	}
	k := c.calls.Get().(*call)
	c.fill(k, chk)
	k.at = c.readClock()
	if err := c.roundTrip(ctx, k); err != nil {
		return err
	}
	*d = k.decs[0]
	c.release(k)
	return nil
}

// fill makes k a check call for chk.
func (c *Client) fill(k *call, chk *algo.Check) {
	k.kind = callCheck
	k.own = append(k.own[:0], *chk)
	k.ownDecs = grow(k.ownDecs, 1)
	k.batch, k.decs = k.own, k.ownDecs
}

// doTurn is DoCheck for a caller that takes its turn to run the mailbox
// (the embedded table): it waits for the turn and runs its check itself,
// in place when nothing is queued ([mailbox.runSolo]), or in a pooled call
// behind what is queued.
func (c *Client) doTurn(ctx context.Context, m *mailbox, chk *algo.Check, d *algo.Decision) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("actorlimit: %w", err)
	}
	// The key's index slot, a miss from memory in a large table, loads
	// while the caller reads the clock and waits for its turn, not during
	// its turn, while every other caller waits.
	c.h.table.Prefetch(chk)
	at := c.readClock()
	if !m.lockTurn(ctx) {
		// Its context ended while it waited for its turn: nothing counted.
		return fmt.Errorf("actorlimit: %w", ctx.Err())
	}
	if ran, err := m.runSolo(chk, at, d); ran {
		return err
	}
	k := c.calls.Get().(*call)
	c.fill(k, chk)
	k.at = at
	m.runOwn(k)
	if err := c.await(ctx, k); err != nil {
		return err
	}
	*d = k.decs[0]
	c.release(k)
	return nil
}

// ready reports whether a call may be made: false with ErrClosed after
// Close, or with ctx's error once it has ended.
func (c *Client) ready(ctx context.Context) (bool, error) {
	if c.closed.Load() {
		return false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("actorlimit: %w", err)
	}
	return true, nil
}

// doAlone is DoCheck for a caller of a store across the network that took
// the idle mailbox's turn without waiting (the one in flight): nobody
// waits behind it, so it decides its check in place, in a Decide of its
// own on its own goroutine ([mailbox.runAloneOne]), with no pooled call
// and none of a call's states. If calls are queued after all, its check
// goes behind them in a call, which it runs, as [Client.doTurn] does. The
// round trip is not cut short by ctx (the store bounds it), as for a lone
// caller whose call the mailbox runs in place.
func (c *Client) doAlone(ctx context.Context, m *mailbox, chk *algo.Check, d *algo.Decision) error {
	if ran, err := m.runAloneOne(chk, d); ran {
		return err
	}
	k := c.calls.Get().(*call)
	c.fill(k, chk)
	m.runOwn(k)
	if err := c.await(ctx, k); err != nil {
		return err
	}
	*d = k.decs[0]
	c.release(k)
	return nil
}

// answers reports whether a may answer some hits: false for one that says
// it never does (see [Answerer]), which the limiter then never asks, so
// that its hits pay neither a clock read nor a copy of their check.
func answers(a Answerer) bool {
	q, ok := a.(interface{ Answering() bool })
	return !ok || q.Answering()
}

// answer asks the store's Answerer for chk's decision. It takes chk by
// value and hands the Answerer a pointer to its own copy, which escapes to
// the heap: kept out of Do, whose chk then stays on the stack for every
// store without an Answerer (the table: 0 allocations a check).
func (c *Client) answer(chk algo.Check) (algo.Decision, bool) {
	return c.fast.Answer(c.h.cfg.Clock.Now().UnixNano(), &chk)
}

// DoMany runs every check of checks, in order, in one round trip through the
// limiter's mailbox, and writes their decisions into out, which must be at
// least as long. Nothing else runs between them. If the limiter panics in
// the middle, the checks before the panic have been applied and the error is
// ErrPanicked. If ctx ends first, as for [Client.Do], the checks may or may
// not have been applied, and out is left untouched. On any other error, out
// holds no decision that can be relied on. Either way, checks and out are
// the caller's again as soon as DoMany returns: when ctx can end, the
// limiter works on copies, which a late answer writes into; when it cannot
// (ctx.Done() is nil), DoMany returns only once the limiter has answered or
// stopped, so it lends checks and out to the limiter without copying them.
func (c *Client) DoMany(ctx context.Context, checks []algo.Check, out []algo.Decision) error {
	if len(out) < len(checks) {
		return fmt.Errorf("actorlimit: %d decisions for %d checks", len(out), len(checks))
	}
	if len(checks) == 0 {
		return nil
	}
	if m := c.h.mailbox.Load(); m != nil && !c.h.turns {
		if ok, err := c.ready(ctx); !ok {
			return err
		}
		if m.turn.TryLock() {
			// The one in flight: decided in place, in checks and out
			// themselves, when nothing is queued (see [Client.doAlone]).
			if ran, err := m.runAlone(checks, out[:len(checks)]); ran {
				return err
			}
			k := c.calls.Get().(*call)
			c.fillMany(ctx, k, checks, out)
			m.runOwn(k)
			return c.awaitMany(ctx, k, out)
		}
	}
	k := c.calls.Get().(*call)
	c.fillMany(ctx, k, checks, out)
	k.at = c.readClock()
	if err := c.roundTrip(ctx, k); err != nil {
		return err
	}
	if !k.borrowed {
		copy(out, k.decs)
	}
	c.release(k)
	return nil
}

// fillMany makes k a batch call for checks, whose decisions go to out:
// lent to the limiter when ctx cannot end, copied otherwise (see
// [Client.DoMany]).
func (c *Client) fillMany(ctx context.Context, k *call, checks []algo.Check, out []algo.Decision) {
	k.kind = callBatch
	if ctx.Done() == nil {
		k.batch, k.decs, k.borrowed = checks, out[:len(checks)], true
	} else {
		k.own = append(k.own[:0], checks...)
		k.ownDecs = grow(k.ownDecs, len(checks))
		k.batch, k.decs = k.own, k.ownDecs
	}
}

// awaitMany waits for the answer to k, a batch call that the caller
// posted, and copies its decisions to out unless they were lent.
func (c *Client) awaitMany(ctx context.Context, k *call, out []algo.Decision) error {
	if err := c.await(ctx, k); err != nil {
		return err
	}
	if !k.borrowed {
		copy(out, k.decs)
	}
	c.release(k)
	return nil
}

// readClock returns the time, in Unix ns, for a caller that takes its turn
// to run the limiter, read before it waits for the turn (see
// [heir.instant]); 0 for a caller that only queues its call. A clock that
// panics is the limiter's failure, not the caller's: readClock then
// returns 0, and the limiter reads the clock itself on the caller's turn,
// where the panic goes to the supervisor.
func (c *Client) readClock() (at int64) {
	if !c.h.turns {
		return 0
	}
	if _, ok := c.h.cfg.Clock.(wallClock); ok {
		// The default clock cannot panic: no deferred recover (about 80
		// instructions of a check's 1 800, bench/results/instructions.md).
		return time.Now().UnixNano()
	}
	defer func() {
		if recover() != nil {
			at = 0
		}
	}()
	return c.h.cfg.Clock.Now().UnixNano()
}

// grow returns s with length n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Sweep runs one sweep now, with the configured timeout, and returns how
// many entries it deleted. It is served in chunks like the janitor's.
func (c *Client) Sweep(ctx context.Context) (int, error) {
	k := c.calls.Get().(*call)
	k.kind = callSweep
	if err := c.roundTrip(ctx, k); err != nil {
		return 0, err
	}
	n := k.n
	c.release(k)
	return n, nil
}

// Stats returns the limiter's statistics.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	k := c.calls.Get().(*call)
	k.kind = callStats
	if err := c.roundTrip(ctx, k); err != nil {
		return Stats{}, err
	}
	s := k.stats
	c.release(k)
	return s, nil
}

// roundTrip sends k and waits for its answer, the context's end or the
// limiter's stop, whichever comes first, moving k through the states
// written down at [call]. It returns nil only for a call the limiter has
// answered and will never touch again, which may go back to the pool; a
// call that returns an error is never pooled.
func (c *Client) roundTrip(ctx context.Context, k *call) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("actorlimit: %w", err)
	}
	if !c.post(ctx, k) {
		// Its context ended while it waited for its turn: k never reached
		// the limiter, and nothing was counted.
		return fmt.Errorf("actorlimit: %w", ctx.Err())
	}
	return c.await(ctx, k)
}

// await waits for the answer to k, posted, as roundTrip does.
func (c *Client) await(ctx context.Context, k *call) error {
	// A caller that ran the mailbox itself is answered already. Others
	// yield the processor a few times before they park: on a busy limiter
	// the answer usually comes within a batch, and a parked goroutine costs
	// a wake-up, often of an idle thread.
	for range spins {
		if k.state.Load() == answered {
			return k.err
		}
		runtime.Gosched()
	}
	if !k.state.CompareAndSwap(waiting, parked) {
		return k.err // answered while we decided to park
	}
	select {
	case <-k.done:
		return k.err
	case <-ctx.Done():
		return abandon(k, fmt.Errorf("actorlimit: %w", ctx.Err()))
	case <-c.h.done:
		return abandon(k, ErrClosed)
	}
}

// post hands k to the limiter's mailbox: by taking its turn to run it, for
// a store that decides in memory, or through protoactor's Send otherwise
// (which queues k behind a busy limiter, to be gathered with other calls).
// A turn keeps the actor's contract: k is still a message run by the
// mailbox, one at a time, with panics escalated to the supervisor.
//
// A caller that had to wait for its turn and finds ctx ended when it comes
// does not post k, and post reports false.
func (c *Client) post(ctx context.Context, k *call) bool {
	if c.h.turns {
		if m := c.h.mailbox.Load(); m != nil {
			return m.Take(ctx, k)
		}
	}
	if m := c.h.mailbox.Load(); m != nil {
		// What protoactor's Send does once it has found the limiter's
		// process: post k to its mailbox. A mailbox that finds itself idle
		// runs k on this goroutine (see [mailbox.PostUserMessage]).
		m.PostUserMessage(k)
		return true
	}
	c.root.Send(c.pid, k)
	return true
}

// abandon gives up on a parked call and returns why, unless the limiter
// answered it first: then it waits for the signal the limiter is sending
// (its last touch of k, which never blocks) and returns the answer.
func abandon(k *call, why error) error {
	if k.state.CompareAndSwap(parked, abandoned) {
		traceAbandon(true)
		return why
	}
	traceAbandon(false)
	<-k.done
	return k.err
}

// traceAbandon is told how each abandon ended: won is false when the
// limiter had answered first. It does nothing, except in tests that count
// how often the races they are about happened (export_test.go).
var traceAbandon = func(won bool) {}

func (c *Client) release(k *call) {
	k.err = nil
	k.at = 0
	clear(k.own) // drop the ids
	k.own = k.own[:0]
	k.batch, k.decs, k.borrowed = nil, nil, false
	k.state.Store(waiting)
	c.calls.Put(k)
}

// Close stops the janitor, lets the limiter answer every call already
// queued, and stops it and its supervisor; with a Journal, it then hands
// it a last snapshot and closes it. Calls made after Close return
// ErrClosed. Close is idempotent. It returns the Journal's error, the same
// at every call: the last snapshot, or the records after it, could not be
// written, so the state kept is older than the limiter's; nil otherwise.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		if c.jan != nil {
			_ = c.root.StopFuture(c.jan).Wait()
		}
		select {
		case <-c.h.done:
		default:
			_ = c.root.PoisonFuture(c.pid).Wait() // queued calls go first
		}
		_ = c.root.StopFuture(c.sup).Wait()
		c.h.stopped()
		c.closeErr = c.h.closeJournal()
	})
	return c.closeErr
}
