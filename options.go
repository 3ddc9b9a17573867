package actorlimit

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/actorlimit/actorlimit/actor"
)

// Defaults used when no option says otherwise.
const (
	// DefaultMaxEntries bounds the table: about 150 MB at most with short
	// ids, for every algorithm but SlidingWindow (a few hundred bytes more
	// a key) and SlidingLog (a few bytes more per hit it holds, up to some
	// tens of kilobytes a key at MaxSlidingLogLimit).
	DefaultMaxEntries = 1 << 20
	// DefaultSweepEvery is the janitor's default interval.
	DefaultSweepEvery = 10 * time.Second
	// DefaultSweepTimeout is how long an entry is kept after its window
	// ended, by default: not at all, a fixed window's count is dead then.
	DefaultSweepTimeout = 0
)

// Clock tells the limiter the time. Tests pass a fake one with [WithClock].
type Clock interface {
	Now() time.Time
}

// Ticker delivers ticks on C() until Stop, as a time.Ticker does (a tick
// that finds the previous one not yet taken is dropped).
type Ticker = actor.Ticker

// TickerClock is a [Clock] that can also tick. When the clock given to
// [WithClock] is one, the janitor ticks on it, so a test that moves its
// fake clock by hand moves the janitor too; a Clock without NewTicker
// leaves the janitor on the wall clock.
type TickerClock interface {
	Clock
	NewTicker(d time.Duration) Ticker
}

// Option configures [Start] and [Spawn].
type Option func(*settings) error

// settings is what the options set.
type settings struct {
	actor.Config
	shards     int
	persistDir string
	persistCfg PersistConfig
	journals   []actor.Journal // WithPersistence's, one a shard
	seed       shardSeed       // of the hash of ids onto shards, if seeded
	seeded     bool            // the seed is the persisted one
}

// WithClock makes the limiter read the time from c; the default is the wall
// clock. If c is a [TickerClock], the janitor ticks on it too.
func WithClock(c Clock) Option {
	return func(cfg *settings) error {
		if c == nil {
			return fmt.Errorf("%w: WithClock: clock is nil", ErrInvalidArgument)
		}
		cfg.Clock = c
		return nil
	}
}

// WithJanitor makes the janitor sweep every interval, deleting entries whose
// window ended more than timeout ago. An interval of 0 turns the janitor off
// ([Limiter.Sweep] still works, with the given timeout). The default is
// every [DefaultSweepEvery] with timeout [DefaultSweepTimeout].
func WithJanitor(every, timeout time.Duration) Option {
	return func(cfg *settings) error {
		if every < 0 {
			return fmt.Errorf("%w: WithJanitor: interval %v is negative", ErrInvalidArgument, every)
		}
		if timeout < 0 {
			return fmt.Errorf("%w: WithJanitor: timeout %v is negative", ErrInvalidArgument, timeout)
		}
		cfg.SweepEvery, cfg.SweepTimeout = every, timeout
		return nil
	}
}

// WithMaxEntries bounds the table to n entries (default
// [DefaultMaxEntries]), so a flood of new ids cannot grow memory without
// bound. Past it, each new id evicts the state that has been idle longest,
// whatever its id or window (a second-chance CLOCK: see the table package's
// "Memory bound"), and a flood cannot reset the count of an active id: the
// state of an id hit at least once while the limiter takes n new ids is
// kept, or 3*n new ids when its last hit was denied (with [WithShards],
// n is each shard's share and so are the new ids). Stats.Evictions counts
// the evictions.
func WithMaxEntries(n int) Option {
	return func(cfg *settings) error {
		if n <= 0 {
			return fmt.Errorf("%w: WithMaxEntries: %d is not positive", ErrInvalidArgument, n)
		}
		cfg.MaxEntries = n
		return nil
	}
}

// WithLogger makes the limiter, and the actor system [Start] makes, log to
// l. Without it the library is silent.
func WithLogger(l *slog.Logger) Option {
	return func(cfg *settings) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger: logger is nil", ErrInvalidArgument)
		}
		cfg.Logger = l
		return nil
	}
}

// WithRestarts sets how many restarts within window the supervisor allows
// before it stops the limiter for good (default 10 within 10 s).
func WithRestarts(max int, window time.Duration) Option {
	return func(cfg *settings) error {
		if max <= 0 || window <= 0 {
			return fmt.Errorf("%w: WithRestarts: %d within %v: both must be positive", ErrInvalidArgument, max, window)
		}
		cfg.MaxRestarts, cfg.RestartWindow = max, window
		return nil
	}
}

// Store keeps a limiter's state and decides checks against it: the embedded
// ordered table by default, or a store that many processes share. The
// contract a store keeps (concurrency, time, batches, errors) is
// [actor.Store]'s.
type Store = actor.Store

// WithStore makes the limiter keep its state in s instead of its embedded
// table; WithMaxEntries then does not apply (s bounds its own memory). The
// limiter actor is s's only caller. A store serves one limiter actor, so
// WithStore cannot be combined with WithShards(n) for n > 1, unless s is a
// [SharedStore] (redisstore's is): then n limiter actors drive it, ids
// hashed onto them, each with its own round trip in flight.
func WithStore(s Store) Option {
	return func(cfg *settings) error {
		if s == nil {
			return fmt.Errorf("%w: WithStore: store is nil", ErrInvalidArgument)
		}
		cfg.Store = s
		return nil
	}
}

// SharedStore is a [Store] that is safe for concurrent use, so that
// several limiter actors may drive it at once (WithShards with WithStore),
// and several limiters may share it. Shared reports whether it is.
type SharedStore interface {
	Store
	Shared() bool
}

// WithMaxBatch bounds how many checks the limiter hands its store at once
// (default [DefaultMaxBatch]). The limiter decides the checks of every call
// queued one behind the other in its mailbox together, in one store
// decision at one instant: with a store across the network (WithStore),
// one round trip serves many concurrent callers. A single HitMany with more
// checks is still decided whole. 1 decides each call on its own.
func WithMaxBatch(n int) Option {
	return func(cfg *settings) error {
		if n <= 0 || n > MaxBatchLimit {
			return fmt.Errorf("%w: WithMaxBatch: %d is not between 1 and %d", ErrInvalidArgument, n, MaxBatchLimit)
		}
		cfg.MaxBatch = n
		return nil
	}
}

// DefaultMaxBatch is the default of [WithMaxBatch]: 256 single checks, so
// that 256 concurrent callers share one store decision, while a batch stays
// small enough that its reply does not hold the next one up for long.
const DefaultMaxBatch = actor.DefaultMaxBatch

// MaxBatchLimit is the largest bound WithMaxBatch accepts.
const MaxBatchLimit = 1 << 16

// WithShards runs n limiter actors, each with its own table, mailbox and
// janitor, and hashes ids onto them (default 1). It is for machines with
// more cores than callers can keep one actor busy on; WithMaxEntries is then
// shared out among the shards. With more than one shard, actors find the
// one to message with [Limiter.PIDFor], and HitMany makes one round trip per
// shard it touches. Ids are hashed with a seed drawn when the limiter
// starts, or, with [WithPersistence], the one stored in its directory, so
// that a restarted limiter finds each id on the shard that holds its state;
// Stats sums the shards' statistics.
//
// WithShards(runtime.GOMAXPROCS(0)) is what a process with many callers
// should use (docs/performance.md has the figures); it is not the default
// because a persisted directory keeps its shard count and refuses another
// (a default that followed the processors would lock a directory to one
// machine's size), and [Limiter.PID] reaches the first shard only (an actor
// messaging it would count an id apart from [Limiter.Hit]).
func WithShards(n int) Option {
	return func(cfg *settings) error {
		if n <= 0 || n > MaxShards {
			return fmt.Errorf("%w: WithShards: %d is not between 1 and %d", ErrInvalidArgument, n, MaxShards)
		}
		cfg.shards = n
		return nil
	}
}

// MaxShards is the most shards WithShards accepts.
const MaxShards = 1024

func configure(opts []Option) (settings, error) {
	cfg := settings{
		Config: actor.Config{
			MaxEntries:   DefaultMaxEntries,
			SweepEvery:   DefaultSweepEvery,
			SweepTimeout: DefaultSweepTimeout,
			Logger:       slog.New(slog.DiscardHandler),
			Protocol:     protocol{},
		},
		shards: 1,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return settings{}, err
		}
	}
	if sh, ok := cfg.Store.(SharedStore); cfg.Store != nil && cfg.shards > 1 && (!ok || !sh.Shared()) {
		return settings{}, fmt.Errorf("%w: WithStore with WithShards(%d): a store serves one limiter actor", ErrInvalidArgument, cfg.shards)
	}
	if cfg.persistDir != "" {
		if err := cfg.journal(); err != nil {
			return settings{}, err
		}
	}
	return cfg, nil
}
