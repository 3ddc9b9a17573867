package cluster

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorlimit/actorlimit/algo"
)

// localShards is how many locks the local copies are spread over.
const localShards = 64

// sampleVictim chooses the key of m to evict among evictSample of them, in
// map order (a random start): the first whose window ended before now, else
// the one of least cost. of returns an entry's window and cost. It reports
// false for an empty m.
func sampleVictim[E any](m map[localKey]E, now int64, of func(E) (window, cost int64)) (victim localKey, ok bool) {
	var best int64
	seen := 0
	for k, e := range m {
		window, cost := of(e)
		if window < algo.FloorDiv(now, k.period) {
			return k, true
		}
		if seen == 0 || cost < best {
			victim, best = k, cost
		}
		if seen++; seen == evictSample {
			break
		}
	}
	return victim, seen > 0
}

// evictSample is how many copies a full shard looks at to choose the one it
// evicts.
const evictSample = 8

// localKey is a LocalFirst key: an id and its fixed window's length in ns.
type localKey struct {
	id     string
	period int64
}

// localEntry is this member's copy of one key's current fixed window.
type localEntry struct {
	window int64  // the window's number: floor(now / period)
	epoch  uint64 // names this copy to the owner (see clusterpb.Total)
	taken  uint64 // the last sync round that took the key from the active list
	own    int64  // hits this member counted in the window, in all
	acked  int64  // the largest own total the owner has answered for, or forgot in a reset
	owner  int64  // the owner's count at that answer, all members together
	last   int64  // when (Unix ns) this member last counted a hit in it
	// reset is the time (Unix ns) of the latest reset of the key that the
	// copy has honoured.
	reset  int64
	part   int32 // the key's partition
	idle   int32 // syncs with nothing new to send since the last hit here
	active bool  // on the shard's active list: synced at every round
	// When this member owns the key's partition: the other members'
	// totals (and this member's evicted copies'), as the owner's state
	// othersInc last counted them.
	others    int64
	othersInc uint64
	// The others' hits in the window as this member last learnt them
	// (seen, from the owner's answer to the round that started at
	// seenAt), and their rate (hits a ns), carried from window to window:
	// see predict.go.
	seen    int64
	seenAt  int64
	first   int64 // the window's first such count, at firstAt
	firstAt int64
	rate    float64
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
	name      atomic.Pointer[string] // the member's name to the owners, once known
	parts     []partState            // the member's, by partition
	seed      maphash.Seed
	perShard  int // the most copies a shard holds; 0: no bound
	epoch     atomic.Uint64
	evictions atomic.Uint64
	shards    [localShards]localShard
	lag       lag // what the copies do not see of the others' hits (predict.go)
}

// newLocal makes the copies of a member that holds at most maxCopies of
// them (0: no bound); epochs count up from first; parts is what the member
// knows of each partition.
func newLocal(maxCopies int, first uint64, parts []partState) *local {
	l := &local{seed: maphash.MakeSeed(), parts: parts}
	if maxCopies > 0 {
		l.perShard = (maxCopies + localShards - 1) / localShards
	}
	l.epoch.Store(first)
	for i := range l.shards {
		l.shards[i].entries = make(map[localKey]*localEntry)
	}
	return l
}

func (l *local) shard(id string) *localShard {
	return &l.shards[maphash.String(l.seed, id)%localShards]
}

// entry returns k's copy for window w, starting it afresh when its window
// ended, and making it, evicting another if the shard is full, when there
// is none. The shard's lock is held.
func (l *local) entry(s *localShard, k localKey, w, now int64, p int, ps *partState, node string) *localEntry {
	e := s.entries[k]
	if e != nil && e.window >= w {
		return e
	}
	if e == nil {
		if l.perShard > 0 && len(s.entries) >= l.perShard {
			l.evict(s, now, node)
		}
		e = &localEntry{}
		s.entries[k] = e
	}
	*e = localEntry{window: w, epoch: l.epoch.Add(1), part: int32(p), taken: e.taken, active: e.active, rate: e.rate}
	ps.holdUntil(end(w, k.period))
	return e
}

// evict deletes one copy of a full shard, chosen among a few: one whose
// window ended before now if there is one; else the one that loses least.
// Evicting a copy loses the hits it has not sent yet (the owner keeps those
// it has: the key's next copy here gets a larger epoch, and the owner adds
// its hits to them) and, until the next sync, what it knew of the window's
// count: a key over its limit would be admitted again. So the cost of a
// copy is its count plus its unsent hits, and a flood of new ids, with a
// hit or two each, evicts its own copies before a busy key's. The shard's
// lock is held. When this member owns the copy's partition, the copy's
// hits go into the owner's state first (as node's).
func (l *local) evict(s *localShard, now int64, node string) {
	victim, ok := sampleVictim(s.entries, now, func(e *localEntry) (int64, int64) {
		return e.window, satAdd(e.estimate(), max(0, e.own-e.acked))
	})
	if !ok {
		return
	}
	e := s.entries[victim]
	if op := l.parts[e.part].owned.Load(); op != nil && e.own > 0 {
		op.add(node, victim, e.window, e.epoch, e.own, e.last)
	}
	delete(s.entries, victim)
	l.evictions.Add(1)
}

// decide counts a FixedWindow hit (or peeks) at now, as the table's
// FixedWindow does, against this member's estimate of the window's count.
// Denied hits are counted, as the algorithm says. When this member owns
// the key's partition (ps.owned) the hit is in the owner's state at once
// (the owner's count is the others' totals plus this member's copy, read
// as it answers), and the count is the owner's. While the partition's
// owner cannot be reached (ps.cut), the hits counted here since the owner
// last answered may not exceed this member's share of the limit,
// limit/members: the fallback. node is this member's name to the owners.
func (l *local) decide(c *algo.Check, now int64, p int, ps *partState, members int64, node string) algo.Decision {
	period := int64(c.Period)
	k := localKey{id: c.ID, period: period}
	w := algo.FloorDiv(now, period)
	op := ps.owned.Load()
	if op != nil {
		if !op.enter() {
			op = nil
		} else {
			defer op.leave()
			defer op.touch() // once the copy changed (see ownerPart.touch)
		}
	}
	s := l.shard(c.ID)
	s.mu.Lock()
	if c.Op == algo.OpPeek {
		var count int64
		e := s.entries[k]
		switch {
		case e != nil && e.window >= w:
			w, count = e.window, e.estimate()
			if op != nil {
				count = max(count, satAdd(e.own, e.othersOf(op, k)))
			}
		case op != nil:
			count = op.count(k, w)
		}
		s.mu.Unlock()
		return peekDecision(count, c.Limit, w, period, now)
	}
	e := l.entry(s, k, w, now, p, ps, node)
	e.own = satAdd(e.own, c.N)
	e.idle, e.last = 0, now
	if op != nil {
		e.others, e.othersInc = e.othersOf(op, k), op.inc
		e.acked, e.owner = e.own, max(e.owner, satAdd(e.own, e.others))
		ps.known.CompareAndSwap(0, op.inc)
	} else if !e.active {
		e.active = true
		s.active = append(s.active, k)
	}
	count, unacked, w := e.estimate(), e.own-e.acked, e.window
	unseen := l.unseen(e, op != nil, now, period)
	s.mu.Unlock()
	d := hitDecision(satAdd(count, unseen), c.Limit, c.N, w, period, now)
	d.Count = count
	if op == nil && ps.cut.Load() {
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

// othersOf returns the others' totals for e's window in the owner's state
// op: e.others if op counted them, else op's count (which holds no hit of
// e's copy). The shard's lock is held.
func (e *localEntry) othersOf(op *ownerPart, k localKey) int64 {
	if e.othersInc == op.inc {
		return e.others
	}
	return op.count(k, e.window)
}

// setName records the member's name to the owners.
func (l *local) setName(node string) { l.name.Store(&node) }

// isSelf reports whether node is this member.
func (l *local) isSelf(node string) bool {
	n := l.name.Load()
	return n != nil && *n == node
}

// ownerCount is the owner's answer, here, for k's window after op counted
// the others' totals for it, others: those plus this member's own hits in
// the window. It records others in this member's copy.
func (l *local) ownerCount(op *ownerPart, k localKey, window, others int64) int64 {
	s := l.shard(k.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[k]
	if e == nil || e.window != window {
		return others
	}
	if e.othersInc != op.inc {
		e.others, e.othersInc = 0, op.inc
	}
	e.others = max(e.others, others)
	return satAdd(e.own, e.others)
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

// reset forgets k's local copy, which a reset made at at (Unix ns): the
// copy of the window starts again, with no hit.
func (l *local) reset(c *algo.Check, at int64) {
	s := l.shard(c.ID)
	s.mu.Lock()
	if e := s.entries[localKey{id: c.ID, period: int64(c.Period)}]; e != nil {
		*e = localEntry{window: max(e.window, algo.FloorDiv(at, int64(c.Period))), epoch: l.epoch.Add(1),
			part: e.part, taken: e.taken, active: e.active, reset: at}
	}
	s.mu.Unlock()
}

// honour has k's copy honour a reset of the key made at at (Unix ns),
// unless it has already or the reset came before the copy's window: the
// owner's count it had is forgotten, and so are its own hits when they
// all came before the reset (the owner takes them as counted). The copy
// is synced again, for lingerSyncs rounds at least, to learn the count
// since.
func (l *local) honour(k localKey, at int64) {
	s := l.shard(k.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[k]
	if e == nil || at <= e.reset || algo.FloorDiv(at, k.period) < e.window {
		return
	}
	e.reset, e.owner, e.others, e.othersInc = at, 0, 0, 0
	if e.last < at {
		e.acked = e.own
	}
	e.idle = 0
	if !e.active {
		e.active = true
		s.active = append(s.active, k)
	}
}

// seedCopy makes c's copy of the window of now, with no hit of this member's,
// for a peek to be answered on the owner's count, and returns what to send
// the owner for it; it reports false if there is a copy already. node is
// this member's name to the owners.
func (l *local) seedCopy(c *algo.Check, now int64, p int, ps *partState, node string) (pending, bool) {
	k := localKey{id: c.ID, period: int64(c.Period)}
	w := algo.FloorDiv(now, k.period)
	s := l.shard(c.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[k]; e != nil && e.window >= w {
		return pending{}, false
	}
	e := l.entry(s, k, w, now, p, ps, node)
	e.idle = 0
	if !e.active {
		e.active = true
		s.active = append(s.active, k)
	}
	return e.pending(k), true
}

// pending is one key's total to send in a sync.
type pending struct {
	key    localKey
	window int64
	hits   int64
	epoch  uint64
	last   int64
	part   int
}

func (e *localEntry) pending(k localKey) pending {
	return pending{key: k, window: e.window, hits: e.own, epoch: e.epoch, last: e.last, part: int(e.part)}
}

// lingerSyncs is how many syncs a key is still synced once the owner has
// its hits, with nothing new to send, to learn the other members' hits.
const lingerSyncs = 2

// takeActive appends to out what each active key has to send: its total
// for the current window. A key stays active while it has hits the owner
// has not acknowledged (so a failed sync is sent again: no hit is lost) and
// for lingerSyncs syncs after that; keys whose window ended before now
// leave (the owner has started a new window). A key that goes idle is not
// forgotten: when its partition's owner changes, [local.copiesOf] sends
// its total again. round numbers the call.
func (l *local) takeActive(now int64, round uint64, out []pending) []pending {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		keep := s.active[:0]
		for _, k := range s.active {
			e := s.entries[k]
			if e == nil || !e.active || e.taken == round {
				continue // evicted or swept, or listed twice after that
			}
			e.taken = round
			if e.window < algo.FloorDiv(now, k.period) || (e.own <= e.acked && e.idle >= lingerSyncs) {
				e.active = false
				continue
			}
			if e.own <= e.acked {
				e.idle++
			}
			keep = append(keep, k)
			out = append(out, e.pending(k)) // with no hit, it asks the count
		}
		clear(s.active[len(keep):])
		s.active = keep
		s.mu.Unlock()
	}
	return out
}

// copiesOf appends to out the totals of every copy of the current window
// whose partition is in parts (a set by partition), whether active or not;
// with activate, it makes them active again, so that they are synced for
// lingerSyncs more rounds. It reads every copy: a sync calls it only for
// partitions whose owner changed.
func (l *local) copiesOf(parts map[int]bool, now int64, activate bool, out []pending) []pending {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for k, e := range s.entries {
			if e.own == 0 || !parts[int(e.part)] || e.window < algo.FloorDiv(now, k.period) {
				continue
			}
			out = append(out, e.pending(k))
			if activate {
				e.idle = 0
				if !e.active {
					e.active = true
					s.active = append(s.active, k)
				}
			}
		}
		s.mu.Unlock()
	}
	return out
}

// applied records the owner's answer to p: its count for the window, which
// includes p.hits.
func (l *local) applied(p pending, window, count int64) {
	s := l.shard(p.key.id)
	s.mu.Lock()
	if e := s.entries[p.key]; e != nil && e.window == p.window && window == p.window && e.epoch == p.epoch {
		e.acked = max(e.acked, p.hits)
		// The owner's count includes our acked total (less what a reset
		// forgot); own-acked is what we counted since we sent it. Answers
		// since the copy honoured the key's latest reset reflect it: the
		// count only grows.
		e.owner = max(e.owner, count)
	}
	s.mu.Unlock()
}

// sweep deletes the copies whose window ended before now, and returns how
// many it deleted.
func (l *local) sweep(now int64) int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for k, e := range s.entries {
			if e.window < algo.FloorDiv(now, k.period) {
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
