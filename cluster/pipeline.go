package cluster

import (
	"sync"
	"sync/atomic"
)

// LocalFirst across regions: the sync loop does not wait a round trip
// between rounds. A round that waited for its answers before the next
// began (and for the backups after it) started every two round trips at
// 150 ms, whatever SyncEvery said, so the others' hits a copy held were a
// third of a second old, and the prediction (predict.go) measured their
// rate on three or four counts a window. So, with the wall clock, each
// tick of the loop sends its round and goes on: up to maxRoundsInFlight
// rounds are in flight, the backups go beside them (one send at a time).
//
// What makes this safe: a fixed window's total is the copy's whole count
// (its epoch and hits), which the owner takes at most once (ownerPart.add
// keeps the larger), so two rounds in flight carry the same hits without
// counting them twice; the owner answers one member's requests in the
// order they were sent (one stream, one actor), and a member applies an
// answer's counts only when no later round's answer to that partition was
// applied before it (partState.answered), so an answer that its goroutine
// applied late does not take a copy back. The rest of a round's work
// (the other algorithms' hits, the resets kept for an owner, the states
// sent whole to a new owner) goes, as before, with one round at a time:
// the round that holds pipeline.heavy; so do the probes (a partition
// with a copy of a current window is asked, each round, whether its owner
// is still the one that has the copies' totals: with 2 000 cold ids,
// nearly every partition, and the rounds in flight asking that 20 or 50
// times a second took the machine's CPU, at SyncEvery 20 ms, until no
// answer came in time). The others carry the active copies' fixed
// windows' totals.

// maxRoundsInFlight bounds the rounds a member's sync loop has sent and not
// yet had answered: a round trip's worth of SyncEvery, up to 150 ms at the
// default, and more for a slow answer.
const maxRoundsInFlight = 8

// pipeline is what a member's sync loop knows of its rounds in flight.
type pipeline struct {
	// heavy is held by the round that carries the work other than the
	// fixed windows' totals (see above), until its answers are applied.
	heavy sync.Mutex
	// backup is held while the backups are sent.
	backup   sync.Mutex
	inFlight atomic.Int32
	// seq numbers the rounds' exchanges, in the order they are sent.
	seq atomic.Uint64
	wg  sync.WaitGroup // the loop's rounds and backups in flight
}

// pipelines reports whether the sync loop sends a round without waiting
// for the previous one's answers: LocalFirst, on the wall clock (on an
// injected clock the tests step the rounds one by one).
func (c Config) pipelines() bool {
	_, wall := c.Clock.(wallClock)
	return wall && c.Mode == LocalFirst
}

// advance records that the answer to the exchange seq was applied to the
// partition, and reports whether it is the latest applied: false when a
// later exchange's answer came first (its counts are newer).
func (ps *partState) advance(seq uint64) bool {
	for {
		cur := ps.answered.Load()
		if seq <= cur {
			return false
		}
		if ps.answered.CompareAndSwap(cur, seq) {
			return true
		}
	}
}

// tick is one tick of the sync loop: a round (see SyncNow), sent without
// waiting for its answers where the rounds are pipelined; a tick that
// finds maxRoundsInFlight rounds in flight sends none, nor one that finds
// a round in flight while a partition's owner does not answer (cutOff).
func (m *Member) tick() {
	if !m.cfg.pipelines() {
		m.SyncNow()
		return
	}
	if n := m.pipe.inFlight.Load(); n >= maxRoundsInFlight || n > 0 && m.outage.Load() {
		// While an owner does not answer, one round at a time: its
		// partitions' probes go in every round, and rounds piling up on
		// a machine too slow to answer them in time would keep it so.
		return
	}
	m.syncMu.Lock()
	now := m.cfg.Clock.Now().UnixNano()
	m.maintain(now)
	heavy := m.pipe.heavy.TryLock()
	round, seq, work := m.prepareRound(now, heavy)
	m.syncMu.Unlock()
	m.pipe.inFlight.Add(1)
	m.pipe.wg.Go(func() {
		defer m.pipe.inFlight.Add(-1)
		m.finishRound(round, seq, work, now, heavy)
	})
	if m.pipe.backup.TryLock() {
		m.pipe.wg.Go(func() {
			defer m.pipe.backup.Unlock()
			m.sendBackups(m.cfg.Clock.Now().UnixNano())
		})
	}
}
