package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// The errors of the package.
var (
	// ErrUnavailable is wrapped, with Redis's own error, by the error that
	// Decide returns in [FailError] mode when Redis does not answer.
	ErrUnavailable = errors.New("redisstore: redis unavailable")
	// ErrUnsupported is wrapped by the error that Decide returns for a
	// check this store cannot decide exactly (see the package doc); the
	// batch is then not sent.
	ErrUnsupported = errors.New("redisstore: check not supported")
	// ErrInvalid is wrapped by the error New returns for a bad argument.
	ErrInvalid = errors.New("redisstore: invalid argument")
	// ErrCheckFailed is wrapped, with the check's index and key and Redis's
	// own error reply, by the error that Decide returns in [FailError] mode
	// when Redis answered one check of the batch with an error of that
	// check's own (a key holding another type or a state the scripts cannot
	// read, a script error, OOM) while the round trip itself worked. The
	// other checks of the batch were decided by Redis, and out holds their
	// decisions.
	ErrCheckFailed = errors.New("redisstore: redis failed the check")
)

// keyVersion is the version of the state layout, written into every key
// after the prefix. Bump it whenever a script changes what it keeps under a
// key: app servers of two versions (a rolling deploy) then keep their
// states under different keys and count apart until the old ones are gone,
// instead of failing on each other's state. Keys without a version are the
// layouts before v2; v2 kept the bucket state as text, v3 as four doubles,
// v4 as five (the key's expiry added).
const keyVersion = "v4:"

// Store is an actor.Store that keeps every key's state in Redis, so that
// the limiters of many app servers share one limit. It is safe for
// concurrent use: several limiters (or the shards of one, see
// actorlimit.WithShards) may share one Store, each Decide in its own round
// trips, so that several are in flight at once.
type Store struct {
	client  redis.UniversalClient
	cfg     config
	honors  bool // the client ends a round trip at its context's deadline
	batched bool // a run may hold many keys (one server; see planRun)
	wall    func() int64

	// mu guards the health of Redis as this store sees it, the fallback
	// table and the check-error log's pace; it is never held across a
	// round trip.
	mu           sync.Mutex
	down         bool  // Redis failed and has not answered a probe since
	probing      bool  // a Decide is probing Redis
	lastFail     int64 // the wall clock at the last failure or probe, Unix ns
	lastFailNow  int64 // the now given to that Decide
	fallback     *table.Table
	checkLogged  bool // a check's error was logged, at lastCheckLog (wall clock, Unix ns)
	lastCheckLog int64

	denied *deniedCache // nil without WithDeniedCache

	// own holds the store's own connection while no round trip does (see
	// ownConn); always nil when the store uses the pool alone (single is
	// then nil). single is the client, of one server, whose connection it
	// is.
	own     atomic.Pointer[ownConn]
	single  *redis.Client
	ownLife int64 // the client's ConnMaxLifetime, ns; 0: none

	stats struct {
		batches, errors, outages, probes    atomic.Uint64
		fallbacks, failedOpen, failedClosed atomic.Uint64
		reloads, checkErrors, cached        atomic.Uint64
	}
}

// round is one Decide's working state, pooled: it goes back to the pool
// only when no round trip left running may still read it (see bounded).
type round struct {
	calls     []call
	pipe      []redis.Cmder
	runs      []run // the runs of checks, one script call each
	failed    []int // the indexes of the checks Redis answered with an error
	abandoned bool  // a round trip still running holds calls and pipe

	// Buffers that the runs' commands slice, kept from round to round.
	keys    []any       // the runs' keys (see keyArg)
	keyText []string    // the runs' keys' strings, which keys points into
	runArgs []any       // the fixed window runs' values for each key
	args    []any       // the runs' commands' arguments
	params  []byte      // the bucket runs' parameters
	text    []byte      // numbers written as text for window keys' commands (textArg)
	wins    []winCmds   // the window keys' commands (planWindow)
	dctx    deadlineCtx // the round trip's context (withDeadline)

	// The last Period a key was made for and its decimal text (roundKey),
	// kept from round to round.
	period     time.Duration
	periodText []byte

	// Periods in milliseconds boxed for the fixed window's arguments
	// (periodArg), kept from round to round: boxing an int64 past 255
	// allocates, and a request's descriptors have few periods.
	boxed    [4]boxedPeriod
	boxedPos int
}

// keyArg returns k as a command's argument without boxing the string
// (which allocates): a pointer to its copy in r.keyText, which go-redis
// writes, and hashes to a Cluster slot, as the string itself. A pointer
// stays valid when keyText grows (it then points into the old array,
// which holds the same strings); keyText is reused only once the round's
// commands are done (see release).
func (r *round) keyArg(k string) any {
	r.keyText = append(r.keyText, k)
	return &r.keyText[len(r.keyText)-1]
}

// argString returns a command's argument that is a string, or a pointer
// to one (keyArg), as a string; "" for any other.
func argString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case *string:
		return *v
	}
	return ""
}

// boxedPeriod is a period in milliseconds and its boxed value, which is
// never written: commands may share it.
type boxedPeriod struct {
	ms int64
	v  any
}

// periodArg returns ms boxed, from the round's cache when it holds it.
func (r *round) periodArg(ms int64) any {
	for i := range r.boxed {
		if b := &r.boxed[i]; b.v != nil && b.ms == ms {
			return b.v
		}
	}
	b := &r.boxed[r.boxedPos%len(r.boxed)]
	r.boxedPos++
	b.ms, b.v = ms, ms
	return b.v
}

var rounds = sync.Pool{New: func() any { return new(round) }}

// call is one check's plan: a command of its own, a place in a run of
// checks sent as one script call, or a decision made here.
type call struct {
	local  bool
	never  bool // the hits ask for more than the limit allows at once
	cached bool // dec is the over-limit cache's answer
	n      int64
	cmd    *redis.Cmd // its own command (nil in a run: see run.cmd)
	// A fixed window kept as a key per window (WithWindowKeys): the
	// window's number and a hit's INCRBY and PEXPIRE, or a peek's GET.
	win    bool
	sat    bool // its count is MaxInt64 (see saturate)
	window int64
	incr   *redis.IntCmd
	expire *redis.BoolCmd
	get    *redis.StringCmd
	run    int // 1 + the index of its run in round.runs; 0: none
	pos    int // its place in the run
	dec    algo.Decision
}

// New returns a store that keeps its state in client's Redis (one server,
// Sentinel or Cluster), or an error wrapping [ErrInvalid] for a nil client
// or a bad option.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: New: nil client", ErrInvalid)
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.windowKeys && !cfg.callerTime {
		return nil, fmt.Errorf("%w: WithWindowKeys needs WithCallerTime: the window's number is worked out before the round trip, on the caller's clock", ErrInvalid)
	}
	s := &Store{client: client, cfg: cfg, fallback: table.New(cfg.fallback), honors: honorsDeadline(client),
		wall: func() int64 { return time.Now().UnixNano() }}
	_, s.batched = client.(*redis.Client) // one server: any keys may go in one script call
	if cfg.deniedFor > 0 {
		s.denied = newDeniedCache(cfg.deniedFor, cfg.deniedSize)
	}
	s.newOwn()
	return s, nil
}

// Stats counts what a store did, for metrics.
type Stats struct {
	// Batches is the number of batches Decide was given.
	Batches uint64
	// Errors is the number of round trips that failed.
	Errors uint64
	// Outages is the number of times Redis went from answering to not.
	Outages uint64
	// Probes is the number of PINGs sent while Redis was down.
	Probes uint64
	// Fallbacks, FailedOpen and FailedClosed count the checks decided by the
	// fallback table, allowed and denied because Redis did not answer.
	Fallbacks, FailedOpen, FailedClosed uint64
	// Reloads is the number of times the scripts were loaded again after
	// NOSCRIPT.
	Reloads uint64
	// CheckErrors is the number of checks that Redis answered with an
	// error of their own (see [ErrCheckFailed]) while it answered the
	// others: each was decided alone as the outage mode says (and counted
	// in Fallbacks, FailedOpen or FailedClosed too), and Redis was not
	// marked down.
	CheckErrors uint64
	// Cached is the number of hits answered denied by the over-limit cache
	// ([WithDeniedCache]) without a round trip.
	Cached uint64
}

// Stats returns the store's counters; it is safe for concurrent use.
func (s *Store) Stats() Stats {
	return Stats{
		Batches: s.stats.batches.Load(), Errors: s.stats.errors.Load(),
		Outages: s.stats.outages.Load(), Probes: s.stats.probes.Load(),
		Fallbacks: s.stats.fallbacks.Load(), FailedOpen: s.stats.failedOpen.Load(),
		FailedClosed: s.stats.failedClosed.Load(), Reloads: s.stats.reloads.Load(),
		CheckErrors: s.stats.checkErrors.Load(), Cached: s.stats.cached.Load(),
	}
}

// Expire returns 0, false: every key has a TTL and Redis expires it.
func (s *Store) Expire(before int64, max int) (int, bool) { return 0, false }

// Len returns -1, unknown: counting a shared Redis's keys is not cheap.
func (s *Store) Len() int { return -1 }

// Answer returns the over-limit cache's denial of c's hit at now, if it
// holds one that applies (see [WithDeniedCache]), counted in
// [Stats].Cached, and false without the cache: the limiter asks it before
// queueing a hit, so that a cached denial costs no trip through the
// limiter actor either. It is safe for concurrent use.
func (s *Store) Answer(now int64, c *algo.Check) (algo.Decision, bool) {
	if s.denied == nil || c.Op != algo.OpHit {
		return algo.Decision{}, false
	}
	d, ok := s.denied.answer(now, c)
	if ok {
		s.stats.cached.Add(1)
	}
	return d, ok
}

// Answering reports whether [Store.Answer] may answer a hit: whether the
// store was made [WithDeniedCache]. A limiter does not ask a store that
// reports false, so that its hits pay no clock read for it.
func (s *Store) Answering() bool { return s.denied != nil }

// Shared reports true: a Store is safe for concurrent use, so several
// limiter actors (actorlimit.WithShards with actorlimit.WithStore) may drive
// one, each with its own round trips in flight.
func (s *Store) Shared() bool { return true }

// Evictions returns 0: Redis's own eviction is Redis's to report.
func (s *Store) Evictions() uint64 { return 0 }

// Decide applies checks in order and writes the i-th decision to out[i]. It
// sends them in pipelines of at most WithMaxBatch checks, one round trip
// each, and decides at Redis's TIME (or at now, WithCallerTime). When Redis
// does not answer it decides as the outage mode says; only [FailError]
// returns an error then. A check that Redis answers with an error of its
// own is decided alone as the outage mode says (in FailError mode, an
// [algo.CheckErrors] whose errors wrap [ErrCheckFailed]); the others are
// Redis's. A check it cannot decide exactly gives an error wrapping
// [ErrUnsupported] before anything is sent. It is safe for concurrent use;
// two concurrent Decides on one key are applied in some order.
func (s *Store) Decide(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	if s.client == nil {
		return fmt.Errorf("%w: the Store was not made by redisstore.New", ErrUnavailable)
	}
	s.stats.batches.Add(1)
	for i := range checks {
		if err := supported(&checks[i]); err != nil {
			return err
		}
	}
	if s.isDown() && !s.probe(ctx, now) {
		return s.outage(now, checks, out, errors.New("redis down since the last failure"))
	}
	r := rounds.Get().(*round)
	var failed *algo.CheckErrors
	for lo := 0; lo < len(checks); lo += s.cfg.maxBatch {
		hi := min(len(checks), lo+s.cfg.maxBatch)
		if err := s.send(ctx, r, now, checks[lo:hi], out[lo:hi]); err != nil {
			s.release(r)
			return s.fail(ctx, now, checks[lo:], out[lo:], err)
		}
		failed = s.checkErrors(r, failed, now, lo, checks[lo:hi], out[lo:hi])
	}
	s.release(r)
	if failed != nil {
		return failed
	}
	return nil
}

// release puts r back in the pool unless a round trip left running may
// still read it.
func (s *Store) release(r *round) {
	if r.abandoned {
		return
	}
	clear(r.calls)
	clear(r.pipe)
	clear(r.runs)
	clear(r.keys)
	clear(r.keyText)
	clear(r.runArgs)
	clear(r.args)
	r.calls, r.pipe, r.runs, r.failed = r.calls[:0], r.pipe[:0], r.runs[:0], r.failed[:0]
	r.keys, r.keyText, r.runArgs, r.args, r.params = r.keys[:0], r.keyText[:0], r.runArgs[:0], r.args[:0], r.params[:0]
	r.text = r.text[:0]
	clear(r.wins)
	r.wins = r.wins[:0]
	r.dctx = deadlineCtx{}
	rounds.Put(r)
}

func (s *Store) isDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

// fail marks Redis down after a round trip that failed with err, and
// decides checks, the rest of the batch, as the outage mode says; a caller
// that gave up is no outage.
func (s *Store) fail(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err()) // the caller gave up, not Redis
	}
	s.stats.errors.Add(1)
	s.mu.Lock()
	if !s.down {
		s.stats.outages.Add(1)
		if s.cfg.log != nil {
			s.cfg.log.Warn("redisstore: redis unavailable; deciding by the outage mode until it answers again (logged once per outage)",
				"mode", s.cfg.outage.String(), "err", err)
		}
	}
	s.down, s.lastFail, s.lastFailNow = true, s.wall(), now
	s.mu.Unlock()
	return s.outage(now, checks, out, err)
}

// checkErrors decides alone, as the outage mode says, each check that
// Redis answered with an error of its own (r.failed, indexes into checks),
// and in [FailError] mode adds its error to failed (made if nil), which it
// returns; off is the index of checks[0] in the batch. Redis answered the
// round trip, so it is not marked down: a bad key fails its own check, not
// the batch and the batches after it.
func (s *Store) checkErrors(r *round, failed *algo.CheckErrors, now int64, off int, checks []algo.Check, out []algo.Decision) *algo.CheckErrors {
	if len(r.failed) == 0 {
		return failed
	}
	s.stats.checkErrors.Add(uint64(len(r.failed)))
	for j, i := range r.failed {
		cause := r.calls[i].failure(r)
		if j == 0 {
			s.logCheckError(s.keyAt(&checks[i], now), cause)
		}
		if s.cfg.outage == FailError {
			if failed == nil {
				failed = &algo.CheckErrors{}
			}
			failed.Index = append(failed.Index, off+i)
			failed.Errs = append(failed.Errs, fmt.Errorf("%w: check %d, key %s: %w", ErrCheckFailed, off+i, s.keyAt(&checks[i], now), cause))
			continue
		}
		_ = s.outage(now, checks[i:i+1], out[i:i+1], cause)
	}
	r.failed = r.failed[:0]
	return failed
}

// logCheckError logs a check's error, at most once per probe interval.
func (s *Store) logCheckError(key string, cause error) {
	if s.cfg.log == nil {
		return
	}
	s.mu.Lock()
	now := s.wall()
	if s.checkLogged && now-s.lastCheckLog < int64(s.cfg.probe) && now >= s.lastCheckLog {
		s.mu.Unlock()
		return
	}
	s.checkLogged, s.lastCheckLog = true, now
	s.mu.Unlock()
	s.cfg.log.Warn("redisstore: redis answered a check with an error; deciding it alone by the outage mode (logged at most once per probe interval)",
		"mode", s.cfg.outage.String(), "key", key, "err", cause, "checkErrors", s.stats.checkErrors.Load())
}

// probe pings Redis once the probe interval has passed since the last
// failure or probe, on the wall clock or on Decide's now (either: a
// limiter's clock held still, WithCallerTime, never stops the probes, and a
// test's clock can pace them), and reports whether it answered. One Decide
// probes at a time; the others meanwhile decide by the outage mode.
func (s *Store) probe(ctx context.Context, now int64) bool {
	s.mu.Lock()
	if !s.down {
		s.mu.Unlock()
		return true // another Decide's probe was answered meanwhile
	}
	wall, every := s.wall(), int64(s.cfg.probe)
	due := wall-s.lastFail >= every || wall < s.lastFail || now-s.lastFailNow >= every || now < s.lastFailNow
	if s.probing || !due {
		s.mu.Unlock()
		return false
	}
	s.probing = true
	s.mu.Unlock()
	s.stats.probes.Add(1)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	err := s.bounded(ctx, nil, func(ctx context.Context) error { return s.client.Ping(ctx).Err() })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probing = false
	if err != nil {
		s.lastFail, s.lastFailNow = s.wall(), now
		return false
	}
	s.down = false
	if s.cfg.log != nil {
		s.cfg.log.Info("redisstore: redis answers again", "probes", s.stats.probes.Load())
	}
	s.fallback = table.New(s.cfg.fallback) // Redis holds the truth again; the next outage starts afresh
	return true
}

// outage decides checks without Redis, as the outage mode says.
func (s *Store) outage(now int64, checks []algo.Check, out []algo.Decision, cause error) error {
	n := uint64(len(checks))
	switch s.cfg.outage {
	case FailOpen:
		s.stats.failedOpen.Add(n)
		for i := range checks {
			out[i] = algo.Decision{Allowed: true, Remaining: max(0, checks[i].Limit-checks[i].N)}
		}
	case FailClosed:
		s.stats.failedClosed.Add(n)
		for i := range checks {
			out[i] = algo.Decision{RetryAfter: s.cfg.probe}
		}
	case FailError:
		return fmt.Errorf("%w: %w", ErrUnavailable, cause)
	default:
		s.stats.fallbacks.Add(n)
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.fallback.Decide(context.Background(), now, checks, out)
	}
	return nil
}

// Screen returns the error wrapping [ErrUnsupported] that Decide would
// return for a batch holding c, or nil: the limiter screens each caller's
// checks with it, so that one caller's unsupported check fails that caller
// alone and not the others whose checks it gathered into the same batch.
func (s *Store) Screen(c *algo.Check) error { return supported(c) }

// supported reports a check the scripts cannot decide exactly, and one of
// an algorithm that has no script here: every switch over the algorithms
// in this package then has a case for each check that gets past it.
func supported(c *algo.Check) error {
	switch c.Algorithm {
	case algo.FixedWindow, algo.SlidingWindow, algo.SlidingLog:
		if c.Period%time.Millisecond != 0 {
			return fmt.Errorf("%w: %v Period %v is not a whole number of milliseconds", ErrUnsupported, c.Algorithm, c.Period)
		}
		if c.Limit > maxExact && c.Algorithm != algo.FixedWindow {
			return fmt.Errorf("%w: %v Limit %d is above 2^52", ErrUnsupported, c.Algorithm, c.Limit)
		}
		return nil
	case algo.GCRA, algo.TokenBucket, algo.LeakyBucket:
	default:
		return fmt.Errorf("%w: no script for algorithm %v", ErrUnsupported, c.Algorithm)
	}
	if c.Limit > maxExact {
		return fmt.Errorf("%w: %v Limit %d is above 2^52", ErrUnsupported, c.Algorithm, c.Limit)
	}
	if c.Limit > 0 {
		if _, ok := times(capacity(c), int64(c.Period), c.Limit); !ok {
			return fmt.Errorf("%w: a %v bucket of %d takes longer than %v to drain", ErrUnsupported, c.Algorithm, capacity(c), MaxSpan)
		}
	}
	return nil
}

func capacity(c *algo.Check) int64 {
	if c.Algorithm == algo.LeakyBucket {
		if c.Burst == math.MaxInt64 {
			return c.Burst
		}
		return c.Burst + 1
	}
	return c.Burst
}

// key returns the Redis key of c's state: the prefix, the layout's version,
// the ID in a hash tag (one key, one Cluster slot), the algorithm and the
// Period in ns. In the tag, '%' is written "%25" and '}' "%7D", so that
// the tag is the whole ID (a '}' would end it early, and every ID that
// starts alike would share one slot) and two IDs never share a key.
func (s *Store) key(c *algo.Check) string { return s.roundKey(nil, c) }

// roundKey is key for a check of r's batch: r keeps the text of the last
// Period it wrote (a batch's checks, and a lone caller's rounds, mostly
// share one), which spares a key its decimal conversion.
func (s *Store) roundKey(r *round, c *algo.Check) string { return s.buildKey(r, c, false, 0) }

// windowKey is the key of c's fixed window number w (WithWindowKeys):
// roundKey's, then ':' and w in decimal, in one allocation.
func (s *Store) windowKey(r *round, c *algo.Check, w int64) string { return s.buildKey(r, c, true, w) }

// buildKey is roundKey, and windowKey when win is true.
func (s *Store) buildKey(r *round, c *algo.Check, win bool, w int64) string {
	var period []byte
	if r != nil {
		if r.periodText == nil || r.period != c.Period {
			r.period, r.periodText = c.Period, strconv.AppendInt(r.periodText[:0], int64(c.Period), 10)
		}
		period = r.periodText
	} else {
		period = strconv.AppendInt(nil, int64(c.Period), 10)
	}
	// Room for the key without escapes: '{', "}:", the algorithm and ':'
	// (an escape makes append grow it), and a window's ':' and number.
	alg := c.Algorithm.String()
	n := len(s.cfg.prefix) + len(keyVersion) + len(c.ID) + 4 + len(alg) + len(period)
	if win {
		n += 21
	}
	b := make([]byte, 0, n)
	b = append(b, s.cfg.prefix...)
	b = append(b, keyVersion...)
	b = append(b, '{')
	b = appendTag(b, c.ID)
	b = append(b, "}:"...)
	b = append(b, alg...)
	b = append(b, ':')
	b = append(b, period...)
	if win {
		b = append(b, ':')
		b = strconv.AppendInt(b, w, 10)
	}
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not written again: one allocation, not two
}

// keyAt is key, or under WithWindowKeys a fixed window's key at now:
// the key of the window of now.
func (s *Store) keyAt(c *algo.Check, now int64) string {
	if s.windowed(c) {
		return s.windowKey(nil, c, algo.FloorDiv(now, int64(c.Period)))
	}
	return s.key(c)
}

// appendTag appends id to b with '%' and '}' escaped as "%25" and "%7D".
func appendTag(b []byte, id string) []byte {
	// A loop over the bytes, not strings.IndexAny: ids are short, and
	// IndexAny's set setup cost more than the scan (about 350 of a lone
	// hit's 9 400 instructions).
	start := 0
	for i := 0; i < len(id); i++ {
		switch id[i] {
		case '%':
			b = append(append(b, id[start:i]...), "%25"...)
			start = i + 1
		case '}':
			b = append(append(b, id[start:i]...), "%7D"...)
			start = i + 1
		}
	}
	return append(b, id[start:]...)
}
