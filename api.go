package actorlimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/persist"
)

// Errors. Bad input and context errors come back wrapped with details; test
// them with errors.Is.
var (
	// ErrInvalidArgument is returned for bad input, and for a check that
	// the store refuses to decide (a WithStore store may refuse some valid
	// checks: see redisstore's ErrUnsupported); nothing is counted.
	ErrInvalidArgument = algo.ErrInvalid
	// ErrClosed is returned by every call after Close, or after the limiter
	// stopped for good because it kept failing.
	ErrClosed = actor.ErrClosed
	// ErrPanicked is returned to the caller whose call made the limiter
	// panic, and to the callers whose checks were decided together with it
	// (calls queued one behind the other share one store decision; see
	// WithMaxBatch): their checks may or may not have been counted. The
	// limiter is restarted with its counts intact.
	ErrPanicked = actor.ErrPanicked
	// ErrCorrupt is wrapped by the error of Start when a file in
	// [WithPersistence]'s directory is damaged, truncated or foreign (see
	// PersistConfig.StartEmptyOnCorrupt); it is persist.ErrCorrupt.
	ErrCorrupt = persist.ErrCorrupt
	// ErrUnwritable is wrapped by the error of Start when
	// [WithPersistence]'s directory cannot be created or a file cannot be
	// written in it (see PersistConfig.StartUnwritable); it is
	// persist.ErrUnwritable.
	ErrUnwritable = persist.ErrUnwritable
)

// errNotStarted is what the methods of a nil or zero Limiter, one not made
// by Start, Spawn or Over, return: it wraps ErrClosed, as such a limiter
// can no more answer than a closed one.
var errNotStarted = fmt.Errorf("%w: the Limiter was not made by Start, Spawn or Over", ErrClosed)

// MaxIDLength is the longest id accepted, in bytes.
const MaxIDLength = 4096

// Never is the RetryAfter of a hit that no wait can allow.
const Never = algo.Never

// MaxSlidingLogLimit is the largest Limit a [SlidingLog] policy accepts. A
// full log holds one (gap, count) pair per millisecond with allowed hits,
// so at most Limit pairs of a few bytes: at this bound, some tens of
// kilobytes a key.
const MaxSlidingLogLimit = algo.MaxSlidingLogLimit

// MaxSpan is the longest Period, and the longest time a full bucket may take
// to drain, that the algorithms other than [FixedWindow] accept: about a
// hundred years.
const MaxSpan = algo.MaxSpan

// Algorithm chooses how a [Policy] counts hits. Its text form, used by
// rules files and flags, is the snake-case name ("fixed_window",
// "token_bucket", ...): it implements encoding.TextMarshaler and
// encoding.TextUnmarshaler.
type Algorithm = algo.Algorithm

// The algorithms. The package documentation says what each guarantees and
// what it keeps per key.
const (
	// FixedWindow counts hits per window of Period, as raterlimiter does;
	// denied hits are counted too.
	FixedWindow = algo.FixedWindow
	// SlidingWindow is Figma's sliding-window counter, strict variant: a
	// count per Period/60, and never more than Limit hits in any interval
	// of length Period.
	SlidingWindow = algo.SlidingWindow
	// GCRA is the generic cell rate algorithm: Limit per Period, Burst hits
	// at once, one number per key.
	GCRA = algo.GCRA
	// TokenBucket holds Burst tokens, refilled with Limit per Period; a hit
	// takes one.
	TokenBucket = algo.TokenBucket
	// LeakyBucket is a queue drained at Limit per Period, as nginx's
	// limit_req with burst: Burst hits may wait, and Result.Delay says how
	// long.
	LeakyBucket = algo.LeakyBucket
	// SlidingLog logs the time of every allowed hit: exact to the
	// millisecond, and the costly one.
	SlidingLog = algo.SlidingLog
)

// Policy says how many hits an id may make. The state of an id is kept per
// (Algorithm, Period, id): the same id under two algorithms or two Periods
// is two separate limits, while a changed Limit or Burst applies at once to
// the existing state.
type Policy struct {
	// Algorithm chooses how hits are counted; the zero value is FixedWindow.
	Algorithm Algorithm
	// Limit is the number of hits allowed per Period; 0 denies every hit.
	// For SlidingLog it is at most [MaxSlidingLogLimit].
	Limit int64
	// Period is the window length, or the time in which a bucket drains
	// Limit hits. For FixedWindow, SlidingWindow and SlidingLog it must be a
	// whole number of milliseconds; GCRA, TokenBucket and LeakyBucket take
	// any positive Period to the nanosecond. All but FixedWindow accept at
	// most [MaxSpan] (about 100 years).
	Period time.Duration
	// Burst is for the algorithms with a bucket; 0 means Limit. GCRA: the
	// hits allowed at once; TokenBucket: the bucket's capacity in tokens;
	// LeakyBucket: the hits that may wait behind the one served (nginx's
	// burst), so Burst+1 at once. The window algorithms ignore it.
	Burst int64
}

// Result is the limiter's decision on one call. Its fields mean the same for
// every algorithm.
type Result struct {
	// Allowed says whether the hits may go ahead.
	Allowed bool
	// Cached says the answer is a denial from the store's local over-limit
	// cache (redisstore.WithDeniedCache): the hits were refused without a
	// round trip to the shared store. Always false for the embedded table.
	Cached bool
	// Limit is the policy's Limit.
	Limit int64
	// Count is the number of hits the key's state holds: counted in the
	// current window (FixedWindow), in the last Period (SlidingWindow,
	// SlidingLog), or not yet drained from the bucket (GCRA, LeakyBucket;
	// for TokenBucket the tokens missing), rounded up.
	Count int64
	// Remaining is how many more hits would be allowed now; never negative.
	Remaining int64
	// RetryAfter is 0 when allowed, else the least wait after which the
	// hits would be allowed; negative ([Never]) when no wait would do.
	RetryAfter time.Duration
	// ResetAfter is the wait until the key is back to full capacity.
	ResetAfter time.Duration
	// Delay is, for an allowed LeakyBucket hit, how long to wait before
	// serving it so that hits are served at Limit per Period (for HitN, the
	// wait before the first of the n; the others follow one every
	// Period/Limit). 0 for every other algorithm.
	Delay time.Duration
}

// EntriesUnknown is [Stats].Entries when the store cannot tell how many
// keys it holds (a store shared over the network).
const EntriesUnknown = -1

// Stats describes a running limiter.
type Stats struct {
	// Entries is the number of entries in the table, or [EntriesUnknown]
	// when the store cannot tell (Redis's keys are not counted): then it is
	// no count, and metrics exports no entries gauge.
	Entries int
	// Evictions counts entries evicted to respect WithMaxEntries.
	Evictions uint64
	// Expired counts entries deleted by sweeps.
	Expired uint64
	// Restarts counts restarts of the limiter actor after a panic.
	Restarts int
	// Sweeps counts the sweeps finished, the janitor's and [Limiter.Sweep]'s.
	Sweeps uint64
	// SweepTime is the time they took in all, by the limiter's clock.
	SweepTime time.Duration
	// Queued is how many messages were waiting in the limiters' mailboxes
	// when the statistics were taken: calls queued behind a busy limiter.
	Queued int
	// PersistErrors counts failed writes of [WithPersistence]'s files;
	// PersistDropped the changes it could not write (the next snapshot
	// written covers them).
	PersistErrors, PersistDropped uint64
	// Loaded is what Start found in [WithPersistence]'s directory: the
	// snapshot's generation, the records loaded and skipped, the log's
	// frames, the bytes of a last write cut short, the files set aside;
	// zero without persistence.
	Loaded PersistLoaded
}

// Limiter is a running limiter. Its methods are safe for concurrent use.
type Limiter struct {
	shards    []Backend
	loaded    PersistLoaded           // what WithPersistence's journals loaded
	seed      shardSeed               // of the hash of ids onto shards
	system    *protoactor.ActorSystem // made by Start, shut down by Close
	closeOnce sync.Once
	closeErr  error // what Close returns
	shared    bool  // SharedCounts
}

// Start runs a limiter in an actor system of its own, which Close shuts
// down.
func Start(opts ...Option) (*Limiter, error) {
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	system := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return logger }))
	return start(system.Root, system, cfg)
}

// Spawn runs a limiter inside the caller's actor tree: its supervisor is a
// child of parent. Close stops it without touching the rest of the system.
func Spawn(parent protoactor.SpawnerContext, opts ...Option) (*Limiter, error) {
	if parent == nil {
		return nil, fmt.Errorf("%w: parent is nil", ErrInvalidArgument)
	}
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	return start(parent, nil, cfg)
}

// start spawns one supervised limiter per shard under parent, each with
// its own Journal if the limiter is persisted.
func start(parent protoactor.SpawnerContext, own *protoactor.ActorSystem, s settings) (*Limiter, error) {
	l := &Limiter{seed: s.seed, system: own, shared: s.sharedCounts()}
	if !s.seeded {
		l.seed = randomSeed()
	}
	cfg := s.Config
	if cfg.MaxEntries > 0 {
		cfg.MaxEntries = (cfg.MaxEntries + s.shards - 1) / s.shards
	}
	for i := range s.shards {
		if s.journals != nil {
			cfg.Journal = s.journals[i]
		}
		c, err := actor.Start(parent, cfg)
		if err != nil {
			_ = l.Close()
			return nil, err
		}
		l.shards = append(l.shards, c)
	}
	if s.journals != nil {
		l.loaded = sumLoaded(s.journals) // Load ran in actor.Start
	} else if j, ok := cfg.Journal.(*journal); ok {
		l.loaded = j.loaded
	}
	return l, nil
}

// shard returns the limiter actor that owns id's state.
func (l *Limiter) shard(id string) Backend {
	return l.shards[l.shardIndex(id)]
}

func (l *Limiter) shardIndex(id string) int {
	if len(l.shards) == 1 {
		return 0
	}
	return l.seed.index(id, len(l.shards))
}

// CheckRate is the raterlimiter's check_rate: it counts one hit for id in a
// fixed window of scaleMs milliseconds that allows limit hits. It is exactly
// Hit(context.Background(), id, Policy{FixedWindow, limit, scaleMs ms, 0}).
func (l *Limiter) CheckRate(id string, scaleMs, limit int64) (Result, error) {
	if scaleMs <= 0 || scaleMs > math.MaxInt64/int64(time.Millisecond) {
		return Result{}, fmt.Errorf("%w: scaleMs %d is not a positive number of milliseconds", ErrInvalidArgument, scaleMs)
	}
	period := time.Duration(scaleMs) * time.Millisecond
	if limit < 0 || id == "" || len(id) > MaxIDLength {
		// Bad input: the general path names what is wrong.
		return l.HitN(context.Background(), id, Policy{Algorithm: FixedWindow, Limit: limit, Period: period}, 1)
	}
	// A fixed window of a positive whole number of milliseconds and a
	// limit that is not negative: the policy is valid (Policy.Validate),
	// and so is the check, which newCheck would build the same.
	chk := algo.Check{Op: algo.OpHit, Algorithm: algo.FixedWindow, ID: id, Period: period, Limit: limit, Burst: limit, N: 1}
	return l.decide(context.Background(), &chk)
}

// Hit counts one hit for id under p and decides it.
func (l *Limiter) Hit(ctx context.Context, id string, p Policy) (Result, error) {
	return l.HitN(ctx, id, p, 1)
}

// HitN counts n hits for id under p at once and decides them together.
func (l *Limiter) HitN(ctx context.Context, id string, p Policy, n int64) (Result, error) {
	return l.do(ctx, algo.OpHit, id, p, n)
}

// Peek reports id's state under p, and whether one more hit would be
// allowed, without counting anything.
func (l *Limiter) Peek(ctx context.Context, id string, p Policy) (Result, error) {
	return l.do(ctx, algo.OpPeek, id, p, 1)
}

// Reset forgets id's state under p: its next hit starts from nothing.
func (l *Limiter) Reset(ctx context.Context, id string, p Policy) error {
	_, err := l.do(ctx, algo.OpReset, id, p, 1)
	return err
}

func (l *Limiter) do(ctx context.Context, op algo.Op, id string, p Policy, n int64) (Result, error) {
	if !l.Started() {
		return Result{}, errNotStarted
	}
	chk, err := newCheck(op, id, p, n)
	if err != nil {
		return Result{}, err
	}
	return l.decide(ctx, &chk)
}

// decide has the shard of chk's id decide chk, which is valid, and turns
// the decision into a Result. A limiter actor's client is called with
// pointers (actor.Client.DoCheck), another Backend through its interface.
func (l *Limiter) decide(ctx context.Context, chk *algo.Check) (Result, error) {
	if !l.Started() {
		return Result{}, errNotStarted
	}
	var d algo.Decision
	var err error
	b := l.shard(chk.ID)
	if c, ok := b.(*actor.Client); ok {
		err = c.DoCheck(ctx, chk, &d)
	} else {
		d, err = b.Do(ctx, *chk)
	}
	if err != nil {
		return Result{}, err
	}
	return resultFor(chk.Limit, d), nil
}

// Sweep runs one janitor pass now and returns how many entries it deleted:
// those whose window ended more than the janitor's timeout ago.
func (l *Limiter) Sweep(ctx context.Context) (int, error) {
	if !l.Started() {
		return 0, errNotStarted
	}
	total := 0
	for _, c := range l.shards {
		n, err := c.Sweep(ctx)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Stats returns the limiter's statistics, summed over its shards.
func (l *Limiter) Stats(ctx context.Context) (Stats, error) {
	if !l.Started() {
		return Stats{}, errNotStarted
	}
	var sum Stats
	for _, c := range l.shards {
		s, err := c.Stats(ctx)
		if err != nil {
			return Stats{}, err
		}
		if s.Entries < 0 || sum.Entries < 0 {
			sum.Entries = EntriesUnknown
		} else {
			sum.Entries += s.Entries
		}
		sum.Evictions += s.Evictions
		sum.Expired += s.Expired
		sum.Restarts += s.Restarts
		sum.Sweeps += s.Sweeps
		sum.SweepTime += s.SweepTime
		sum.Queued += s.Queued
		sum.PersistErrors += s.PersistErrors
		sum.PersistDropped += s.PersistDropped
	}
	sum.Loaded = l.loaded
	return sum, nil
}

// PID returns the limiter actor's PID, for actors that message it with
// [HitRequest], [PeekRequest] and [ResetRequest]. With [WithShards] it is
// the PID of the first shard; use [Limiter.PIDFor]. It is nil for a
// Limiter that was not started.
func (l *Limiter) PID() *protoactor.PID {
	if !l.Started() {
		return nil
	}
	return l.shards[0].PID()
}

// PIDFor returns the PID of the limiter actor that owns id's state: the one
// to message about id when the limiter has several shards. It is nil for a
// Limiter that was not started.
func (l *Limiter) PIDFor(id string) *protoactor.PID {
	if !l.Started() {
		return nil
	}
	return l.shard(id).PID()
}

// Close lets the limiter answer every call already queued, then stops it,
// its janitor and its supervisor (and, for a limiter made by Start, its
// actor system). Calls after Close return ErrClosed. With [WithPersistence]
// it writes a last snapshot, which holds every hit answered without error,
// calls made while it closed too, and returns an error if the last snapshot, or
// the records after it, could not be written: the directory then holds an
// older state than the limiter had (the failure is logged too). Otherwise
// it returns nil. Close is idempotent and returns the same error every
// time. Closing a nil or zero Limiter does nothing and returns nil.
func (l *Limiter) Close() error {
	if l == nil {
		return nil
	}
	l.closeOnce.Do(func() {
		var errs []error
		for _, c := range l.shards {
			errs = append(errs, c.Close())
		}
		if l.system != nil {
			l.system.Shutdown()
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// newCheck validates a call at the edge, so that the limiter never sees bad
// input.
func newCheck(op algo.Op, id string, p Policy, n int64) (algo.Check, error) {
	switch {
	case id == "":
		return algo.Check{}, fmt.Errorf("%w: id is empty", ErrInvalidArgument)
	case len(id) > MaxIDLength:
		return algo.Check{}, fmt.Errorf("%w: id is %d bytes, longer than %d", ErrInvalidArgument, len(id), MaxIDLength)
	case n <= 0:
		return algo.Check{}, fmt.Errorf("%w: n is %d, not positive", ErrInvalidArgument, n)
	}
	if err := p.Validate(); err != nil {
		return algo.Check{}, err
	}
	return algo.Check{
		Op:        op,
		Algorithm: p.Algorithm,
		ID:        id,
		Period:    p.Period,
		Limit:     p.Limit,
		Burst:     algo.Burst(p.Limit, p.Burst),
		N:         n,
	}, nil
}

// Validate reports what is wrong with p, if anything: an error wrapping
// [ErrInvalidArgument] that names the field and why, or nil. Every call that
// takes a Policy validates it this way; callers that build policies ahead of
// time (rules files, configuration) call it to refuse a bad one early.
func (p Policy) Validate() error {
	return algo.Validate(p.Algorithm, p.Limit, p.Period, p.Burst)
}

func resultOf(p Policy, d algo.Decision) Result { return resultFor(p.Limit, d) }

// resultFor is the Result of the decision d under a policy of this limit.
func resultFor(limit int64, d algo.Decision) Result {
	return Result{
		Allowed:    d.Allowed,
		Cached:     d.Cached,
		Limit:      limit,
		Count:      d.Count,
		Remaining:  d.Remaining,
		RetryAfter: d.RetryAfter,
		ResetAfter: d.ResetAfter,
		Delay:      d.Delay,
	}
}
