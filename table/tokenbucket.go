package table

// TokenBucket decides n hits for k at now (Unix ns) by a token bucket that
// holds capacity tokens and is refilled continuously with limit tokens per
// k.Scale ns: the hits take n tokens if there are that many, else they are
// denied and take none. limit and capacity must be positive and the time to
// refill capacity tokens at most [MaxSpan].
//
// A token bucket is the mirror image of [Table.GCRA]: the tokens missing from
// a full bucket are the hits a GCRA bucket holds. The entry therefore keeps
// the time at which the bucket will be full again, and Count is the tokens
// missing (rounded up), Remaining the whole tokens left.
func (t *Table) TokenBucket(k Key, limit, capacity, n, now int64) Decision {
	d := t.drainHit(k, limit, capacity, n, now, false)
	d.Delay = 0
	return d
}

// PeekTokenBucket reports k's state at now as [Table.TokenBucket] sees it,
// and whether one more token could be taken, without changing anything.
func (t *Table) PeekTokenBucket(k Key, limit, capacity, now int64) Decision {
	d := t.drainHit(k, limit, capacity, 1, now, true)
	d.Delay = 0
	return d
}
