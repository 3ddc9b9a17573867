package cluster

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// localShards is how many locks the local copies are spread over.
const localShards = 64

// localKey is a LocalFirst key: an id and its fixed window's length in ns.
type localKey struct {
	id     string
	period int64
}

// localEntry is this member's copy of one key's current fixed window.
type localEntry struct {
	window int64 // the window's number: floor(now / period)
	own    int64 // hits this member counted in the window, in all
	acked  int64 // the largest own total the owner has answered for
	owner  int64 // the owner's count at that answer, all members together
	idle   int   // syncs with nothing new to send since the last hit here
	cut    bool  // the last sync of the key failed: the fallback share applies
	active bool  // on the shard's active list: synced at every round
}

// estimate is the window's count as this member knows it: the owner's
// count plus what this member counted since the owner answered.
func (e *localEntry) estimate() int64 { return satAdd(e.owner, e.own-e.acked) }

// localShard is one lock's share of the local copies.
type localShard struct {
	mu      sync.Mutex
	entries map[localKey]*localEntry
	active  []localKey
}

// local holds this member's LocalFirst copies. It is safe for concurrent
// use: checks lock one shard for a map lookup and a few additions.
type local struct {
	seed   maphash.Seed
	shards [localShards]localShard
}

func newLocal() *local {
	l := &local{seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].entries = make(map[localKey]*localEntry)
	}
	return l
}

func (l *local) shard(id string) *localShard {
	return &l.shards[maphash.String(l.seed, id)%localShards]
}

// entry returns k's entry for window w, starting it afresh when its window
// ended. The shard's lock is held.
func (s *localShard) entry(k localKey, w int64, create bool) *localEntry {
	e := s.entries[k]
	if e != nil && e.window >= w {
		return e
	}
	if !create {
		return nil
	}
	if e == nil {
		e = &localEntry{}
		s.entries[k] = e
	}
	*e = localEntry{window: w, active: e.active}
	return e
}

// decide counts a FixedWindow hit (or peeks) at now, as the table's
// FixedWindow does, against this member's estimate of the window's count.
// Denied hits are counted, as the algorithm says. While the key's owner
// cannot be reached (its last sync failed), the hits counted here since the
// owner last answered may not exceed this member's share of the limit,
// limit/members: the fallback.
func (l *local) decide(c *algo.Check, now, members int64) algo.Decision {
	period := int64(c.Period)
	k := localKey{id: c.ID, period: period}
	w := algo.FloorDiv(now, period)
	s := l.shard(c.ID)
	s.mu.Lock()
	var count int64
	if c.Op == algo.OpPeek {
		if e := s.entry(k, w, false); e != nil {
			count = e.estimate()
		}
		s.mu.Unlock()
		return peekDecision(count, c.Limit, w, period, now)
	}
	e := s.entry(k, w, true)
	e.own = satAdd(e.own, c.N)
	e.idle = 0
	count = e.estimate()
	if !e.active {
		e.active = true
		s.active = append(s.active, k)
	}
	cut, unacked := e.cut, e.own-e.acked
	s.mu.Unlock()
	d := hitDecision(count, c.Limit, c.N, w, period, now)
	if cut {
		share := c.Limit / max(members, 1)
		if unacked > share && d.Allowed {
			d.Allowed, d.RetryAfter = false, d.ResetAfter
			if c.N > share {
				d.RetryAfter = algo.Never
			}
		}
		d.Remaining = min(d.Remaining, max(0, share-unacked))
	}
	return d
}

func hitDecision(count, limit, n, w, period, now int64) algo.Decision {
	d := algo.Decision{Count: count, Allowed: count <= limit && count < 1<<63-1}
	d.Remaining = max(0, limit-count)
	d.ResetAfter = time.Duration(end(w, period) - now)
	switch {
	case d.Allowed:
	case n > limit:
		d.RetryAfter = algo.Never
	default:
		d.RetryAfter = d.ResetAfter
	}
	return d
}

func peekDecision(count, limit, w, period, now int64) algo.Decision {
	d := algo.Decision{Count: count, Allowed: count < limit, Remaining: max(0, limit-count)}
	if count > 0 {
		d.ResetAfter = time.Duration(end(w, period) - now)
	}
	switch {
	case d.Allowed:
	case limit < 1:
		d.RetryAfter = algo.Never
	default:
		d.RetryAfter = d.ResetAfter
	}
	return d
}

// end is the Unix ns time at which window w of length period ends,
// saturating.
func end(w, period int64) int64 {
	if w >= (1<<63-1)/period {
		return 1<<63 - 1
	}
	return (w + 1) * period
}

// reset forgets k's local copy.
func (l *local) reset(c *algo.Check) {
	s := l.shard(c.ID)
	s.mu.Lock()
	if e := s.entries[localKey{id: c.ID, period: int64(c.Period)}]; e != nil {
		*e = localEntry{active: e.active}
	}
	s.mu.Unlock()
}

// pending is one key's total to send in a sync.
type pending struct {
	key    localKey
	window int64
	hits   int64
}

// lingerSyncs is how many syncs a key is still synced once the owner has
// its hits, with nothing new to send, to learn the other members' hits.
const lingerSyncs = 2

// takeActive appends to out what each active key has to send: its total
// for the current window. A key stays active while it has hits the owner
// has not acknowledged (so a failed sync is sent again: no hit is lost) and
// for lingerSyncs syncs after that; keys whose window ended before
// now leave (the owner has started a new window).
func (l *local) takeActive(now int64, out []pending) []pending {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		keep := s.active[:0]
		for _, k := range s.active {
			e := s.entries[k]
			if e == nil {
				continue
			}
			if e.window < algo.FloorDiv(now, k.period) || (e.own <= e.acked && e.idle >= lingerSyncs) {
				e.active = false
				continue
			}
			if e.own <= e.acked {
				e.idle++
			}
			keep = append(keep, k)
			if e.own > 0 {
				out = append(out, pending{key: k, window: e.window, hits: e.own})
			}
		}
		clear(s.active[len(keep):])
		s.active = keep
		s.mu.Unlock()
	}
	return out
}

// applied records the owner's answer to p: its count for the window, which
// includes p.hits.
func (l *local) applied(p pending, window, count int64) {
	s := l.shard(p.key.id)
	s.mu.Lock()
	if e := s.entries[p.key]; e != nil && e.window == p.window && window == p.window {
		e.acked = max(e.acked, p.hits)
		e.cut = false
		// The owner's count includes our acked total; own-acked is what we
		// counted since we sent it.
		e.owner = max(e.owner, count, e.acked)
	}
	s.mu.Unlock()
}

// unreached marks p's key as cut off from its owner: the fallback share
// applies to it until a sync succeeds.
func (l *local) unreached(p pending) {
	s := l.shard(p.key.id)
	s.mu.Lock()
	if e := s.entries[p.key]; e != nil && e.window == p.window {
		e.cut = true
	}
	s.mu.Unlock()
}

// sweep deletes the copies whose window ended before now and that have
// nothing left to send.
func (l *local) sweep(now int64) int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for k, e := range s.entries {
			if !e.active && e.window < algo.FloorDiv(now, k.period) {
				delete(s.entries, k)
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// len returns how many copies are held.
func (l *local) len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.entries)
		s.mu.Unlock()
	}
	return n
}
