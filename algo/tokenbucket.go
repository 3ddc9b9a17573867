package algo

// TokenBucketHit decides n hits against s at now (Unix ns) by a token
// bucket that holds capacity tokens and is refilled continuously with limit
// tokens per period ns: the hits take n tokens if there are that many, else
// they are denied and take none. It reports whether s changed. limit and
// capacity must be positive and the time to refill capacity tokens at most
// [MaxSpan].
//
// A token bucket is the mirror image of [GCRAHit]: the tokens missing from
// a full bucket are the hits a GCRA bucket holds. s therefore keeps the
// time at which the bucket will be full again, and the decision's Count is
// the tokens missing (rounded up), Remaining the whole tokens left.
func TokenBucketHit(s *BucketState, period, limit, capacity, n, now int64) (Decision, bool) {
	return bucketHit(s, period, limit, capacity, n, now, false, false)
}

// TokenBucketPeek reports s at now as [TokenBucketHit] sees it, and whether
// one more token could be taken.
func TokenBucketPeek(s BucketState, period, limit, capacity, now int64) Decision {
	d, _ := bucketHit(&s, period, limit, capacity, 1, now, true, false)
	return d
}
