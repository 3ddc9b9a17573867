package redisstore

import (
	"sync"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// deniedCache is the over-limit cache ([WithDeniedCache]): for each key
// whose last hit Redis denied, until when this store answers such hits
// denied itself. It is safe for concurrent use.
type deniedCache struct {
	bound int64 // the longest an entry answers, ns
	size  int

	mu sync.RWMutex
	m  map[deniedKey]deniedEntry
}

// deniedKey names a Redis key by what it is made of (see Store.key),
// without building the string.
type deniedKey struct {
	id     string
	alg    algo.Algorithm
	period time.Duration
}

func keyOf(c *algo.Check) deniedKey { return deniedKey{c.ID, c.Algorithm, c.Period} }

// deniedEntry is Redis's denial of a hit of n under one policy, made at
// now (the now given to Decide, read before the round trip).
type deniedEntry struct {
	limit, burst, n  int64
	at               int64 // the denial's now
	until            int64 // hits are answered here from at until this instant
	reset            int64 // now + the denial's ResetAfter
	count, remaining int64
}

func newDeniedCache(bound time.Duration, size int) *deniedCache {
	return &deniedCache{bound: int64(bound), size: size, m: make(map[deniedKey]deniedEntry)}
}

// answer returns the cached denial of c's hit at now, if its key has one
// that applies: same policy and N, from the denial until its end.
func (d *deniedCache) answer(now int64, c *algo.Check) (algo.Decision, bool) {
	d.mu.RLock()
	e, ok := d.m[keyOf(c)]
	d.mu.RUnlock()
	if !ok || now >= e.until || now < e.at || // a clock that stepped back asks Redis
		e.limit != c.Limit || e.burst != c.Burst || c.N != e.n {
		return algo.Decision{}, false
	}
	return algo.Decision{
		Cached: true,
		Count:  e.count, Remaining: e.remaining,
		RetryAfter: time.Duration(e.until - now), ResetAfter: time.Duration(max(0, e.reset-now)),
	}, true
}

// remember records Redis's decision dec of c's hit made at now: a denial
// with a finite RetryAfter is kept for at most the bound; any other answer,
// and a reset, forgets the key's denial.
func (d *deniedCache) remember(now int64, c *algo.Check, dec *algo.Decision) {
	key := keyOf(c)
	keep := c.Op == algo.OpHit && !dec.Allowed && dec.RetryAfter > 0 && dec.RetryAfter != algo.Never
	d.mu.Lock()
	defer d.mu.Unlock()
	if !keep {
		if c.Op != algo.OpPeek {
			delete(d.m, key)
		}
		return
	}
	if _, ok := d.m[key]; !ok && len(d.m) >= d.size {
		for k, e := range d.m {
			if now >= e.until {
				delete(d.m, k)
			}
		}
		if len(d.m) >= d.size {
			clear(d.m) // every entry is live: start again rather than grow
		}
	}
	d.m[key] = deniedEntry{
		limit: c.Limit, burst: c.Burst, n: c.N, at: now,
		until: now + min(int64(dec.RetryAfter), d.bound), reset: now + int64(dec.ResetAfter),
		count: dec.Count, remaining: dec.Remaining,
	}
}
