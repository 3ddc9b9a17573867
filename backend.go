package actorlimit

import (
	"context"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/algo"
)

// Backend is what a [Limiter] needs of each of its shards: something that
// decides valid checks for the ids hashed onto it. The Limiter validates
// every input at the edge (a Backend's checks are valid: see
// [algo.Validate]), hashes ids onto its backends, and turns their decisions
// into Results; a Backend only decides. The limiter actors that [Start]
// spawns are backends (their synchronous clients); [Over] makes a Limiter
// on another one, such as a member of a cluster (package cluster), with no
// change to the Limiter's methods.
//
// A Backend is safe for concurrent use. Its methods return the errors the
// Limiter documents (ErrClosed, ErrPanicked, a context's error, a store's
// error; ErrInvalidArgument only for a check it refuses, having counted
// nothing), wrapped or not.
type Backend interface {
	// Do decides one check.
	Do(ctx context.Context, chk algo.Check) (algo.Decision, error)
	// DoMany decides checks in order, at one instant, writing the i-th
	// decision to out[i] (len(out) >= len(checks)); out is untouched on
	// error. It must not keep checks or out after it returns.
	DoMany(ctx context.Context, checks []algo.Check, out []algo.Decision) error
	// Sweep deletes expired state now and returns how much it deleted; a
	// backend whose state expires by itself returns 0.
	Sweep(ctx context.Context) (int, error)
	// Stats returns the backend's statistics; the Limiter's Stats sums
	// them over its shards. Fields a backend cannot tell stay zero.
	Stats(ctx context.Context) (BackendStats, error)
	// PID is the actor to message about the backend's ids with
	// [HitRequest], [PeekRequest] and [ResetRequest], or nil if it has
	// none; Limiter.PID and Limiter.PIDFor return it.
	PID() *protoactor.PID
	// Close stops the backend; it is idempotent. Limiter.Close calls it.
	Close() error
}

// BackendStats is what [Backend.Stats] returns: a shard's statistics, with
// the fields of [Stats] (Entries, Evictions, Expired, Restarts, Sweeps,
// SweepTime, Queued, PersistErrors, PersistDropped), which a Limiter sums
// over its shards. It is the limiter actor's own type, named here so that a
// Backend needs no import of the actor package.
type BackendStats = actor.Stats

var _ Backend = (*actor.Client)(nil)
