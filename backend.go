package actorlimit

import (
	"context"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/algo"
)

// backend is what a [Limiter] needs of each of its shards: something that
// decides valid checks for the ids hashed onto it. The Limiter validates
// every input at the edge, hashes ids onto its backends, and turns their
// decisions into Results; a backend only decides. The limiter actor's
// synchronous client ([actor.Client]) is the backend today; another way of
// deciding (remote owners in a cluster) is another implementation, with no
// change to the Limiter's methods.
//
// A backend is safe for concurrent use. Its methods return the errors the
// Limiter documents (ErrClosed, ErrPanicked, a context's error, a store's
// error), wrapped or not.
type backend interface {
	// Do decides one check.
	Do(ctx context.Context, chk algo.Check) (algo.Decision, error)
	// DoMany decides checks in order, at one instant, writing the i-th
	// decision to out[i]; out is untouched on error.
	DoMany(ctx context.Context, checks []algo.Check, out []algo.Decision) error
	// Sweep deletes expired state now and returns how much it deleted.
	Sweep(ctx context.Context) (int, error)
	// Stats returns the backend's statistics.
	Stats(ctx context.Context) (actor.Stats, error)
	// PID is the actor to message about the backend's ids, or nil if it
	// has none.
	PID() *protoactor.PID
	// Close stops the backend; it is idempotent.
	Close() error
}

var _ backend = (*actor.Client)(nil)
