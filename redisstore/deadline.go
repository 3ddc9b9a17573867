package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// honorsDeadline reports whether client ends a round trip at its context's
// deadline by itself: go-redis does so only with
// Options.ContextTimeoutEnabled; without it a socket read waits for
// ReadTimeout (5s by default) and the retries after it.
func honorsDeadline(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// bounded runs f, one round trip, until ctx's deadline. When the client
// ends a round trip at the deadline by itself (honorsDeadline) f runs here.
// Else f runs on a goroutine of its own and bounded returns at the
// deadline if f has not: the limiter waits no longer than WithTimeout
// however the client is set. The abandoned round trip ends in the client's
// own time; until then it holds a pooled connection and the commands it was
// given, which the store then leaves to it (r.abandoned: r does not go
// back to the pool) instead of reusing their slices; r is nil for a
// round trip that holds none of a round's slices (a probe).
func (s *Store) bounded(ctx context.Context, r *round, f func(context.Context) error) error {
	if s.honors {
		return f(ctx)
	}
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(s.cfg.timeout)
	}
	ctx, cancel := context.WithDeadline(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		if r != nil {
			r.abandoned = true
		}
		return fmt.Errorf("redisstore: no answer by the deadline (the client does not stop at it: ContextTimeoutEnabled is false): %w", ctx.Err())
	}
}

// deadlineCtx is ctx with a deadline that it reports but arms no timer
// for: Done and Err are the parent's, and Err is DeadlineExceeded once the
// deadline has passed. go-redis bounds a round trip by the deadline alone:
// it sets the connection's read and write deadlines from it
// (Options.ContextTimeoutEnabled) and net.Dialer its dial's. It replaces
// context.WithTimeout, whose timer, armed and stopped at every round trip,
// woke another thread each time: at one caller 10% of the CPU profile was
// that timer's futex wakeups, and the wakeups sat on the latency path.
// Only a wait for a pooled connection is left to the pool's own timeout.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

// withDeadline returns ctx bounded by d, a deadlineCtx that r holds (no
// allocation a round trip): it lives as long as the round, which goes back
// to the pool only when no round trip may still read it.
func (r *round) withDeadline(ctx context.Context, d time.Time) context.Context {
	if old, ok := ctx.Deadline(); ok && old.Before(d) {
		return ctx
	}
	r.dctx = deadlineCtx{ctx, d}
	return &r.dctx
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}
