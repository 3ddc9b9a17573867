package cluster

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
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
	dirty  bool  // own > acked, or a sync of it failed: on the shard's dirty list
}

// estimate is the window's count as this member knows it: the owner's
// count plus what this member counted since the owner answered.
func (e *localEntry) estimate() int64 { return satAdd(e.owner, e.own-e.acked) }

// localShard is one lock's share of the local copies.
type localShard struct {
	mu      sync.Mutex
	entries map[localKey]*localEntry
	dirty   []localKey
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
	*e = localEntry{window: w, dirty: e.dirty}
	return e
}

// decide counts a FixedWindow hit (or peeks) at now, as the table's
// FixedWindow does, against this member's estimate of the window's count.
// Denied hits are counted, as the algorithm says.
func (l *local) decide(c *algo.Check, now int64) algo.Decision {
	period := int64(c.Period)
	k := localKey{id: c.ID, period: period}
	w := table.FloorDiv(now, period)
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
	count = e.estimate()
	if !e.dirty {
		e.dirty = true
		s.dirty = append(s.dirty, k)
	}
	s.mu.Unlock()
	return hitDecision(count, c.Limit, c.N, w, period, now)
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
		*e = localEntry{dirty: e.dirty}
	}
	s.mu.Unlock()
}

// pending is one key's total to send in a sync.
type pending struct {
	key    localKey
	window int64
	hits   int64
}

// takeDirty empties every shard's dirty list and appends what each key has
// to send to out, grouped by nothing yet; keys whose window ended before
// now are dropped (the owner has started a new window).
func (l *local) takeDirty(now int64, out []pending) []pending {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for _, k := range s.dirty {
			e := s.entries[k]
			if e == nil {
				continue
			}
			e.dirty = false
			if e.window < table.FloorDiv(now, k.period) || e.own == 0 {
				continue
			}
			out = append(out, pending{key: k, window: e.window, hits: e.own})
		}
		s.dirty = s.dirty[:0]
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
		e.owner = max(e.owner, count)
		e.acked = max(e.acked, p.hits)
		// The owner's count includes our acked total, and own-acked is what
		// we counted since; never let the estimate fall below our own.
		e.owner = max(e.owner, e.acked)
	}
	s.mu.Unlock()
}

// failed puts p back on its shard's dirty list, so the next sync sends it
// again: its total includes every hit, so none is lost.
func (l *local) failed(p pending) {
	s := l.shard(p.key.id)
	s.mu.Lock()
	if e := s.entries[p.key]; e != nil && e.window == p.window && !e.dirty {
		e.dirty = true
		s.dirty = append(s.dirty, p.key)
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
			if !e.dirty && e.window < table.FloorDiv(now, k.period) {
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
