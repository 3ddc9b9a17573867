// Package actor runs a limiter as a supervised protoactor-go actor.
//
// # Actors
//
// A supervisor actor is the parent of two children:
//
//   - the limiter, which drives a [Store] (an embedded [table.Table] unless
//     Config.Store gives another) and is its only caller: checks, peeks,
//     resets, sweeps and stats are messages in its mailbox, processed one at
//     a time;
//   - the janitor (package janitor), which ticks every interval and asks the
//     limiter to delete old entries. The limiter deletes them in chunks of at
//     most [SweepChunk] entries a message, so a sweep of a large table never
//     holds the mailbox for long. With the embedded table, while callers
//     wait for their turns, the rest of a sweep is left to them instead: the
//     caller that hands the turn on deletes one entry in every few turns
//     first, so the turn is never held much longer than for a check, and
//     the sweep goes on as the turns go round; once nobody waits, it goes on
//     in chunks. A [Journal]'s snapshot is taken in chunks too,
//     [SnapshotChunk] keys a message.
//
// # Supervision
//
// The supervisor holds the store, as an ETS heir would, and hands it to every
// new incarnation of the limiter, so a restart keeps every count. When a
// message makes the limiter panic, its caller is answered at once with
// [ErrPanicked], the limiter is restarted, and the messages queued behind it
// are answered by the new incarnation. More than Config.MaxRestarts restarts
// within Config.RestartWindow stop the limiter for good: every waiting and
// later call then fails with [ErrClosed].
//
// # The synchronous path
//
// [Client] is how ordinary Go code calls the limiter. A call takes a pooled
// request from a sync.Pool, sends it to the limiter's mailbox and waits for
// the answer: a caller that has not parked yet (it yields the processor a
// few times first) sees it through an atomic state, a parked one is woken on
// the request's own channel. Nothing is allocated in steady state. A caller
// whose context ends gives up at once; the states a request goes through, and
// why the limiter never blocks and a pooled request is never answered twice,
// are written down at the request type (messages.go). The
// limiter's mailbox is this package's own implementation of protoactor's
// Mailbox: a caller that finds it idle runs it on its own goroutine, with no
// goroutine started or woken for a lone caller, for at most
// Config.Throughput messages; if more are waiting by then, a goroutine takes
// over and the caller returns. When nothing is queued, such a caller's
// message is not queued at all: it goes straight to the actor, with none of
// the queue's lock, counter and slices, whose cache lines would otherwise
// move between the cores of two callers taking turns. The mailbox still
// serializes every message, system messages first. A caller of the embedded
// table that holds its turn and finds nothing queued takes no request at
// all: the table decides its check in place, from the caller's own stack,
// so that the turn writes nothing but the table's lines that the next
// caller, on the other core, would have to fetch back.
//
// What a caller does when it finds the mailbox busy depends on the store.
// With the embedded table, whose checks take well under a microsecond, it
// waits for its turn and then runs the mailbox itself, its own message
// behind whatever is queued: the check runs on the caller's processor, with
// no hand-off and no wake-up. The turn is a sync.Mutex, and a caller waits on
// it as on any mutex (the runtime spins briefly, then parks it, and hands the
// turn to the longest waiter once one has waited a millisecond): a contended
// check costs what a mutex around the store's work costs, on any CPU, with no
// spin counts of our own to tune. The caller reads the clock before it waits,
// so the turn is held for the store's work alone. With a store across the
// network a caller only enqueues and waits, so that the calls queued behind
// a round trip go in the next one; but a caller that finds the mailbox idle
// (its round trip the one in flight) takes the turn without waiting and,
// when nothing is queued, decides its checks in place, in a Decide of its
// own on its goroutine, with no request taken from the pool: Do's check in
// a slot of the mailbox's, DoMany's checks and decisions in the caller's
// own slices, lent to the store until Decide returns. The calls queued
// during its round trip go in the next one, which it runs before it
// returns (up to Config.Throughput messages, a goroutine the rest).
//
// # The mailbox as a pipeline
//
// The check calls that a mailbox run finds queued one behind the other are
// handed to the limiter as one message, and their checks go to the store in
// one [Store.Decide], at one instant: for a store across the network, N
// concurrent callers cost one round trip, and the checks queued meanwhile
// form the next batch. A caller's checks are never split, and keep their
// order; any other message (a sweep chunk, stats, another actor's request)
// ends the batch, so it keeps its place among the calls. Config.MaxBatch
// bounds the checks of one Decide (default [DefaultMaxBatch]), so under load
// a caller waits for at most the round trip in progress and its own batch's.
// Calls whose callers gave up are left out; the others are each answered
// with their own slice of the decisions, or all with the store's error, or
// all with [ErrPanicked] if deciding panics. A lone caller's call goes as it
// is, with no copy.
//
// # Messages from other actors
//
// Actor applications can Request the limiter's PID with messages of their own
// API; a [Protocol] given in [Config] decodes them into an algo.Check and encodes
// the reply, which the limiter sends back to the requester as an ordinary
// message.
package actor
