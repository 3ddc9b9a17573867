package algo

import "time"

// Op is what a [Check] asks of a store.
type Op uint8

// The operations of a [Check].
const (
	// OpHit counts Check.N hits and decides them.
	OpHit Op = iota
	// OpPeek decides one more hit without counting it.
	OpPeek
	// OpReset forgets the key's state.
	OpReset
)

// Check is one validated request to a store: an operation on the state that
// Algorithm keeps for (Algorithm, Period, ID). The root package builds
// checks from what callers pass and validates them with [Validate], so a
// store may trust them: a known Algorithm, N > 0, a non-empty ID, and a
// Policy that Validate accepts with Burst already defaulted.
type Check struct {
	// Op says what to do.
	Op Op
	// Algorithm keeps the key's state; state is kept per (Algorithm,
	// Period, ID).
	Algorithm Algorithm
	// ID is the client's identifier, at most the root's MaxIDLength bytes.
	ID string
	// Period is the window length, or the time in which the bucket drains
	// Limit hits.
	Period time.Duration
	// Limit is the hits allowed per Period; 0 denies every hit.
	Limit int64
	// Burst is the bucket's capacity for GCRA and TokenBucket (positive),
	// the hits that may wait for LeakyBucket (not negative); the policy's 0
	// has already been replaced by Limit. The windowed algorithms ignore it.
	Burst int64
	// N is how many hits to count; always positive.
	N int64
}

// Never is the RetryAfter of a hit that no wait can allow: it asks for more
// than the limit allows at once.
const Never time.Duration = -1

// Decision is the outcome of one check. Its fields mean the same for every
// algorithm.
type Decision struct {
	// Allowed says whether the hits may go ahead.
	Allowed bool
	// Cached says the decision is a local over-limit cache's denial (a
	// shared store's, such as redisstore.WithDeniedCache), made without
	// asking the store.
	Cached bool
	// Count is the number of hits the state holds: counted in the current
	// window (fixed window), in the last Period (sliding window and log), or
	// not yet drained from the bucket (GCRA and leaky bucket; for the token
	// bucket, the tokens missing), rounded up.
	Count int64
	// Remaining is how many more hits would be allowed now; never negative.
	Remaining int64
	// RetryAfter is the least wait after which the hits would be allowed: 0
	// when allowed, [Never] when no wait would do.
	RetryAfter time.Duration
	// ResetAfter is the wait until the key is back to full capacity.
	ResetAfter time.Duration
	// Delay is, for an allowed LeakyBucket hit, the wait before serving the
	// first of the allowed hits; 0 for every other algorithm.
	Delay time.Duration
}
