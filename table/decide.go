package table

import (
	"context"
	"fmt"

	"github.com/actorlimit/actorlimit/algo"
)

// Decide applies checks in order at now (Unix ns) and writes the i-th
// decision to out[i], which must be at least as long. It is the table's side
// of the limiter actor's Store contract: ctx is ignored and the error is
// always nil. The checks must be valid (see [algo.Check]).
func (t *Table) Decide(_ context.Context, now int64, checks []algo.Check, out []algo.Decision) error {
	if len(checks) > 1 && t.n >= touchMin {
		t.touch(checks)
	}
	for i := range checks {
		t.apply(&checks[i], now, &out[i])
	}
	return nil
}

// Apply applies one valid check at now (Unix ns) and returns its decision.
func (t *Table) Apply(c *algo.Check, now int64) algo.Decision {
	var d algo.Decision
	t.apply(c, now, &d)
	return d
}

// ApplyTo is [Table.Apply] writing the decision to *d: one check with no
// slices and no copy of its decision (the limiter's path for a lone check).
func (t *Table) ApplyTo(c *algo.Check, now int64, d *algo.Decision) { t.apply(c, now, d) }

// apply is [Table.Apply], writing the decision to d: a hit's decision goes
// from the algorithm's function to d with no copy in between.
func (t *Table) apply(c *algo.Check, now int64, d *algo.Decision) {
	k := Key{Kind: uint8(c.Algorithm), Scale: int64(c.Period), ID: c.ID}
	switch c.Op {
	case algo.OpReset:
		t.Delete(k)
		*d = algo.Decision{}
		return
	case algo.OpPeek:
		*d = t.peek(c, k, now)
		return
	}
	switch c.Algorithm {
	case algo.FixedWindow:
		t.fixedWindow(k, c.Limit, c.N, now, d)
	case algo.SlidingWindow:
		t.slidingWindow(k, c.Limit, c.N, now, d)
	case algo.GCRA:
		t.gcra(k, c.Limit, c.Burst, c.N, now, d)
	case algo.TokenBucket:
		t.tokenBucket(k, c.Limit, c.Burst, c.N, now, d)
	case algo.LeakyBucket:
		t.leakyBucket(k, c.Limit, c.Burst, c.N, now, d)
	case algo.SlidingLog:
		t.slidingLog(k, c.Limit, c.N, now, d)
	default:
		panic(unknown(c.Algorithm))
	}
}

// peek reports the check's key as its algorithm sees it, changing nothing.
func (t *Table) peek(c *algo.Check, k Key, now int64) algo.Decision {
	switch c.Algorithm {
	case algo.FixedWindow:
		return t.PeekFixedWindow(k, c.Limit, now)
	case algo.SlidingWindow:
		return t.PeekSlidingWindow(k, c.Limit, now)
	case algo.GCRA:
		return t.PeekGCRA(k, c.Limit, c.Burst, now)
	case algo.TokenBucket:
		return t.PeekTokenBucket(k, c.Limit, c.Burst, now)
	case algo.LeakyBucket:
		return t.PeekLeakyBucket(k, c.Limit, c.Burst, now)
	case algo.SlidingLog:
		return t.PeekSlidingLog(k, c.Limit, now)
	}
	panic(unknown(c.Algorithm))
}

// unknown is the panic of a switch over the algorithms that meets one it
// has no case for: checks are validated before they reach the table, and
// entries made from them, so it is an algorithm added to the list in
// package algo and not here (TestEveryAlgorithm catches it).
func unknown(a algo.Algorithm) string {
	return fmt.Sprintf("table: no case for algorithm %v", a)
}

// touchMin is the number of entries from which [Table.Decide] reads the
// index slots and nodes of all its checks before it decides the first: a
// table that large no longer fits in a core's caches (48 bytes a node), so
// each check would otherwise wait in turn for two reads from memory.
const touchMin = 1 << 15
