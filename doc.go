// Package actorlimit limits how often a client (an IP, a user, any id) may do
// something, in the manner of the Erlang raterlimiter: one supervised actor
// owns an ordered table of <bucketNum, id> -> <count, created, modified>,
// every check goes through that actor's mailbox, and a janitor actor
// periodically deletes old entries with a range scan.
//
// # Using it from ordinary Go code
//
// [Start] runs a limiter in an actor system of its own; its methods are
// synchronous and safe for concurrent use:
//
//	lim, err := actorlimit.Start()
//	...
//	defer lim.Close()
//	res, err := lim.CheckRate(peerIP, 30000, 500) // 500 hits per 30 s
//	if err == nil && !res.Allowed { /* answer 413 or 429 */ }
//
// Being over the limit is a decision in the [Result], never an error. Errors
// are for bad input ([ErrInvalidArgument]), a closed limiter ([ErrClosed]),
// a message that made the limiter panic ([ErrPanicked]) and a context that
// ended first (the error wraps ctx.Err()).
//
// # Using it from an actor application
//
// [Spawn] starts the limiter under a parent in the application's own actor
// tree. Besides the synchronous methods, actors can message the limiter's
// [Limiter.PID] without blocking: Request it with a [*HitRequest],
// [*PeekRequest] or [*ResetRequest] and the answer comes back to the sender
// as a [*HitResponse] or [*ResetResponse].
//
// # Algorithms
//
// [Policy.Algorithm] chooses one of six algorithms; the same limiter, table
// and janitor serve them all. State is kept per (algorithm, Period, id), and
// a changed Limit or Burst applies at once to the existing state. [Result]
// means the same for all: Remaining is the hits that could still be allowed
// now, RetryAfter the least wait after which the denied hits would be
// allowed ([Never] when they ask for more than the capacity), ResetAfter the
// wait until the key is back to full capacity.
//
//   - [FixedWindow], the zero Algorithm, is the raterlimiter's: the window
//     of a hit at time t is bucket floor(t in Unix ms / Period in ms). Every
//     hit is counted, denied ones too; hits are allowed iff the window's
//     count after them is at most Limit. Up to twice Limit can pass around a
//     window's edge.
//   - [SlidingWindow] is Figma's counter of sub-windows of Period/60, strict:
//     it sums the current sub-window and the 60 before it, so no interval of
//     length Period ever holds more than Limit allowed hits.
//   - [SlidingLog] logs every allowed hit to the millisecond: the same
//     guarantee, at most a millisecond stricter than exact, at a cost in
//     memory that grows with Limit (at most [MaxSlidingLogLimit]).
//   - [GCRA] is the generic cell rate algorithm: one hit per Period/Limit,
//     Burst at once; one number per key.
//   - [TokenBucket] holds Burst tokens refilled at Limit per Period.
//   - [LeakyBucket] queues up to Burst hits behind the one served and says,
//     in Result.Delay, how long to hold each one so that they leave at Limit
//     per Period, as nginx's limit_req with burst.
//
// Denied hits consume nothing, except under FixedWindow.
//
// # Memory
//
// The table holds at most [WithMaxEntries] entries (default
// [DefaultMaxEntries]). Past that, each new id evicts the state that has
// been idle longest, whatever its id or window, and state that is denying
// hits is kept longest, so a flood of new ids cannot reset the count of an
// id that is being hit. Stats.Evictions counts the evictions.
package actorlimit
