package actor

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/janitor"
)

// limiter is the actor that drives the store. Everything it keeps across
// restarts lives in the heir; the struct itself holds only what an
// incarnation may lose.
type limiter struct {
	h        *heir
	sweeping bool // a janitor sweep is in progress
}

// Receive implements protoactor.Actor. It is a type switch over small
// message types; each case answers its caller, even when it panics.
func (l *limiter) Receive(c protoactor.Context) {
	switch m := c.Message().(type) {
	case *call:
		l.serve(c, m)
	case *gather:
		defer answerAllOnPanic(m)
		l.serveGather(m)
	case *sweep:
		defer endSweepOnPanic(m)
		l.continueSweep(c, m)
	case *janitor.Sweep:
		if !l.sweeping {
			l.sweeping = true
			l.continueSweep(c, &sweep{before: l.cutoff(m.Timeout), start: l.now(), janitor: l})
		}
	case flushRequest:
		l.h.flushJournal()
	case snapshotRequest:
		l.h.snapshotJournal(c, l.now())
	case *snapshotWalk:
		l.h.continueSnapshot(c, m, l.now())
	case *protoactor.Restarting:
		l.h.restarting()
	case *protoactor.Stopped:
		l.h.stopped()
	default:
		l.serveProtocol(c, m)
	}
}

func (l *limiter) serve(c protoactor.Context, k *call) {
	if k.checks() {
		l.h.serveCheck(k) // answers k if it panics
		return
	}
	if k.gone() {
		return // its caller gave up before we got to it: nothing counted
	}
	defer answerOnPanic(k)
	switch k.kind {
	case callStats:
		k.stats = l.h.stats()
		k.answer(nil)
	case callSweep:
		l.continueSweep(c, &sweep{before: l.cutoff(l.h.cfg.SweepTimeout), reply: k, start: l.now()})
	}
}

// serveGather decides the checks of every call in g that still has a
// caller in one Decide, at one instant, and answers each call with its own
// decisions, or every one of them with the store's error.
//
// Every call in g.calls is answered exactly once: a call leaves g.calls
// when it is answered, and a call kept for the Decide is moved down, never
// copied, so that [answerAllOnPanic] answers each call not yet answered
// once and no other (a second answer could reach the call's next use).
func (l *limiter) serveGather(g *gather) {
	live := 0
	for i, k := range g.calls {
		if k.gone() {
			g.calls[i] = nil
			continue
		}
		err := l.h.screen(k.batch) // if it panics, k is still in g.calls, once
		g.calls[i] = nil
		if err != nil {
			k.answer(err) // a check the store refuses fails its own call only
			continue
		}
		g.calls[live] = k
		live++
	}
	clear(g.calls[live:])
	g.calls = g.calls[:live]
	switch live {
	case 0:
		return
	case 1: // the others gave up: decide in the call's own slices
		k := g.calls[0]
		k.answer(l.h.decide(k.batch, k.decs, l.now()))
		g.calls[0] = nil
		return
	}
	g.checks = g.checks[:0]
	for _, k := range g.calls {
		g.checks = append(g.checks, k.batch...)
	}
	g.decs = grow(g.decs, len(g.checks))
	err := l.h.decide(g.checks, g.decs, l.now())
	var partial *algo.CheckErrors
	if !errors.As(err, &partial) {
		partial = nil
	}
	off, j := 0, 0
	for i, k := range g.calls {
		n := len(k.batch)
		kerr := err
		if partial != nil { // only the calls holding a failed check fail
			kerr = nil
			for ; j < len(partial.Index) && partial.Index[j] < off+n; j++ {
				if kerr == nil {
					kerr = fmt.Errorf("actorlimit: store: %w", partial.Errs[j])
				}
			}
		}
		if kerr == nil {
			copy(k.decs, g.decs[off:off+n])
		}
		off += n
		k.answer(kerr)
		g.calls[i] = nil
	}
	clear(g.checks) // hold no id alive
}

// now reads the clock, in Unix nanoseconds, and notes the instant.
func (l *limiter) now() int64 { return l.h.now() }

// now reads the clock, in Unix nanoseconds, and notes the instant.
func (h *heir) now() int64 {
	t := h.cfg.Clock.Now().UnixNano()
	h.last = t
	return t
}

// instant returns the instant to decide a call at whose caller read the
// clock at at before it waited for its turn (0: it did not): at itself, so
// that the clock is read outside the turn and the turn is held for less
// time, unless the limiter has decided at a later instant since; then, as
// for a call that did not read it, the clock read now. The instants the
// store sees thus never go back (unless the clock does).
func (h *heir) instant(at int64) int64 {
	if at != 0 && at >= h.last {
		h.last = at
		return at
	}
	return h.now()
}

// serveCheck decides the checks of k, a callCheck or callBatch, at one
// instant and answers it; a caller that gave up is skipped. It is the
// limiter's work on such a call, and must run as the limiter does: in the
// limiter's Receive, or by the goroutine holding the mailbox's turn (see
// [mailbox.runCheck]). If deciding panics, k's caller is answered with
// ErrPanicked and the panic goes on.
func (h *heir) serveCheck(k *call) {
	if k.gone() {
		return // its caller gave up before we got to it: nothing counted
	}
	defer answerOnPanic(k)
	k.answer(h.decide(k.batch, k.decs, h.instant(k.at))) // one instant for the whole message
}

// cutoff returns the Unix ns time at or before which a window must have
// ended for its entry to be deleted by a sweep with the given timeout.
func (l *limiter) cutoff(timeout time.Duration) int64 {
	return l.h.cfg.Clock.Now().Add(-timeout).UnixNano()
}

// continueSweep deletes one chunk and either sends the rest of the sweep to
// itself, behind the messages already queued, or reports the total.
func (l *limiter) continueSweep(c protoactor.Context, s *sweep) {
	began := time.Now()
	if l.h.sweepChunk(s, SweepChunk) {
		l.h.sendSelf(c, s, time.Since(began))
	}
}

// sweepChunk deletes at most most entries of s, and reports whether some
// may be left; if not, it ends s: counts it, and answers its caller (or
// tells the janitor's limiter that it may sweep again). It must run as the
// limiter does (see [heir.serveCheck]).
func (h *heir) sweepChunk(s *sweep, most int) (more bool) {
	n, more := h.store.Expire(s.before, most)
	s.removed += n
	h.expired += uint64(n)
	if more {
		return true
	}
	h.sweeps++
	h.sweepTime += time.Duration(max(0, h.now()-s.start))
	if s.janitor != nil {
		s.janitor.sweeping = false
	}
	if s.reply != nil {
		s.reply.n = s.removed
		s.reply.answer(nil)
	}
	return false
}

// sweepBit is [mailbox.tendChore]'s work on a sweep left to the callers
// taking turns: it deletes one entry of s, as sweepChunk does, and answers
// its caller with ErrPanicked if that panics.
func (h *heir) sweepBit(s *sweep) (more bool) {
	defer endSweepOnPanic(s)
	return h.sweepChunk(s, 1)
}

// sendSelf sends msg, the rest of a chunked job (a sweep, a snapshot), to
// the limiter, behind the messages queued meanwhile, so that the callers
// waiting go between two chunks. took is how long the chunk just done took.
//
// Callers that take turns are not queued: each would run the next chunk
// before its own check, and the 256 callers of two processors, parked one
// behind the other while a chunk of tens of microseconds holds the turn,
// would then be woken one at a time (the mutex's starvation mode) for as
// long as the job lasts. A sweep is left to them instead, as the mailbox's
// chore (see [mailbox.tendChore]): in every few turns handed on to a
// waiting caller, the caller handing it on deletes one entry first, so the
// turn is never held for much longer than a check, and no goroutine is
// started or woken for the sweep; once nobody waits, the rest goes back in
// the queue, in chunks. Any other job (a snapshot), or a second sweep while
// one is the chore, is posted only after as long again as the last chunk
// took: the job then takes at most half the limiter's time, and a caller
// waits for at most one chunk, not one per turn ahead of it. With nobody
// waiting it goes on at once.
func (h *heir) sendSelf(c protoactor.Context, msg any, took time.Duration) {
	if h.turns {
		if m := h.mailbox.Load(); m != nil && m.takers.Load() > 0 {
			if s, ok := msg.(*sweep); ok && m.chore == nil {
				m.chore = s
				return
			}
			time.AfterFunc(took, func() { m.PostUserMessage(msg) })
			return
		}
		c.Send(c.Self(), msg)
		return
	}
	c.Send(c.Self(), msg)
	// Let the callers answered meanwhile run: a woken goroutine waits on
	// this processor until the goroutine running the mailbox yields.
	runtime.Gosched()
}

// endSweepOnPanic answers the caller of a Sweep if the limiter panics while
// sweeping for it; recover must be called by the deferred function itself.
func endSweepOnPanic(s *sweep) {
	if r := recover(); r != nil {
		if s.reply != nil {
			s.reply.answer(fmt.Errorf("%w: %v", ErrPanicked, r))
		}
		panic(r)
	}
}

// serveProtocol answers a message of the outside API, if it is one.
func (l *limiter) serveProtocol(c protoactor.Context, m any) {
	p := l.h.cfg.Protocol
	if p == nil {
		return
	}
	chk, ok, err := p.Decode(m)
	if !ok {
		return
	}
	if err != nil {
		c.Respond(p.Reply(m, algo.Decision{}, err))
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.Respond(p.Reply(m, algo.Decision{}, fmt.Errorf("%w: %v", ErrPanicked, r)))
			panic(r)
		}
	}()
	var out [1]algo.Decision
	err = l.h.decide([]algo.Check{chk}, out[:], l.now())
	c.Respond(p.Reply(m, out[0], err))
}

// answerAllOnPanic answers every caller in g not answered yet if the
// limiter is panicking, then lets the panic go on to the supervisor.
func answerAllOnPanic(g *gather) {
	if r := recover(); r != nil {
		err := fmt.Errorf("%w: %v", ErrPanicked, r)
		for _, k := range g.calls {
			if k != nil {
				k.answer(err)
			}
		}
		panic(r)
	}
}

// answerOnPanic answers k's caller if the limiter is panicking, then lets
// the panic go on to the supervisor, which restarts the limiter.
func answerOnPanic(k *call) {
	if r := recover(); r != nil {
		k.answer(fmt.Errorf("%w: %v", ErrPanicked, r))
		panic(r)
	}
}
