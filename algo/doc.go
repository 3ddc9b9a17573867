// Package algo is the one home of actorlimit's algorithms: the list of them,
// the algorithms themselves as pure functions over typed states, the types
// a check and its decision travel in, and the validation of a policy.
//
// It sits below everything else: the public package, the limiter actor and
// every store (the embedded table, a networked store) import it, and it
// imports nothing of actorlimit's. A store and the actor agree on [Check] and
// [Decision] through it, so no store imports the actor.
//
// # The list
//
// [Algorithm] names an algorithm; the list in algorithm.go gives each its Go
// name ([Algorithm.String]), its name in configuration files
// ([Algorithm.MarshalText]: "fixed_window", "sliding_window", "gcra",
// "token_bucket", "leaky_bucket", "sliding_log") and the rules its policies
// must follow ([Validate]). Adding an algorithm is a constant, one entry of
// that list, and the file that decides it.
//
// # The algorithms
//
// Each algorithm is a pure function over a typed state that the caller
// keeps: [FixedWindowHit] over a [FixedState]; [GCRAHit], [TokenBucketHit]
// and [LeakyBucketHit] over a [BucketState]; [SlidingWindowHit] and
// [SlidingLogHit] over a [SlotState]. A hit function decides n hits at a
// time it is given (Unix ns), changes the state as the algorithm says, and
// reports whether it did; its Peek twin takes the state by value and
// changes nothing. The zero state of each type holds no hits. The functions
// start no goroutines, read no clock, allocate nothing (but a slot state's
// buffer when it grows), and know nothing of how a store finds or orders
// its states: a store finds the key's state, calls the function, and files
// the state by its death ([FixedState.Death], [BucketState.Death],
// [SlidingWindowDeath], [SlidingLogDeath]), when it is back to full
// capacity. Arithmetic on counts and times saturates; it never wraps.
//
// The states' binary encoding (AppendBinary, UnmarshalBinary, version
// [StateVersion]) is what a store writes in a snapshot; decoding checks
// every field, and the Check methods check a state against the time it is
// loaded at.
package algo
