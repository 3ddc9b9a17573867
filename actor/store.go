package actor

import (
	"context"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// Store keeps the limiter's state and decides checks against it. The
// limiter actor drives it; [table.Table] is the embedded implementation, and
// a store that answers over the network (Redis) implements it too.
//
// # Concurrency
//
// The limiter actor is a store's only caller, and its calls never overlap:
// a store needs no locking of its own for them (a store that also runs
// goroutines of its own, for reconnecting or flushing, synchronizes those
// itself). A store that declares itself safe for concurrent use
// (actorlimit.SharedStore) may be driven by several limiter actors at once.
//
// # Batches
//
// Decide takes every check of one mailbox batch at once, so that a
// networked store can send them in one round trip (one pipeline, one script
// call). Checks are applied in order, as if one by one: a later check on the
// same key sees the earlier ones.
//
// # Time
//
// now is the limiter's clock in Unix nanoseconds, read once per batch, so a
// whole batch is decided at one instant. A store that keeps its own time (a
// shared server's clock, so that app servers' clocks do not matter) may
// decide at that time instead, and says so in its doc.
//
// # Errors
//
// Decide returns an error when the batch could not be decided as a whole (a
// network error or timeout, a store that is closed): out is then
// meaningless, and some of the checks may or may not have been applied, as
// for a caller whose context ended. The limiter answers every caller of the
// batch with the error, except for an [algo.CheckErrors]: the store decided
// every check but those it names, and only the calls that hold one of them
// get its error. Invalid checks never reach a store: the root package
// validates them with [algo.Validate].
type Store interface {
	// Decide applies checks in order at now and writes the i-th decision to
	// out[i]; len(out) >= len(checks). ctx bounds how long a networked
	// store may take; the embedded table ignores it.
	Decide(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error
	// Expire deletes state that is back to full capacity at or before the
	// Unix ns time before: at most max entries (max <= 0: no bound). It
	// returns how many it deleted and whether more may remain. A store
	// whose entries expire by themselves (TTLs) returns 0, false.
	Expire(before int64, max int) (removed int, more bool)
	// Len returns the number of keys the store holds, or -1 if it cannot
	// tell cheaply.
	Len() int
	// Evictions returns how many entries the store's memory bound has
	// evicted so far.
	Evictions() uint64
}

var _ Store = (*table.Table)(nil)

// Screener is a [Store] that refuses some valid checks (a networked store
// whose scripts cannot decide them exactly) and can tell which before a
// batch is sent. Decide refuses a batch holding such a check whole, before
// applying any of it. The limiter gathers the calls of many callers into
// one Decide, which fails as a whole; it screens each call's checks first,
// so a call the store would refuse gets the error alone and the others of
// its batch are decided. The caller's error wraps both the store's error
// and [algo.ErrInvalid] (the root's ErrInvalidArgument): nothing was
// counted, as for bad input. Screen must be cheap, touch no state and not
// block.
type Screener interface {
	// Screen returns the error Decide would return for a batch holding c,
	// or nil if Decide accepts it.
	Screen(c *algo.Check) error
}

// Answerer is a [Store] that can answer some hits itself, on the caller's
// goroutine, without the limiter actor: a networked store's cache of the
// denials it was given (redisstore's over-limit cache). [Client.Do] asks it
// first, at the limiter's clock; a hit it answers never reaches the
// mailbox. Answer must be safe for concurrent use with everything else the
// store does, cheap, and must not block; it applies nothing (a hit it
// answers changes no state), and returns false for every check it does not
// answer. A store that implements Answerer but may never answer (a cache
// it can be made without) may also have a method Answering() bool: when it
// reports false, the limiter never asks it.
type Answerer interface {
	Answer(now int64, c *algo.Check) (algo.Decision, bool)
}

// Snapshotter is a [Store] whose state can be written out and read back, so
// that it survives a restart of the process. It is part of the Store
// contract for stores that keep their state in the process (the table); a
// store that keeps it elsewhere (Redis) need not implement it. The same
// concurrency rule holds: the limiter actor is its only caller.
type Snapshotter interface {
	// SnapshotChunk walks the keys the store holds after cur, in an order
	// of the store's own, at most max of them (max <= 0: all that remain)
	// or until fn returns false; calls fn with the record of each (records
	// whose Death is at or before now may be left out); moves cur past the
	// last key walked, and reports whether keys may remain after it. The
	// zero Cursor starts a walk. Between two calls the store may change: a
	// key left unchanged since the walk began must be given exactly once;
	// one changed since may be given any number of times or not at all. fn
	// must not keep r.State after it returns.
	SnapshotChunk(now int64, cur *algo.Cursor, max int, fn func(r algo.Record) bool) (more bool)
	// Record returns the current record of c's key: what a log of changes
	// writes after a batch that touched it. A key without state gives a
	// record with nil State. r.State may be a buffer that the store's next
	// call overwrites: the caller copies what it keeps.
	Record(c *algo.Check) algo.Record
	// Load puts r's state in the store, replacing the key's own. A record
	// whose State is nil deletes the key's state; one whose Death is at or
	// before now is ignored. A record the store cannot decode is an error
	// and changes nothing.
	Load(now int64, r algo.Record) error
}

var _ Snapshotter = (*table.Table)(nil)
