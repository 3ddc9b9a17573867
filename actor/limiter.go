package actor

import (
	"fmt"
	"runtime"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/janitor"
	"github.com/actorlimit/actorlimit/table"
)

// limiter is the actor that owns the table. Everything it keeps across
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
	case *sweep:
		defer l.endSweepOnPanic(m)
		l.continueSweep(c, m)
	case *janitor.Sweep:
		if !l.sweeping {
			l.sweeping = true
			l.continueSweep(c, &sweep{before: l.cutoff(m.Timeout)})
		}
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
	case callCheck:
		k.dec = l.apply(&k.check, l.now())
		k.answer(nil)
	case callBatch:
		now := l.now() // one instant for the whole batch
		for i := range k.batch {
			k.decs[i] = l.apply(&k.batch[i], now)
		}
		k.answer(nil)
	case callStats:
		k.stats = l.h.stats()
		k.answer(nil)
	case callSweep:
		l.continueSweep(c, &sweep{before: l.cutoff(l.h.cfg.SweepTimeout), reply: k})
	}
}

// now reads the clock, in Unix nanoseconds.
func (l *limiter) now() int64 { return l.h.cfg.Clock.Now().UnixNano() }

// apply runs one check against the table at now (Unix ns).
func (l *limiter) apply(chk *Check, now int64) table.Decision {
	if f := l.h.cfg.Inject; f != nil {
		f(*chk)
	}
	tbl, k := l.h.tbl, chk.key()
	switch chk.Op {
	case OpReset:
		tbl.Delete(k)
		return table.Decision{}
	case OpPeek:
		return peek(tbl, chk, k, now)
	}
	switch chk.Kind {
	case SlidingWindow:
		return tbl.SlidingWindow(k, chk.Limit, chk.N, now)
	case GCRA:
		return tbl.GCRA(k, chk.Limit, chk.Burst, chk.N, now)
	case TokenBucket:
		return tbl.TokenBucket(k, chk.Limit, chk.Burst, chk.N, now)
	case LeakyBucket:
		return tbl.LeakyBucket(k, chk.Limit, chk.Burst, chk.N, now)
	case SlidingLog:
		return tbl.SlidingLog(k, chk.Limit, chk.N, now)
	}
	return tbl.FixedWindow(k, chk.Limit, chk.N, now)
}

// peek reports chk's key as its algorithm sees it, changing nothing.
func peek(tbl *table.Table, chk *Check, k table.Key, now int64) table.Decision {
	switch chk.Kind {
	case SlidingWindow:
		return tbl.PeekSlidingWindow(k, chk.Limit, now)
	case GCRA:
		return tbl.PeekGCRA(k, chk.Limit, chk.Burst, now)
	case TokenBucket:
		return tbl.PeekTokenBucket(k, chk.Limit, chk.Burst, now)
	case LeakyBucket:
		return tbl.PeekLeakyBucket(k, chk.Limit, chk.Burst, now)
	case SlidingLog:
		return tbl.PeekSlidingLog(k, chk.Limit, now)
	}
	return tbl.PeekFixedWindow(k, chk.Limit, now)
}

// cutoff returns the Unix ns time at or before which a window must have
// ended for its entry to be deleted by a sweep with the given timeout.
func (l *limiter) cutoff(timeout time.Duration) int64 {
	return l.h.cfg.Clock.Now().Add(-timeout).UnixNano()
}

// continueSweep deletes one chunk and either sends the rest of the sweep to
// itself, behind the messages already queued, or reports the total.
func (l *limiter) continueSweep(c protoactor.Context, s *sweep) {
	n, more := l.h.tbl.Expire(s.before, SweepChunk)
	s.removed += n
	l.h.expired += uint64(n)
	if more {
		c.Send(c.Self(), s)
		// Let the callers answered meanwhile run: a woken goroutine waits
		// on this processor until the goroutine running the mailbox yields.
		runtime.Gosched()
		return
	}
	if s.reply == nil {
		l.sweeping = false
		return
	}
	s.reply.n = s.removed
	s.reply.answer(nil)
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
		c.Respond(p.Reply(m, table.Decision{}, err))
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.Respond(p.Reply(m, table.Decision{}, fmt.Errorf("%w: %v", ErrPanicked, r)))
			panic(r)
		}
	}()
	c.Respond(p.Reply(m, l.apply(&chk, l.now()), nil))
}

// answerOnPanic answers k's caller if the limiter is panicking, then lets
// the panic go on to the supervisor, which restarts the limiter.
func answerOnPanic(k *call) {
	if r := recover(); r != nil {
		k.answer(fmt.Errorf("%w: %v", ErrPanicked, r))
		panic(r)
	}
}
