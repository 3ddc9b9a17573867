package actor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/janitor"
	"github.com/actorlimit/actorlimit/table"
)

// Child names under the supervisor; fixed, so that PIDs are known in advance
// and survive restarts.
const (
	limiterName = "limiter"
	janitorName = "janitor"
)

// Clock tells the limiter the time.
type Clock interface {
	Now() time.Time
}

// Ticker is what the janitor ticks on: [janitor.Ticker].
type Ticker = janitor.Ticker

// TickerClock is a Clock that can also tick. When the configured Clock is
// one, the janitor ticks on it; otherwise on the wall clock.
type TickerClock interface {
	Clock
	NewTicker(d time.Duration) Ticker
}

// Config configures a limiter. [Start] fills in zero fields with defaults.
type Config struct {
	// Clock is read for every check and sweep; default: the wall clock. A
	// [TickerClock] also drives the janitor.
	Clock Clock
	// Store keeps the state; nil means an embedded [table.Table] bounded
	// by MaxEntries. The limiter is its only caller; see [Store].
	Store Store
	// MaxEntries bounds the embedded table; 0 means no bound. It is not
	// used when Store is set.
	MaxEntries int
	// SweepEvery is the janitor's interval; 0 means no janitor.
	SweepEvery time.Duration
	// SweepTimeout is how long an entry is kept after its window ended.
	SweepTimeout time.Duration
	// MaxRestarts is how many restarts within RestartWindow are tolerated
	// before the limiter is stopped; default 10 within 10 s.
	MaxRestarts   int
	RestartWindow time.Duration
	// Throughput is how many messages a caller that runs the mailbox
	// processes before it hands the rest to a goroutine; default 300.
	Throughput int
	// MaxBatch bounds the checks that one Store.Decide gets when the
	// limiter gathers the check calls queued one behind the other (default
	// [DefaultMaxBatch]); a single call with more checks is still decided
	// whole. 1 turns gathering off: one Decide per call.
	MaxBatch int
	// Logger receives restarts and stops; default: discard.
	Logger *slog.Logger
	// Protocol decodes messages from other actors; nil: none.
	Protocol Protocol
	// Journal keeps the state across restarts of the process; nil: none.
	// The Store must then be a [Snapshotter].
	Journal Journal
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (c *Config) defaults() {
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.MaxRestarts <= 0 {
		c.MaxRestarts = 10
	}
	if c.RestartWindow <= 0 {
		c.RestartWindow = 10 * time.Second
	}
	if c.Throughput <= 0 {
		c.Throughput = 300
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// heir holds what outlives an incarnation of the limiter: the store and the
// counters. Only the limiter touches the store and the counters; ready and done
// are closed once: when the supervisor has spawned its children, and when
// the limiter stops for good.
type heir struct {
	cfg       Config
	store     Store
	restarts  int
	expired   uint64
	sweeps    uint64
	sweepTime time.Duration
	last      int64                   // the latest instant decided at (Unix ns)
	snap      Snapshotter             // the store, when it has a Journal
	dirty     dirtySet                // keys changed since the Journal's last flush
	walk      *snapshotWalk           // the snapshot being taken, if any
	mailbox   atomic.Pointer[mailbox] // the limiter's, set at each spawn; read by stats and tests
	screener  Screener                // store, if it is one; nil for the embedded table
	turns     bool                    // callers take turns running the mailbox (see [mailbox.Take])
	table     *table.Table            // store, if it is the embedded table (then turns is true)
	over      atomic.Bool             // the limiter stopped for good: done is closed, or about to be

	ready     chan struct{}
	readyOnce sync.Once
	done      chan struct{}
	doneOnce  sync.Once
}

func newHeir(cfg Config) *heir {
	store := cfg.Store
	if store == nil {
		store = table.New(cfg.MaxEntries)
	}
	screener, _ := store.(Screener)
	// The embedded table decides a check in well under a microsecond, so a
	// caller waits less for its turn than it would for a hand-off; a store
	// that waits on the network gathers the calls queued behind a round
	// trip instead.
	tbl, turns := store.(*table.Table)
	return &heir{
		cfg:      cfg,
		store:    store,
		screener: screener,
		turns:    turns,
		table:    tbl,
		ready:    make(chan struct{}),
		done:     make(chan struct{}),
	}
}

func (h *heir) restarting() {
	h.restarts++
	h.cfg.Logger.Warn("actorlimit: limiter restarting", slog.Int("restarts", h.restarts))
}

func (h *heir) stopped() {
	h.over.Store(true)
	h.doneOnce.Do(func() { close(h.done) })
}

// decide has the store decide checks at now, writing their decisions to
// out. A store's error is translated so that callers can test it with
// errors.Is against the store's own sentinel and see it came from the store;
// a batch the store refused for one of its checks gets screen's error.
func (h *heir) decide(checks []algo.Check, out []algo.Decision, now int64) error {
	if err := h.store.Decide(context.Background(), now, checks, out); err != nil {
		if refused := h.screen(checks); refused != nil {
			return refused
		}
		var partial *algo.CheckErrors
		if errors.As(err, &partial) && h.snap != nil {
			h.markDirty(checks) // the others were applied
		}
		return fmt.Errorf("actorlimit: store: %w", err)
	}
	if h.snap != nil {
		h.markDirty(checks)
	}
	return nil
}

// decideOne is decide for one check on the embedded table (h.table), at
// now, writing its decision to d: no slices, no interface, so that chk and
// d, which [mailbox.serveOne] has from the caller's stack, stay there.
func (h *heir) decideOne(chk *algo.Check, d *algo.Decision, now int64) {
	h.table.ApplyTo(chk, now, d)
	if h.snap != nil && chk.Op != algo.OpPeek {
		h.dirty.add(chk)
	}
}

// screen returns the error the store would refuse a batch holding one of
// checks with, or nil (always, for a store that is no Screener). It wraps
// [algo.ErrInvalid] as well as the store's error: a refused batch counts
// nothing, like bad input, so a caller that retries its checks one by one
// after bad input (httpadapter does) keeps the others.
func (h *heir) screen(checks []algo.Check) error {
	if h.screener == nil {
		return nil
	}
	for i := range checks {
		if err := h.screener.Screen(&checks[i]); err != nil {
			return fmt.Errorf("%w: store: %w", algo.ErrInvalid, err)
		}
	}
	return nil
}

func (h *heir) stats() Stats {
	s := Stats{
		Entries:   h.store.Len(),
		Evictions: h.store.Evictions(),
		Expired:   h.expired,
		Restarts:  h.restarts,
		Sweeps:    h.sweeps,
		SweepTime: h.sweepTime,
	}
	if m := h.mailbox.Load(); m != nil {
		s.Queued = m.UserMessageCount()
	}
	if h.snap != nil {
		s.PersistErrors, s.PersistDropped = h.cfg.Journal.Failures()
	}
	return s
}

// supervisor is the parent of the limiter and the janitor. It keeps the
// heir, so every incarnation of the limiter gets the same store.
type supervisor struct {
	h *heir
}

// Receive implements protoactor.Actor.
func (s *supervisor) Receive(c protoactor.Context) {
	switch m := c.Message().(type) {
	case *protoactor.Started:
		s.spawnChildren(c)
		s.h.readyOnce.Do(func() { close(s.h.ready) })
	case *protoactor.Terminated:
		if m.Who.Id == c.Self().Id+"/"+limiterName {
			s.h.stopped()
		}
	}
}

func (s *supervisor) spawnChildren(c protoactor.Context) {
	cfg := s.h.cfg
	props := protoactor.PropsFromProducer(
		func() protoactor.Actor { return &limiter{h: s.h} },
		protoactor.WithMailbox(func() protoactor.Mailbox {
			m := newMailbox(cfg.Throughput, cfg.MaxBatch)
			// Every limiter's check calls run straight from the mailbox
			// (mailbox.runCheck), not through protoactor's actor context:
			// for a networked store, a lone caller that finds the mailbox
			// idle runs its round trip on its own goroutine with nothing
			// but the limiter's own work around it. A sweep of the
			// embedded table is left to the callers taking turns
			// (heir.sendSelf).
			m.h = s.h
			if s.h.turns {
				m.bit = s.h.sweepBit
			}
			s.h.mailbox.Store(m)
			return m
		}),
	)
	pid, err := c.SpawnNamed(props, limiterName)
	if err != nil {
		cfg.Logger.Error("actorlimit: cannot spawn limiter", slog.Any("error", err))
		s.h.stopped()
		return
	}
	if cfg.SweepEvery > 0 {
		jc := janitor.Config{Every: cfg.SweepEvery, Timeout: cfg.SweepTimeout, Target: pid}
		if tc, ok := cfg.Clock.(TickerClock); ok {
			jc.NewTicker = tc.NewTicker
		}
		if err := jc.Validate(); err != nil {
			cfg.Logger.Error("actorlimit: no janitor", slog.Any("error", err))
			return
		}
		if _, err := c.SpawnNamed(janitor.Props(jc), janitorName); err != nil {
			cfg.Logger.Error("actorlimit: cannot spawn janitor", slog.Any("error", err))
		}
	}
}

// supervisorProps returns the props of a supervisor that keeps h.
func supervisorProps(h *heir) *protoactor.Props {
	strategy := protoactor.NewOneForOneStrategy(h.cfg.MaxRestarts, h.cfg.RestartWindow,
		func(any) protoactor.Directive { return protoactor.RestartDirective })
	return protoactor.PropsFromProducer(
		func() protoactor.Actor { return &supervisor{h: h} },
		protoactor.WithSupervisor(strategy),
	)
}
