package cluster

import (
	"sync/atomic"
	"time"
)

// LocalFirst across regions. A member decides a fixed window's hit on its
// copy: the owner's count at its last answer plus the hits it counted
// since. What the copy does not hold is the other members' hits that the
// owner had not yet got when it answered, and those since: across regions
// a round takes a round trip, so a round starts every max(SyncEvery, round
// trip), and once the window's count nears the limit every member admits,
// for about that long, hits that the others have already used up (36% over
// the limit at 150 ms, docs/cluster.md).
//
// So a member predicts them. It keeps, for each copy, the others' count in
// the window as the owner last answered it (seen, at the start of the
// round it answered) and their rate: the slope from the window's first
// such count to the last (once a fifth of the window apart), carried to
// the next window while that one is young. The count
// was already old when the owner gave it (each other member sends its
// hits at its next round, then half a round trip), by how much the rate
// tells: the others' hits so far are rate × (now - the window's start),
// of which the count holds seen. The member decides a hit on
//
//	copy + rate × (now - start) - seen
//
// at least the copy, and adding at most the rate over the time since the
// count plus two intervals between rounds and two round trips (traffic
// that started late in the window). Taking the count's age from the rate
// instead, never below 0, overshot: a low rate then still added its
// slope since, and the windows came out under the limit.
// When it owns the partition, the owner's count of the others' hits, read
// at each check, is the one it sees. The prediction only moves the point
// where the member starts to deny, in both directions; a member alone on
// an id predicts nothing. It is on with the wall clock (Config.Clock
// unset): on an injected clock, time between rounds is the test's, not the
// network's.

// lag is what a member knows of its rounds: the interval between them
// (smoothed) and the round trip to the farthest owner it syncs with.
type lag struct {
	on      atomic.Bool
	last    atomic.Int64 // the last round's start, Unix ns
	gap     atomic.Int64 // the smoothed interval between rounds, ns
	rttHalf atomic.Int64 // half the largest smoothed round trip, ns
}

// predicts reports whether the member predicts the others' hits: with the
// wall clock.
func (c Config) predicts() bool {
	_, wall := c.Clock.(wallClock)
	return wall && !c.noPredict
}

// round records a round that starts at now; rtt holds the round trips
// measured to the owners.
func (g *lag) round(now int64, rtt *rttTable, on bool) {
	g.on.Store(on)
	if last := g.last.Swap(now); last > 0 && now > last {
		d := now - last
		if old := g.gap.Load(); old > 0 {
			d = (7*old + d) / 8
		}
		g.gap.Store(d)
	}
	var worst time.Duration
	rtt.m.Range(func(_, v any) bool {
		e := v.(*rttEst)
		e.mu.Lock()
		worst = max(worst, e.srtt)
		e.mu.Unlock()
		return true
	})
	g.rttHalf.Store(int64(worst / 2))
}

// observed records the owner's answer to the round that started at at: its
// count for the window of p, the hits of this member's that it holds
// being p.hits.
func (l *local) observed(p pending, window, count, at int64) {
	if !l.lag.on.Load() {
		return
	}
	s := l.shard(p.key.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[p.key]
	if e == nil || e.window != p.window || window != p.window || e.epoch != p.epoch {
		return
	}
	e.see(max(count-p.hits, 0), at, p.key.period)
}

// see records that the others' hits in e's window were others as the owner
// knew them at at, and updates their rate: the slope from the window's
// first such count to this one, once they are a fifth of the window apart
// (a longer baseline than between two rounds: the rounds' timing is noisy
// on a loaded machine); until then the rate carried from the last window
// stays. The shard's lock is held.
func (e *localEntry) see(others, at, period int64) {
	start := e.window * period
	switch {
	case e.firstAt < start:
		e.first, e.firstAt = others, at
	case others < e.seen || at <= e.seenAt:
		return // an answer older than one taken
	case at-e.firstAt >= period/5:
		e.rate = float64(others-e.first) / float64(at-e.firstAt)
	}
	e.seen, e.seenAt = others, at
}

// unseen returns how many of the other members' hits e's count does not
// hold yet: at their rate, they have made rate × (now - the window's
// start), of which the owner's count had seen; no fewer than none, and no
// more than their rate over the time since the count was taken plus the
// most it can have been old then (two intervals between rounds and two
// round trips). owned says this member owns the key's partition (e.others
// is the owner's count of them, now). The shard's lock is held.
func (l *local) unseen(e *localEntry, owned bool, now, period int64) int64 {
	if !l.lag.on.Load() {
		return 0
	}
	start := e.window * period
	if owned && e.others != e.seen {
		e.see(e.others, now, period)
	}
	if e.rate <= 0 || now <= start {
		return 0
	}
	all := e.rate * float64(now-start)
	if e.seenAt < start {
		return int64(min(all, 1<<62)) // nothing learnt of this window: all of it is unseen
	}
	ceiling := 2 * (l.lag.gap.Load() + 2*l.lag.rttHalf.Load())
	most := e.rate * float64(now-e.seenAt+ceiling)
	return int64(min(max(all-float64(e.seen), 0), most, 1<<62))
}
