package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// Split is a store that keeps the checks whose Period is one second on a
// Redis of their own and every other check on another, as envoy ratelimit's
// per-second Redis does (REDIS_PERSECOND): per-second limits, the busiest
// by far, then load a Redis that can be sized (or left without
// persistence) for them alone. Each side is a [Store] with its own options:
// its outage mode, local fallback table and over-limit cache work on its
// checks as they do alone, so one Redis down sends only its own checks to
// its fallback.
//
// A batch that holds checks of both sides is sent to both at once, each in
// its own round trips; checks of one key always go to one side, so their
// order is kept. Split is safe for concurrent use, as a Store is.
type Split struct {
	second, rest *Store
	scratch      sync.Pool // *splitBatch
}

// splitBatch is one Decide's checks and decisions sorted by side, pooled.
type splitBatch struct {
	idx      [2][]int
	checks   [2][]algo.Check
	out      [2][]algo.Decision
	errs     [2]error
	finished sync.WaitGroup
}

// NewSplit returns a store that decides the checks of a one-second Period
// on second and every other check on rest, or an error wrapping
// [ErrInvalid] if either is nil or both are the same store.
func NewSplit(second, rest *Store) (*Split, error) {
	switch {
	case second == nil || rest == nil:
		return nil, fmt.Errorf("%w: NewSplit: nil store", ErrInvalid)
	case second == rest:
		return nil, fmt.Errorf("%w: NewSplit: one store on both sides", ErrInvalid)
	}
	return &Split{second: second, rest: rest}, nil
}

// side returns 0 for a check that second decides, 1 for rest.
func side(c *algo.Check) int {
	if c.Period == time.Second {
		return 0
	}
	return 1
}

func (s *Split) store(i int) *Store {
	if i == 0 {
		return s.second
	}
	return s.rest
}

// Decide decides each check on its side's store, both sides at once when
// the batch holds both. An error of one side (a [FailError] outage) fails
// only that side's checks: it is returned as an [algo.CheckErrors] naming
// them, with the other side's decisions in out.
func (s *Split) Decide(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	first := -1
	mixed := false
	for i := range checks {
		si := side(&checks[i])
		if first < 0 {
			first = si
		} else if si != first {
			mixed = true
			break
		}
	}
	if first < 0 {
		return nil
	}
	if !mixed {
		return s.store(first).Decide(ctx, now, checks, out)
	}
	b, _ := s.scratch.Get().(*splitBatch)
	if b == nil {
		b = new(splitBatch)
	}
	for si := range 2 {
		b.idx[si], b.checks[si] = b.idx[si][:0], b.checks[si][:0]
	}
	for i := range checks {
		si := side(&checks[i])
		b.idx[si] = append(b.idx[si], i)
		b.checks[si] = append(b.checks[si], checks[i])
	}
	for si := range 2 {
		n := len(b.checks[si])
		if cap(b.out[si]) < n {
			b.out[si] = make([]algo.Decision, n)
		}
		b.out[si] = b.out[si][:n]
	}
	b.finished.Add(1)
	go func() {
		defer b.finished.Done()
		b.errs[0] = s.second.Decide(ctx, now, b.checks[0], b.out[0])
	}()
	b.errs[1] = s.rest.Decide(ctx, now, b.checks[1], b.out[1])
	b.finished.Wait()

	var failed algo.CheckErrors
	for si := range 2 {
		var ce *algo.CheckErrors
		switch err := b.errs[si]; {
		case err == nil:
		case errors.As(err, &ce):
			for k, j := range ce.Index {
				failed.Index = append(failed.Index, b.idx[si][j])
				failed.Errs = append(failed.Errs, ce.Errs[k])
			}
		default:
			for _, i := range b.idx[si] {
				failed.Index = append(failed.Index, i)
				failed.Errs = append(failed.Errs, err)
			}
			continue
		}
		for j, i := range b.idx[si] {
			out[i] = b.out[si][j]
		}
	}
	clear(b.checks[0])
	clear(b.checks[1])
	b.errs = [2]error{}
	s.scratch.Put(b)
	if len(failed.Index) == 0 {
		return nil
	}
	sortFailed(&failed)
	return &failed
}

// sortFailed puts the failed checks in increasing index order, as
// [algo.CheckErrors] wants (each side's list is in order already).
func sortFailed(f *algo.CheckErrors) {
	for i := 1; i < len(f.Index); i++ {
		for j := i; j > 0 && f.Index[j] < f.Index[j-1]; j-- {
			f.Index[j], f.Index[j-1] = f.Index[j-1], f.Index[j]
			f.Errs[j], f.Errs[j-1] = f.Errs[j-1], f.Errs[j]
		}
	}
}

// Screen returns the error c's side would return for it.
func (s *Split) Screen(c *algo.Check) error { return s.store(side(c)).Screen(c) }

// Answer returns c's side's over-limit cache's answer ([Store.Answer]).
func (s *Split) Answer(now int64, c *algo.Check) (algo.Decision, bool) {
	return s.store(side(c)).Answer(now, c)
}

// Answering reports whether either side has an over-limit cache.
func (s *Split) Answering() bool { return s.second.Answering() || s.rest.Answering() }

// Shared reports true: a Split is safe for concurrent use.
func (s *Split) Shared() bool { return true }

// Expire returns 0, false: every key has a TTL and Redis expires it.
func (s *Split) Expire(before int64, max int) (int, bool) { return 0, false }

// Len returns -1, unknown.
func (s *Split) Len() int { return -1 }

// Evictions returns 0: Redis bounds its own memory.
func (s *Split) Evictions() uint64 { return 0 }

// Stats returns the sums of both sides' counters.
func (s *Split) Stats() Stats {
	a, b := s.second.Stats(), s.rest.Stats()
	return Stats{
		Batches: a.Batches + b.Batches, Errors: a.Errors + b.Errors, Outages: a.Outages + b.Outages,
		Probes: a.Probes + b.Probes, Fallbacks: a.Fallbacks + b.Fallbacks, FailedOpen: a.FailedOpen + b.FailedOpen,
		FailedClosed: a.FailedClosed + b.FailedClosed, Reloads: a.Reloads + b.Reloads,
		CheckErrors: a.CheckErrors + b.CheckErrors, Cached: a.Cached + b.Cached,
	}
}
