package actorlimit

import (
	"context"
	"slices"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// WithInject makes the limiter call f with each check's id, inside its
// actor, just before the check is decided: tests use it to make the limiter
// panic on a chosen id. It installs an embedded table of the configured
// size wrapped by the hook, so give it after WithMaxEntries.
func WithInject(f func(id string)) Option {
	return func(cfg *settings) error {
		cfg.Store = &injecting{Table: table.New(cfg.MaxEntries), f: f}
		return nil
	}
}

// injecting is a table that calls f before each check, one check at a
// time, so that a panic leaves the checks before it applied.
type injecting struct {
	*table.Table
	f func(id string)
}

func (s *injecting) Decide(ctx context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	for i := range checks {
		s.f(checks[i].ID)
		if err := s.Table.Decide(ctx, now, checks[i:i+1], out[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}

// NewOnBackends returns a Limiter whose shards are bs, for tests.
func NewOnBackends(bs ...Backend) *Limiter {
	return &Limiter{shards: slices.Clone(bs), seed: randomSeed()}
}
