package table

import "github.com/actorlimit/actorlimit/algo"

// LeakyBucket decides n hits for k at now (Unix ns) by
// [algo.LeakyBucketHit], with k.Scale as the period: a leaky bucket used as
// a queue, as nginx's limit_req with burst does; the bucket drains limit
// hits per k.Scale ns, and burst hits may wait in it behind the one being
// served, so burst+1 hits at once are allowed, the k-th of them with Delay
// (k-1)*k.Scale/limit. Hits that do not fit are denied and change nothing.
// For allowed hits Delay is the wait before serving the first of them; the
// others follow one every k.Scale/limit. limit must be positive, burst not
// negative, and the time to drain burst+1 hits at most [algo.MaxSpan].
func (t *Table) LeakyBucket(k Key, limit, burst, n, now int64) algo.Decision {
	var d algo.Decision
	t.leakyBucket(k, limit, burst, n, now, &d)
	return d
}

// leakyBucket is [Table.LeakyBucket], writing the decision to d.
func (t *Table) leakyBucket(k Key, limit, burst, n, now int64, d *algo.Decision) {
	e, s := t.bucketOf(k)
	var changed bool
	*d, changed = algo.LeakyBucketHit(&s, k.Scale, limit, burst, n, now)
	t.putBucket(k, e, &s, d, changed, now)
}

// PeekLeakyBucket reports k's state at now as [Table.LeakyBucket] sees it,
// and whether one more hit would be allowed and with what Delay, without
// changing anything.
func (t *Table) PeekLeakyBucket(k Key, limit, burst, now int64) algo.Decision {
	_, s := t.bucketOf(k)
	return algo.LeakyBucketPeek(s, k.Scale, limit, burst, now)
}
