package table

import "time"

// SlidingLog decides n hits for k at now (Unix ns) by a log of the times of
// the allowed hits: they are allowed iff the hits of the log less than a
// Period (k.Scale, a whole number of milliseconds) old, plus n, are at most
// limit. Times are logged to the millisecond, and a hit logged in
// millisecond m counts until m+1 ms plus the Period, that is for the Period
// after the end of its millisecond: the log is exact to the millisecond,
// never more lenient, at most a millisecond stricter. Denied hits are not
// logged.
//
// The log keeps one (gap, count) pair per millisecond with allowed hits, in
// varints: a few bytes a hit, and as many pairs as there are such
// milliseconds in the last Period, so at most limit. It is the costly
// algorithm: its memory grows with limit.
func (t *Table) SlidingLog(k Key, limit, n, now int64) Decision {
	return t.countHit(k, logGrid(k.Scale), limit, n, now, false)
}

// PeekSlidingLog reports k's state at now as [Table.SlidingLog] sees it, and
// whether one more hit would be allowed, without changing anything.
func (t *Table) PeekSlidingLog(k Key, limit, now int64) Decision {
	return t.countHit(k, logGrid(k.Scale), limit, 1, now, true)
}

// logGrid is a grid of milliseconds: a hit in millisecond m counts in every
// millisecond up to m + period.
func logGrid(period int64) grid {
	ms := int64(time.Millisecond)
	return grid{num: 1, den: ms, window: period / ms}
}
