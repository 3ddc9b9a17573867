package algo

import "time"

// SlidingLogHit decides n hits against s at now (Unix ns) by a log of the
// times of the allowed hits: they are allowed iff the hits of the log less
// than a period (a whole number of milliseconds, in ns) old, plus n, are at
// most limit. Times are logged to the millisecond, and a hit logged in
// millisecond m counts until m+1 ms plus the period, that is for the period
// after the end of its millisecond: the log is exact to the millisecond,
// never more lenient, at most a millisecond stricter. Denied hits are not
// logged. It reports whether s changed.
//
// The log keeps one (gap, count) pair per millisecond with allowed hits, in
// varints: a few bytes a hit, and as many pairs as there are such
// milliseconds in the last period, so at most limit. It is the costly
// algorithm: its memory grows with limit.
func SlidingLogHit(s *SlotState, period, limit, n, now int64) (Decision, bool) {
	return slotHit(s, period, limit, n, now, false, true)
}

// SlidingLogPeek reports s at now as [SlidingLogHit] sees it, and whether
// one more hit would be allowed.
func SlidingLogPeek(s SlotState, period, limit, now int64) Decision {
	d, _ := slotHit(&s, period, limit, 1, now, true, true)
	return d
}

// SlidingLogDeath returns when s, a sliding log's state for period, is back
// to full capacity, in Unix ns: when the hits of its newest millisecond stop
// counting.
func SlidingLogDeath(s *SlotState, period int64) int64 {
	return logGrid(period).death(s.Newest)
}

// logGrid is a grid of milliseconds: a hit in millisecond m counts in every
// millisecond up to m + period.
func logGrid(period int64) grid {
	ms := int64(time.Millisecond)
	return grid{num: 1, den: ms, window: period / ms}
}
