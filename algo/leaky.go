package algo

import "math"

// LeakyBucketHit decides n hits against s at now (Unix ns) by a leaky
// bucket used as a queue, as nginx's limit_req with burst does: the bucket
// drains limit hits per period ns, and burst hits may wait in it behind the
// one being served, so burst+1 hits at once are allowed, the k-th of them
// with Delay (k-1)*period/limit. Hits that do not fit are denied and change
// nothing but the rate of a bucket whose Limit changed. For allowed hits
// Delay is the wait before serving the first of them; the others follow one
// every period/limit. It reports whether s changed. limit must be positive,
// burst not negative, and the time to drain burst+1 hits at most [MaxSpan].
func LeakyBucketHit(s *BucketState, period, limit, burst, n, now int64) (Decision, bool) {
	return bucketHit(s, period, limit, burst, n, now, false, true)
}

// LeakyBucketPeek reports s at now as [LeakyBucketHit] sees it, and whether
// one more hit would be allowed and with what Delay.
func LeakyBucketPeek(s BucketState, period, limit, burst, now int64) Decision {
	d, _ := bucketHit(&s, period, limit, burst, 1, now, true, true)
	return d
}

// queue returns the hits a leaky bucket holds: the one served and the burst
// that wait.
func queue(burst int64) int64 {
	if burst == math.MaxInt64 {
		return burst
	}
	return burst + 1
}
