package table

import "math"

// LeakyBucket decides n hits for k at now (Unix ns) by a leaky bucket used as
// a queue, as nginx's limit_req with burst does: the bucket drains limit hits
// per k.Scale ns, and burst hits may wait in it behind the one being served,
// so burst+1 hits at once are allowed, the k-th of them with Delay
// (k-1)*k.Scale/limit. Hits that do not fit are denied and change nothing.
// For allowed hits Delay is the wait before serving the first of them; the
// others follow one every k.Scale/limit. limit must be positive, burst not
// negative, and the time to drain burst+1 hits at most [MaxSpan].
func (t *Table) LeakyBucket(k Key, limit, burst, n, now int64) Decision {
	return t.drainHit(k, limit, queue(burst), n, now, false)
}

// PeekLeakyBucket reports k's state at now as [Table.LeakyBucket] sees it,
// and whether one more hit would be allowed and with what Delay, without
// changing anything.
func (t *Table) PeekLeakyBucket(k Key, limit, burst, now int64) Decision {
	return t.drainHit(k, limit, queue(burst), 1, now, true)
}

// queue returns the hits a leaky bucket holds: the one served and the burst
// that wait.
func queue(burst int64) int64 {
	if burst == math.MaxInt64 {
		return burst
	}
	return burst + 1
}
