package analytics

import "math/bits"

// Buckets is the number of log-scale buckets of each histogram: bucket 0
// holds 0, bucket i (1 <= i < Buckets-1) holds 2^(i-1) to 2^i-1, and the
// last holds everything from 2^(Buckets-2).
const Buckets = 24

// BucketOf returns the bucket of v; negative values go to bucket 0.
func BucketOf(v int64) int {
	if v <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(v)), Buckets-1)
}

// BucketRange returns the smallest and largest value of bucket i; the last
// bucket's largest is -1, for no bound.
func BucketRange(i int) (lo, hi int64) {
	switch {
	case i <= 0:
		return 0, 0
	case i >= Buckets-1:
		return 1 << (Buckets - 2), -1
	}
	return 1 << (i - 1), 1<<i - 1
}

// hist counts groups by bucket.
type hist [Buckets]uint32

func (h *hist) add(v int64) {
	b := BucketOf(v)
	if h[b] < ^uint32(0) {
		h[b]++
	}
}
