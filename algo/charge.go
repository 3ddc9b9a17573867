package algo

// Charging is how a key's owner, in a cluster, counts hits another node
// has already allowed on its own copy of the key: they happened, so they
// are counted whatever the owner's state says, past the limit if need be.
// A bucket charged past its capacity is in debt: it allows nothing until it
// has drained back under capacity, so that over time the rate holds. The
// debt is bounded by one more capacity: a charged bucket holds at most
// twice its capacity, so it is back to full after at most capacity*T.

// ChargeBucket counts n hits at now in s, a [GCRA], [TokenBucket] or
// [LeakyBucket] state of a policy of limit per period whose bucket holds
// capacity hits (see [BucketCapacity]), past the capacity if need be: F
// becomes max(F, now) + n*T, at most now + 2*capacity*T (and
// [MaxSpan]). limit, period, capacity and n must be positive.
func ChargeBucket(s *BucketState, period, limit, capacity, n, now int64) {
	r := drain{period, limit}
	back, _ := r.held(s, capacity, now)
	bound := r.bound(capacity, true)
	need, ok := r.times(n)
	if need = r.add(back, need); !ok || bound.less(need) {
		need = bound
	}
	s.set(r, now, need)
}

// BucketCapacity returns the hits a bucket of algorithm a holds under a
// policy's burst: burst for [GCRA] and [TokenBucket], burst+1 for
// [LeakyBucket] (the hit being served and the burst that wait).
func BucketCapacity(a Algorithm, burst int64) int64 {
	if a == LeakyBucket {
		return queue(burst)
	}
	return burst
}

// ChargeSlidingWindow counts n hits at now in s, a [SlidingWindow] state of
// period, whatever the limit. period and n must be positive.
func ChargeSlidingWindow(s *SlotState, period, n, now int64) {
	s.charge(slidingGrid(period), n, now)
}

// ChargeSlidingLog counts n hits at now in s, a [SlidingLog] state of
// period, whatever the limit. period and n must be positive.
func ChargeSlidingLog(s *SlotState, period, n, now int64) {
	s.charge(logGrid(period), n, now)
}

// charge drops the slots that no longer count at now and counts n hits in
// now's slot, saturating.
func (s *SlotState) charge(g grid, n, now int64) {
	cur := g.slot(now)
	alive, off, base := s.scan(cur - g.window)
	s.trim(alive, off, base)
	if room := 1<<63 - 1 - s.Count; n > room {
		n = room
	}
	if n > 0 {
		s.add(cur, n)
	}
}
