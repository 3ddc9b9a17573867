package actor

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// Errors returned by a [Client]. The root package re-exports them.
var (
	// ErrClosed is returned by every call to a limiter that was closed or
	// stopped after too many restarts.
	ErrClosed = errors.New("actorlimit: limiter is closed")
	// ErrPanicked is returned to the caller whose message made the limiter
	// panic, and to every caller whose checks were gathered into the same
	// Store.Decide (their checks may or may not have been applied); the
	// limiter is restarted with its table intact.
	ErrPanicked = errors.New("actorlimit: limiter panicked")
)

// SweepChunk is the most entries the limiter deletes in one message: some
// 20 microseconds of work at a million entries, so that a check arriving
// during a sweep waits little.
const SweepChunk = 64

// choreEvery is how often a sweep left to the callers taking turns gets a
// turn of its own (see [mailbox.tendChore]): one entry is deleted in
// every choreEvery turns that a waiting caller is handed, so the sweep
// adds about a tenth of a check's time to each, on average.
const choreEvery = 4

// Stats describes a limiter.
type Stats struct {
	// Entries is the number of keys the store holds; -1 if it cannot tell.
	Entries int
	// Evictions counts entries evicted by the store's memory bound.
	Evictions uint64
	// Expired counts entries deleted by sweeps.
	Expired uint64
	// Restarts counts restarts of the limiter actor.
	Restarts int
	// Sweeps counts the sweeps finished (the janitor's and Sweep's).
	Sweeps uint64
	// SweepTime is the time they took in all, by the limiter's clock, from
	// the first chunk to the last.
	SweepTime time.Duration
	// Queued is how many messages were waiting in the limiter's mailbox
	// when the statistics were taken: callers queued behind a busy limiter.
	Queued int
	// PersistErrors counts failed writes of the Journal, PersistDropped
	// the records it could not write (the next snapshot covers them).
	PersistErrors, PersistDropped uint64
}

// Protocol translates the messages of an outside API, sent to the limiter by
// other actors, into checks and replies.
type Protocol interface {
	// Decode returns the check msg asks for; ok is false for a message that
	// is not part of the protocol, err non-nil for one that is but is invalid.
	Decode(msg any) (chk algo.Check, ok bool, err error)
	// Reply returns the message that answers msg.
	Reply(msg any, d algo.Decision, err error) any
}

// callKind says what a call asks.
type callKind uint8

const (
	callCheck callKind = iota
	callBatch
	callSweep
	callStats
)

// call is one synchronous request: the message a [Client] sends and the slot
// the limiter answers in. The limiter reads batch and writes decs. When the
// caller can give up (its context can end), they are the call's own buffers
// (own, ownDecs), so that the limiter's late writes land in memory nobody
// else uses. When it cannot, they may be the caller's own slices (borrowed):
// the caller then waits until the limiter has answered or stopped, and no
// copy is needed.
type call struct {
	kind     callKind
	batch    []algo.Check    // callCheck, callBatch: the checks
	decs     []algo.Decision // their decisions
	borrowed bool            // batch and decs are the caller's
	// at is the clock read by a caller that takes its turn, before it
	// waits for it (Unix ns; 0: read it when serving): see [limiter.instant].
	at      int64
	own     []algo.Check // the call's buffers, reused across uses
	ownDecs []algo.Decision

	n     int
	stats Stats
	err   error
	state atomic.Uint32 // see the states below
	done  chan struct{} // one signal, to a parked caller; room for it, so never blocking
}

// The states of a call, and who moves it between them.
//
//	waiting   --limiter answers-->  answered   (no signal: the caller polls)
//	waiting   --caller parks---->   parked
//	parked    --limiter answers-->  answered   then the limiter sends the one
//	                                            signal on done: its last touch
//	parked    --caller gives up-->  abandoned  (its context ended, or the
//	                                            limiter stopped)
//
// answered and abandoned are final. The limiter moves a call only out of
// waiting and parked; the caller only into parked and abandoned; each move
// is a compare-and-swap, so exactly one of them wins a race. Consequences:
//
//   - The limiter never blocks to answer: it signals only a call it moved out
//     of parked, whose done is empty (a fresh call's, or one whose last
//     signal was received before it was pooled).
//   - A caller that sees answered from waiting may reuse the call at once:
//     the limiter's swap was its last touch.
//   - A caller that loses the race to abandon a parked call (the limiter
//     answered first) must receive the signal before it reuses the call; it
//     returns the answer, which is the truth: the hits were counted.
//   - An abandoned call is never pooled: the limiter may still write to it,
//     or skip it unserved if it sees abandoned before serving it.
const (
	waiting   uint32 = iota // the caller has not parked: no signal needed
	answered                // the limiter has answered
	parked                  // the caller waits on done
	abandoned               // the caller is gone; the limiter drops the call
)

// answer records err and tells the caller, following the states above. It
// never blocks.
func (k *call) answer(err error) {
	k.err = err
	for {
		switch k.state.Load() {
		case waiting:
			if k.state.CompareAndSwap(waiting, answered) {
				return
			}
		case parked:
			if k.state.CompareAndSwap(parked, answered) {
				k.done <- struct{}{}
				return
			}
		default: // abandoned: nobody to tell
			return
		}
	}
}

// gone reports whether the caller abandoned k; the limiter then skips it.
func (k *call) gone() bool { return k.state.Load() == abandoned }

// sweep is a sweep in progress: the limiter sends it to itself after each
// chunk, so the messages queued behind a sweep are served between chunks,
// or leaves it to the callers taking turns (see [heir.sendSelf]).
type sweep struct {
	before  int64 // delete entries whose window ended at or before this Unix ns
	removed int
	reply   *call    // nil for the janitor's sweeps
	janitor *limiter // for the janitor's: the limiter that began it, told when it ends
	start   int64    // the clock when it began, Unix ns
}

// checks reports whether k asks for checks to be decided: the calls that a
// mailbox run gathers into one [Store.Decide].
func (k *call) checks() bool { return k.kind == callCheck || k.kind == callBatch }

// gather is the consecutive check calls of one mailbox run, handed to the
// limiter as one message so that the store decides all their checks in one
// Decide, at one instant. The mailbox fills it and owns it: it is reused
// for the next run once the limiter returns, and dropped after a panic,
// when the supervisor may still hold it as the failing message.
type gather struct {
	calls  []*call
	checks []algo.Check    // the live calls' checks, one after the other
	decs   []algo.Decision // their decisions
}

// DefaultMaxBatch is the default bound on the checks that one Decide gets
// from calls gathered across a mailbox run.
const DefaultMaxBatch = 256
