package actorlimit

import (
	"context"
	"fmt"
	"sync"

	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/table"
)

// batch is the scratch space of one HitMany call, pooled.
type batch struct {
	checks []actor.Check
	decs   []table.Decision
}

var batches = sync.Pool{New: func() any { return new(batch) }}

// HitMany counts the hits of every request in hits, in order, in one round
// trip through the limiter's mailbox, and writes the i-th decision to
// results[i]; results must be as long as hits. A request's N of 0 means 1.
// Every request is validated first: one bad request fails the whole batch
// with an error naming its index, and nothing is counted. It allocates
// nothing in steady state.
func (l *Limiter) HitMany(ctx context.Context, hits []HitRequest, results []Result) error {
	if len(results) != len(hits) {
		return fmt.Errorf("%w: %d results for %d hits", ErrInvalidArgument, len(results), len(hits))
	}
	b := batches.Get().(*batch)
	b.checks = b.checks[:0]
	for i := range hits {
		h := &hits[i]
		n := h.N
		if n == 0 {
			n = 1
		}
		chk, err := newCheck(actor.OpHit, h.ID, h.Policy, n)
		if err != nil {
			batches.Put(b)
			return fmt.Errorf("hits[%d]: %w", i, err)
		}
		b.checks = append(b.checks, chk)
	}
	if cap(b.decs) < len(hits) {
		b.decs = make([]table.Decision, len(hits))
	}
	b.decs = b.decs[:len(hits)]
	if err := l.c.DoMany(ctx, b.checks, b.decs); err != nil {
		return err // b may still be written to by the limiter: not pooled
	}
	for i := range hits {
		results[i] = resultOf(hits[i].Policy, b.decs[i])
	}
	batches.Put(b)
	return nil
}
