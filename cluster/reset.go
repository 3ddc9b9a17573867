package cluster

import (
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// Resets in LocalFirst mode. A reset is decided by the owner of the key's
// partition, which forgets its state of the key and keeps a mark of the
// reset: when it was made, and the owner's count of resets then (its
// generation). Every member's sync asks each owner for the marks made
// since the last one it saw, for every partition where it holds a copy
// (active or idle: the sync probes those partitions every round), and each
// copy honours the marks of its key: it forgets the owner's count or state
// it had, and the hits it made before the reset. Hits are compared with the
// reset by time: the owner forgets a copy's hits made before the mark
// (those of the other algorithms carry their times; a fixed window's
// total, the time of its latest hit), so a sync sent before the reset, or
// sent again after it, cannot bring the old count back, and the hits made
// after it count.

// resetMark is an owner's record of the latest reset of one key.
type resetMark struct {
	gen   uint64 // the owner's count of resets when it was made
	at    int64  // when it was made (Unix ns)
	until int64  // when no copy of the key's state before it can be alive
}

// markSpan is how long (ns) a mark of c's key is kept after its reset:
// two periods, or two of the times a bucket takes to drain when its burst
// is larger than its limit, saturating.
func markSpan(c *algo.Check) int64 {
	span := satAdd(int64(c.Period), int64(c.Period))
	if !c.Algorithm.Windowed() && c.Limit > 0 && c.Burst > c.Limit {
		times := c.Burst/c.Limit + 1
		if span > (1<<63-1)/times {
			return 1<<63 - 1
		}
		span *= times
	}
	return span
}

// reset forgets c's key as of at (Unix ns), unless the owner already
// applied a reset of the key at or after at (the same reset sent again):
// its state of the key; for a fixed window, the sum of the members'
// totals, not the totals themselves (their next totals add only what is
// new); and, when the owner runs on a member, that member's own copy. It
// records the reset's mark for the members' copies.
func (o *ownerPart) reset(c *algo.Check, at int64) {
	o.mu.Lock()
	applied := o.resetKey(c, at)
	o.mu.Unlock()
	if applied && o.self != nil && c.Algorithm == algo.FixedWindow {
		o.self.reset(c, at)
	}
}

// resetKey is reset with o.mu held, less the member's copy; it reports
// whether it applied the reset.
func (o *ownerPart) resetKey(c *algo.Check, at int64) bool {
	k := keyOf(c)
	if mk, ok := o.marks[k]; ok && at <= mk.at {
		return false
	}
	o.table.Delete(k.table())
	delete(o.unsynced, k)
	if c.Algorithm == algo.FixedWindow {
		lk := localKey{id: c.ID, period: int64(c.Period)}
		if w := o.windows[lk]; w != nil && algo.FloorDiv(at, lk.period) >= w.window {
			w.sum = 0
		}
	}
	if _, ok := o.marks[k]; !ok && o.limit > 0 && len(o.marks) >= o.limit {
		o.evictMark()
	}
	o.gen++
	o.marks[k] = resetMark{gen: o.gen, at: at, until: satAdd(max(at, 0), markSpan(c))}
	return true
}

// evictMark deletes one of a few marks: the one that ends first. o.mu is
// held.
func (o *ownerPart) evictMark() {
	var (
		victim stateKey
		first  int64
		seen   int
	)
	for k, mk := range o.marks {
		if seen == 0 || mk.until < first {
			victim, first = k, mk.until
		}
		if seen++; seen == evictSample {
			break
		}
	}
	delete(o.marks, victim)
}

// resetAt returns the time of the latest reset of k the owner keeps, 0 if
// none. o.mu is held.
func (o *ownerPart) resetAt(k stateKey) int64 {
	return o.marks[k].at
}

// marksSince returns the marks made after the gen-th of incarnation inc,
// all of them for another incarnation, and the owner's count of resets.
func (o *ownerPart) marksSince(inc, gen uint64) ([]*clusterpb.Reset, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if inc != o.inc {
		gen = 0
	}
	var out []*clusterpb.Reset
	for k, mk := range o.marks {
		if mk.gen > gen {
			out = append(out, &clusterpb.Reset{Algorithm: uint32(k.alg), Id: k.id, PeriodNs: k.period, At: mk.at})
		}
	}
	return out, o.gen
}

// sweepMarks deletes the marks that ended before now. o.mu is held.
func (o *ownerPart) sweepMarks(now int64) {
	for k, mk := range o.marks {
		if mk.until < now {
			delete(o.marks, k)
		}
	}
}

// exportMarks returns the marks that have not ended at now, for the
// partition's next owner or its backup. o.mu is held.
func (o *ownerPart) exportMarks(now int64) []*clusterpb.Reset {
	var out []*clusterpb.Reset
	for k, mk := range o.marks {
		if mk.until >= now {
			out = append(out, &clusterpb.Reset{Algorithm: uint32(k.alg), Id: k.id, PeriodNs: k.period, At: mk.at, Until: mk.until})
		}
	}
	return out
}

// loadMarks keeps the marks rs that another owner of the partition
// exported, where they are later than its own: each is a reset made
// since, to the members, which honour it once. o.mu is held.
func (o *ownerPart) loadMarks(rs []*clusterpb.Reset, now int64) {
	for _, r := range rs {
		k := stateKey{alg: algo.Algorithm(r.GetAlgorithm()), period: r.GetPeriodNs(), id: r.GetId()}
		if !k.alg.Known() || k.period <= 0 || r.GetUntil() < now {
			continue
		}
		if mk, ok := o.marks[k]; ok && mk.at >= r.GetAt() {
			continue
		}
		if _, ok := o.marks[k]; !ok && o.limit > 0 && len(o.marks) >= o.limit {
			o.evictMark()
		}
		o.gen++
		o.marks[k] = resetMark{gen: o.gen, at: r.GetAt(), until: r.GetUntil()}
	}
}

// resetSeen is the last of an owner's resets of a partition that a member
// has seen: the owner's incarnation and its count of resets.
type resetSeen struct{ inc, gen uint64 }

// learnResets has the member's copies honour the marks of partition p that
// r carries, and records the last one seen.
func (m *Member) learnResets(p int, r *clusterpb.PartReply) {
	ps := &m.parts[p]
	for _, mk := range r.GetResets() {
		a := algo.Algorithm(mk.GetAlgorithm())
		if mk.GetPeriodNs() <= 0 || !a.Known() {
			continue
		}
		if a == algo.FixedWindow {
			m.local.honour(localKey{id: mk.GetId(), period: mk.GetPeriodNs()}, mk.GetAt())
		} else {
			m.states.honour(stateKey{alg: a, period: mk.GetPeriodNs(), id: mk.GetId()}, mk.GetAt())
		}
	}
	seen := &resetSeen{inc: r.GetIncarnation(), gen: r.GetResetGen()}
	for {
		old := ps.resets.Load()
		if old != nil && old.inc == seen.inc && old.gen >= seen.gen {
			return
		}
		if ps.resets.CompareAndSwap(old, seen) {
			return
		}
	}
}

// askResets fills in, in part, the last of partition p's resets the member
// has seen.
func (m *Member) askResets(p int, part *clusterpb.PartSync) {
	if seen := m.parts[p].resets.Load(); seen != nil {
		part.ResetIncarnation, part.ResetGen = seen.inc, seen.gen
	}
}
