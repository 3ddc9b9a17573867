package table

import "github.com/actorlimit/actorlimit/algo"

// TokenBucket decides n hits for k at now (Unix ns) by
// [algo.TokenBucketHit], with k.Scale as the period: a token bucket that
// holds capacity tokens and is refilled continuously with limit tokens per
// k.Scale ns; the hits take n tokens if there are that many, else they are
// denied and take none. limit and capacity must be positive and the time to
// refill capacity tokens at most [algo.MaxSpan].
//
// A token bucket is the mirror image of [Table.GCRA]: the tokens missing from
// a full bucket are the hits a GCRA bucket holds. The entry therefore keeps
// the time at which the bucket will be full again, and Count is the tokens
// missing (rounded up), Remaining the whole tokens left.
func (t *Table) TokenBucket(k Key, limit, capacity, n, now int64) algo.Decision {
	var d algo.Decision
	t.tokenBucket(k, limit, capacity, n, now, &d)
	return d
}

// tokenBucket is [Table.TokenBucket], writing the decision to d.
func (t *Table) tokenBucket(k Key, limit, capacity, n, now int64, d *algo.Decision) {
	e, s := t.bucketOf(k)
	var changed bool
	*d, changed = algo.TokenBucketHit(&s, k.Scale, limit, capacity, n, now)
	t.putBucket(k, e, &s, d, changed, now)
}

// PeekTokenBucket reports k's state at now as [Table.TokenBucket] sees it,
// and whether one more token could be taken, without changing anything.
func (t *Table) PeekTokenBucket(k Key, limit, capacity, now int64) algo.Decision {
	_, s := t.bucketOf(k)
	return algo.TokenBucketPeek(s, k.Scale, limit, capacity, now)
}
