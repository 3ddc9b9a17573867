package table

import "github.com/actorlimit/actorlimit/algo"

// SlidingLog decides n hits for k at now (Unix ns) by [algo.SlidingLogHit],
// with k.Scale (a whole number of milliseconds) as the Period: a log of the
// times of the allowed hits, to the millisecond; they are allowed iff the
// hits of the log less than a Period old, plus n, are at most limit. Denied
// hits are not logged. The log keeps one (gap, count) pair per millisecond
// with allowed hits, so its memory grows with limit.
func (t *Table) SlidingLog(k Key, limit, n, now int64) algo.Decision {
	var d algo.Decision
	t.slidingLog(k, limit, n, now, &d)
	return d
}

// slidingLog is [Table.SlidingLog], writing the decision to d.
func (t *Table) slidingLog(k Key, limit, n, now int64, d *algo.Decision) {
	t.slotsHit(algo.SlidingLogHit, k, limit, n, now, d)
}

// PeekSlidingLog reports k's state at now as [Table.SlidingLog] sees it, and
// whether one more hit would be allowed, without changing anything.
func (t *Table) PeekSlidingLog(k Key, limit, now int64) algo.Decision {
	return t.slotsPeek(algo.SlidingLogPeek, k, limit, now)
}
