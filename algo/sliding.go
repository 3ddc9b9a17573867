package algo

// SubWindows is how many sub-windows a sliding window's Period is cut into.
const SubWindows = 60

// SlidingWindowHit decides n hits against s at now (Unix ns) by the
// sliding-window counter of Figma's rate limiter, in its strict variant:
// the period (a whole number of milliseconds, in ns) is cut into
// [SubWindows] sub-windows, a count is kept per sub-window, and the hits
// are allowed iff the counts of the current sub-window and of the
// SubWindows before it (the last period and one sub-window), plus n, are at
// most limit. Every hit less than a period old is in those counts, so no
// interval of length period ever holds more than limit allowed hits; the
// price is that a hit is still counted up to one sub-window after it is a
// period old. That is 61 counts on a sub-window's edge too, where Figma sums
// 60: with nanosecond times, the sub-window that began exactly a period ago
// may hold hits less than a period old. Denied hits change nothing. It
// reports whether s changed.
func SlidingWindowHit(s *SlotState, period, limit, n, now int64) (Decision, bool) {
	return slotHit(s, period, limit, n, now, false, false)
}

// SlidingWindowPeek reports s at now as [SlidingWindowHit] sees it, and
// whether one more hit would be allowed.
func SlidingWindowPeek(s SlotState, period, limit, now int64) Decision {
	d, _ := slotHit(&s, period, limit, 1, now, true, false)
	return d
}

// SlidingWindowDeath returns when s, a sliding window's state for period,
// is back to full capacity, in Unix ns: when the hits of its newest slot
// stop counting.
func SlidingWindowDeath(s *SlotState, period int64) int64 {
	return slidingGrid(period).death(s.Newest)
}

func slidingGrid(period int64) grid {
	return grid{num: SubWindows, den: period, window: SubWindows}
}
