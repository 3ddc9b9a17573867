package redisstore

import (
	"fmt"
	"log/slog"
	"time"
)

// Outage is what a [Store] does with a batch that Redis did not answer (an
// error or a timeout).
type Outage uint8

// The outage modes.
const (
	// Fallback decides the batch, and every batch until Redis answers a
	// probe again, with an embedded table.Table of this process: each app
	// server then limits on its own (the limit holds per server, not in
	// total). It is the default: limits keep working, approximately, and an
	// outage of Redis is neither an outage of the app (FailClosed) nor an
	// open door (FailOpen).
	Fallback Outage = iota
	// FailOpen allows every check of the batch.
	FailOpen
	// FailClosed denies every check of the batch, with RetryAfter the probe
	// interval.
	FailClosed
	// FailError returns an error wrapping [ErrUnavailable] and the cause.
	FailError
)

// Option configures a [Store] made by [New].
type Option func(*config) error

type config struct {
	prefix     string
	callerTime bool
	outage     Outage
	timeout    time.Duration
	maxBatch   int
	probe      time.Duration
	fallback   int
	log        *slog.Logger
	deniedFor  time.Duration
	deniedSize int
	windowKeys bool
}

func defaults() config {
	return config{
		prefix:     "actorlimit:",
		outage:     Fallback,
		timeout:    250 * time.Millisecond,
		maxBatch:   1000,
		probe:      500 * time.Millisecond,
		fallback:   100_000,
		deniedSize: 100_000,
	}
}

// WithPrefix sets the prefix of every key the store writes (default
// "actorlimit:"), so that several limiters share one Redis.
func WithPrefix(p string) Option {
	return func(c *config) error {
		c.prefix = p
		return nil
	}
}

// WithLogger makes the store log its outages: once when Redis stops
// answering (WARN) and once when it answers a probe again (INFO), never per
// check. Without it the store is silent.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger: logger is nil", ErrInvalid)
		}
		c.log = l
		return nil
	}
}

// WithCallerTime makes the scripts decide at the now that Decide is given
// (the limiter's clock) instead of at Redis's TIME.
func WithCallerTime() Option {
	return func(c *config) error {
		c.callerTime = true
		return nil
	}
}

// WithWindowKeys makes the store keep each fixed window ([algo.FixedWindow])
// as one Redis string per window, counted with INCRBY and given its TTL with
// PEXPIRE NX (the window's end and a minute's grace, set once, by the first
// hit), the two pipelined in one round trip, and peeked at with GET: no
// Lua, which costs Redis about a microsecond a command against the fixed
// window script's tens. The other algorithms keep their scripts. It needs
// Redis 7.0 or later (PEXPIRE NX; an older Redis answers every fixed-window
// hit with an error of its own, decided by the outage mode) and
// [WithCallerTime], which New requires with it: the window's number is
// worked out before the round trip, on the caller's clock. Several app
// servers sharing one Redis must then have synchronised clocks (as envoy
// ratelimit assumes): a server whose clock runs ahead counts into the next
// window, and its windows end early.
//
// A window's key is the key the script would use ([Store] keys: prefix,
// layout version, {ID}, algorithm, Period in ns) followed by ':' and the
// window's number, floor(now/Period), in decimal. It cannot name another
// algorithm's key or another ID's (the ID is the hash tag, escaped, and
// only a window's key has a fifth field), nor the script's hash of the
// same fixed window, and it lives in the ID's Cluster slot.
//
// It decides as the script does, hit for hit (denied hits counted too, the
// count saturating at MaxInt64, a key of another type failing its check
// alone), except where the caller's clock steps back into an earlier
// window: the hit counts in that window's key, as envoy ratelimit's does,
// where the script and the in-memory table count it in the newer window.
// A Reset deletes the window of now. Stores with and without it count
// apart (their keys differ): turning it on starts every window in progress
// at 0.
//
// Beyond the script, a hit's PEXPIRE runs even when its INCRBY failed, so
// a key of another type without a TTL is given one; and the two commands
// are not one transaction: a connection lost between them leaves a
// window's key without a TTL until the next hit in that window.
func WithWindowKeys() Option {
	return func(c *config) error {
		c.windowKeys = true
		return nil
	}
}

// WithOutage sets what the store does when Redis does not answer (default
// [Fallback]).
func WithOutage(o Outage) Option {
	return func(c *config) error {
		if o > FailError {
			return fmt.Errorf("%w: WithOutage(%d) is no outage mode", ErrInvalid, o)
		}
		c.outage = o
		return nil
	}
}

// WithTimeout bounds each round trip of a batch (default 250ms), whatever
// the client's options (see the package doc); the context given to Decide
// bounds it too.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithTimeout(%v) is not positive", ErrInvalid, d)
		}
		c.timeout = d
		return nil
	}
}

// WithMaxBatch sets how many checks one pipeline carries at most (default
// 1000); a larger batch is sent as several pipelines, one after the other.
func WithMaxBatch(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("%w: WithMaxBatch(%d) is not positive", ErrInvalid, n)
		}
		c.maxBatch = n
		return nil
	}
}

// WithProbeInterval sets how long after a failure the store leaves Redis
// alone before it tries it again with a PING (default 500ms). A probe is
// due once the interval has passed on the wall clock or on the now that
// Decide is given, whichever comes first: a limiter's clock held still
// (WithCallerTime with a stopped clock) never stops the probes.
func WithProbeInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithProbeInterval(%v) is not positive", ErrInvalid, d)
		}
		c.probe = d
		return nil
	}
}

// WithDeniedCache turns on the over-limit cache (off by default): once
// Redis denies a hit on a key, with a finite RetryAfter, this store answers
// the hits on that key under the same policy (algorithm, Period, Limit,
// Burst) and N denied itself, without a round trip,
// until that RetryAfter has passed or for at most bound, whichever ends
// first, measured on the now given to Decide from before the round trip
// that was denied. Such an answer is Redis's denial with RetryAfter and
// ResetAfter less the time since, and Count and Remaining as Redis gave
// them, marked Cached (actorlimit.Result.Cached); [Stats].Cached counts
// them.
//
// It differs from asking Redis in these ways only: a Reset, or a hit under
// another policy, made on another app server is seen here only once the
// cached denial ends (at most bound later); a bucket's Count and Remaining
// are not refreshed as it drains; and the hits it denies are not sent, so a
// fixed window's count in Redis leaves them out (it counts denied hits, but
// they change no decision: the window is already over its limit). A Reset
// made through this store forgets the key's denial at once. At most 100 000
// keys are held; bound must be positive (at most [MaxSpan]).
func WithDeniedCache(bound time.Duration) Option {
	return func(c *config) error {
		if bound <= 0 || bound > MaxSpan {
			return fmt.Errorf("%w: WithDeniedCache(%v) is not between 0 and %v", ErrInvalid, bound, MaxSpan)
		}
		c.deniedFor = bound
		return nil
	}
}

// WithFallbackSize bounds the keys of the [Fallback] table (default
// 100000; 0 for no bound).
func WithFallbackSize(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: WithFallbackSize(%d) is negative", ErrInvalid, n)
		}
		c.fallback = n
		return nil
	}
}

// String returns the mode's name.
func (o Outage) String() string {
	switch o {
	case Fallback:
		return "fallback"
	case FailOpen:
		return "fail-open"
	case FailClosed:
		return "fail-closed"
	case FailError:
		return "fail-error"
	}
	return fmt.Sprintf("Outage(%d)", uint8(o))
}
