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
// So a member predicts them. The owner's answer to the round that started
// at t holds the others' hits up to about t - I/2, I the interval between
// rounds (each other member sends its hits at its next round, a uniform
// wait of up to I; the request's half round trip there and the answer's
// back cancel against the owner answering half a round trip after t). The
// member keeps, for each copy, the others' count at that answer and their
// rate in the window (carried to the next window while this one is young),
// and decides a hit on
//
//	copy + rate × (now - t + I/2)
//
// and, when it owns the partition (the owner's state has the others' hits
// up to now - I/2 - half a round trip), on count + rate × (I/2 + rtt/2).
// The prediction only moves the point where the member starts to deny; a
// member alone on an id predicts nothing. It is on with the wall clock
// (Config.Clock unset): on an injected clock, time between rounds is the
// test's, not the network's.

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
	return wall
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
	others := max(count-p.hits, 0)
	if others < e.seen {
		return // an answer older than one already taken
	}
	e.seen, e.seenAt = others, at
	gap := l.lag.gap.Load()
	if since := at - gap/2 - e.window*p.key.period; gap > 0 && since >= gap {
		e.rate = float64(others) / float64(since)
	}
}

// unseen returns how many of the other members' hits e's count does not
// hold yet, by their rate: see above. owned says this member owns the
// key's partition (e.others is the owner's count of them, now). The
// shard's lock is held.
func (l *local) unseen(e *localEntry, owned bool, now, period int64) int64 {
	if !l.lag.on.Load() {
		return 0
	}
	gap := l.lag.gap.Load()
	if gap <= 0 {
		return 0
	}
	start := e.window * period
	var hidden int64
	if owned {
		hidden = gap/2 + l.lag.rttHalf.Load()
		if since := now - hidden - start; since >= gap {
			e.rate = float64(e.others) / float64(since)
		}
	} else {
		hidden = now - e.seenAt + gap/2
		if e.seenAt < start {
			hidden = now - start // nothing learnt of this window: all of it is unseen
		}
	}
	if e.rate <= 0 || hidden <= 0 {
		return 0
	}
	return int64(min(e.rate*float64(hidden), 1<<62))
}
