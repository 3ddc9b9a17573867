package algo

// GCRAHit decides n hits against s at now (Unix ns) by the generic cell
// rate algorithm: with the emission interval T = period/limit, the hits are
// allowed iff max(F, now) + n*T - now <= burst*T, and then F (the
// theoretical arrival time) becomes max(F, now) + n*T. Denied hits change
// nothing but the rate of a bucket whose Limit changed. It reports whether
// s changed. limit and burst must be positive and burst*T at most
// [MaxSpan].
func GCRAHit(s *BucketState, period, limit, burst, n, now int64) (Decision, bool) {
	return bucketHit(s, period, limit, burst, n, now, false, false)
}

// GCRAPeek reports s at now as [GCRAHit] sees it, and whether one more hit
// would be allowed.
func GCRAPeek(s BucketState, period, limit, burst, now int64) Decision {
	d, _ := bucketHit(&s, period, limit, burst, 1, now, true, false)
	return d
}
