package actorlimit

import (
	"context"
	"fmt"
	"sync"

	"github.com/actorlimit/actorlimit/algo"
)

// batch is the scratch space of one HitMany call, pooled.
type batch struct {
	checks []algo.Check
	decs   []algo.Decision
	// With several shards the checks are grouped by shard (a counting
	// sort): order[j] is the index in hits of the j-th grouped check, and
	// shard s has checks[start[s]:start[s+1]].
	order []int
	start []int
	shard []int
}

var batches = sync.Pool{New: func() any { return new(batch) }}

// HitMany counts the hits of every request in hits, in order, in one round
// trip through the limiter's mailbox (one per shard touched, with
// WithShards), and writes the i-th decision to results[i]; results must be
// as long as hits. A request's N of 0 means 1. Every request is validated
// first: one bad request fails the whole batch with an error naming its
// index, and nothing is counted. It allocates nothing in steady state.
func (l *Limiter) HitMany(ctx context.Context, hits []HitRequest, results []Result) error {
	if !l.Started() {
		return errNotStarted
	}
	if len(results) != len(hits) {
		return fmt.Errorf("%w: %d results for %d hits", ErrInvalidArgument, len(results), len(hits))
	}
	b := batches.Get().(*batch)
	b.checks = grow(b.checks, len(hits))
	b.decs = grow(b.decs, len(hits))
	grouped := len(l.shards) > 1
	if grouped {
		b.group(l, hits)
	}
	for i := range hits {
		h := &hits[i]
		if grouped {
			h = &hits[b.order[i]]
		}
		n := h.N
		if n == 0 {
			n = 1
		}
		chk, err := newCheck(algo.OpHit, h.ID, h.Policy, n)
		if err != nil {
			if grouped {
				i = b.order[i]
			}
			batches.Put(b)
			return fmt.Errorf("hits[%d]: %w", i, err)
		}
		b.checks[i] = chk
	}
	if err := b.run(ctx, l); err != nil {
		batches.Put(b) // the limiters work on copies: b is ours again
		return err
	}
	for i := range hits {
		j := i
		if grouped {
			j = b.order[i]
		}
		results[j] = resultOf(hits[j].Policy, b.decs[i])
	}
	batches.Put(b)
	return nil
}

// group orders the hits by shard.
func (b *batch) group(l *Limiter, hits []HitRequest) {
	n := len(l.shards)
	b.start = grow(b.start, n+1)
	clear(b.start)
	b.shard = grow(b.shard, len(hits))
	b.order = grow(b.order, len(hits))
	for i := range hits {
		s := l.shardIndex(hits[i].ID)
		b.shard[i] = s
		b.start[s+1]++
	}
	for s := range n {
		b.start[s+1] += b.start[s]
	}
	for i := range hits {
		s := b.shard[i]
		b.order[b.start[s]] = i
		b.start[s]++
	}
	// start[s] now holds the end of shard s: shift back to starts.
	copy(b.start[1:], b.start[:n])
	b.start[0] = 0
}

// run sends the checks to their limiter(s) and waits for the decisions.
func (b *batch) run(ctx context.Context, l *Limiter) error {
	if len(l.shards) == 1 {
		return l.shards[0].DoMany(ctx, b.checks, b.decs)
	}
	for s, c := range l.shards {
		lo, hi := b.start[s], b.start[s+1]
		if lo == hi {
			continue
		}
		if err := c.DoMany(ctx, b.checks[lo:hi], b.decs[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

// grow returns s with length n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
