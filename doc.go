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
// # Fixed window
//
// [FixedWindow], the zero [Algorithm], is the raterlimiter's: the window of
// a hit at time t is bucket floor(t in Unix ms / Period in ms). Every hit is
// counted, denied ones too; hits are allowed iff the window's count after
// them is at most Limit. Remaining is max(0, Limit-Count), ResetAfter the time
// until the window ends, and RetryAfter the same when denied (negative when
// no wait can help: more hits at once than Limit).
//
// # Memory
//
// The table holds at most [WithMaxEntries] entries (default
// [DefaultMaxEntries]); past that the entries of the oldest windows are
// evicted first and counted in [Stats].
package actorlimit
