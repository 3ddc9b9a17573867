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
		defer answerOnPanic(m)
		l.serve(c, m)
	case *gather:
		defer answerAllOnPanic(m)
		l.serveGather(m)
	case *sweep:
		defer l.endSweepOnPanic(m)
		l.continueSweep(c, m)
	case *janitor.Sweep:
		if !l.sweeping {
			l.sweeping = true
			l.continueSweep(c, &sweep{before: l.cutoff(m.Timeout), start: l.now()})
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
	if k.gone() {
		return // its caller gave up before we got to it: nothing counted
	}
	switch k.kind {
	case callCheck, callBatch:
		// one instant for the whole message
		k.answer(l.h.decide(k.batch, k.decs, l.now()))
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

// now reads the clock, in Unix nanoseconds.
func (l *limiter) now() int64 { return l.h.cfg.Clock.Now().UnixNano() }

// cutoff returns the Unix ns time at or before which a window must have
// ended for its entry to be deleted by a sweep with the given timeout.
func (l *limiter) cutoff(timeout time.Duration) int64 {
	return l.h.cfg.Clock.Now().Add(-timeout).UnixNano()
}

// continueSweep deletes one chunk and either sends the rest of the sweep to
// itself, behind the messages already queued, or reports the total.
func (l *limiter) continueSweep(c protoactor.Context, s *sweep) {
	began := time.Now()
	n, more := l.h.store.Expire(s.before, SweepChunk)
	s.removed += n
	l.h.expired += uint64(n)
	if more {
		l.h.sendSelf(c, s, time.Since(began))
		return
	}
	l.h.sweeps++
	l.h.sweepTime += time.Duration(max(0, l.now()-s.start))
	if s.reply == nil {
		l.sweeping = false
		return
	}
	s.reply.n = s.removed
	s.reply.answer(nil)
}

// sendSelf sends msg, the rest of a chunked job (a sweep, a snapshot), to
// the limiter, behind the messages queued meanwhile, so that the callers
// waiting go between two chunks. took is how long the chunk just done took.
//
// Callers that take turns are not queued: each would run the next chunk
// before its own check, so while they wait the chunk is posted only after
// as long again as the last one took. The job then takes at most half the
// limiter's time, and a caller waits for at most one chunk, not one per
// turn ahead of it; with nobody waiting it goes on at once.
func (h *heir) sendSelf(c protoactor.Context, msg any, took time.Duration) {
	if h.turns {
		if m := h.mailbox.Load(); m != nil && m.takers.Load() > 0 {
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
func (l *limiter) endSweepOnPanic(s *sweep) {
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
