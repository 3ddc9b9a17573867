package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sync/semaphore"

	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// syncActor is the name of each member's actor that takes batched syncs.
const syncActor = "actorlimit-sync"

// syncLoop runs a sync every SyncEvery on the clock's ticker until Close,
// then one last one; with the wall clock in LocalFirst mode, it does not
// wait for a round's answers before the next (see pipeline.go).
func (m *Member) syncLoop() {
	defer close(m.syncDone)
	t := m.cfg.Clock.NewTicker(m.cfg.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			m.tick()
		case <-m.closed:
			m.pipe.wg.Wait() // the rounds in flight: their requests are bounded by the close
			if !m.killed() {
				m.SyncNow()
			}
			return
		}
	}
}

// killed reports whether Kill stopped the member.
func (m *Member) killed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.down
}

// SyncNow runs one sync round and returns when every owner has answered or
// failed. Each owner gets, in one request (one per member that owns
// partitions, or one per partition where the owner is not known), the
// totals of the keys counted since the last sync, and a probe of every
// other partition of which this member holds a copy of a current window;
// answers correct the member's copies, and the totals a failed request
// carried are sent again by the next round. A partition whose owner
// answers with a new incarnation (it moved, or restarted, and starts
// empty) gets, in the same round, the totals of every copy of a current
// window this member holds in it, so that the new owner rebuilds its
// counts. The partitions this member owns have its totals already: their
// owner's state reads its copies. Every
// Config.SweepEvery the round ends with a sweep. The sync loop calls it
// every SyncEvery; tests call it to sync at a moment of their choosing.
// Checks never wait for it.
func (m *Member) SyncNow() {
	if m.closed == nil {
		return // a zero Member has nothing to sync
	}
	if m.rejoining.Load() {
		return // no owner to reach: the syncs after the rejoin carry what is counted meanwhile
	}
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	now := m.cfg.Clock.Now().UnixNano()
	m.maintain(now)
	if m.cfg.Mode == LocalFirst {
		m.pipe.heavy.Lock()
		round, seq, work := m.prepareRound(now, true)
		m.finishRound(round, seq, work, now, true)
		m.pipe.backup.Lock()
		defer m.pipe.backup.Unlock()
		m.sendBackups(m.cfg.Clock.Now().UnixNano())
		return
	}
	// Owner mode: the charges of the checks decided on this member's share
	// go to their owners while the backups go to theirs.
	var wg sync.WaitGroup
	wg.Go(func() { m.sendCharges(now) })
	m.sendBackups(m.cfg.Clock.Now().UnixNano())
	wg.Wait()
}

// prepareRound takes a LocalFirst sync round at now (see SyncNow): what
// it sends to the owners, by partition, and the number of its exchange.
// The round that holds pipeline.heavy (heavy) carries all of it; the
// others carry the fixed windows' totals of the active copies only
// (pipeline.go).
// m.syncMu is held.
func (m *Member) prepareRound(now int64, heavy bool) (round, seq uint64, work partWorks) {
	m.counters.rounds.Add(1)
	m.round++
	m.local.lag.round(now, &m.fb.rtt, m.cfg.predicts())
	work = make(partWorks)
	for _, p := range m.local.takeActive(now, m.round, nil) {
		work.of(p.part).totals = append(work.of(p.part).totals, p)
	}
	// The partitions this member came to own since the last round (taken
	// over, handed to it): its copies' states there go whole to its own
	// owner's state, as any member's go to a new owner (rebuildIn).
	fresh := make(map[int]bool)
	for p := range m.parts {
		if op := m.parts[p].owned.Load(); op != nil && m.parts[p].known.Load() != op.inc {
			fresh[p] = true
		}
	}
	if heavy {
		var rebuilt []statePending
		if len(fresh) > 0 {
			rebuilt = m.states.rebuildIn(fresh, m.round, nil)
		}
		for _, sp := range m.states.takeActive(m.round, rebuilt) {
			work.of(sp.part).hits = append(work.of(sp.part).hits, sp)
		}
		m.resetMu.Lock()
		for p, rs := range m.resets {
			work.of(p).resets = rs[:len(rs):len(rs)]
		}
		m.resetMu.Unlock()
	}
	for p := range m.parts {
		ps := &m.parts[p]
		if op := ps.owned.Load(); op != nil {
			// The owner's state reads this member's copies as it answers:
			// it has every total this member holds. The other algorithms'
			// copies, made before the partition came here, are charged to
			// it directly. A partition handed on meanwhile is synced with
			// its new owner below. A round that does not carry them
			// leaves a fresh partition to the one that does.
			if heavy || !fresh[p] {
				ps.known.Store(op.inc)
			}
			handled := true
			if w := work[p]; w != nil {
				for _, pd := range w.totals {
					m.local.applied(pd, pd.window, pd.hits)
				}
				if len(w.hits) > 0 || len(w.resets) > 0 {
					if r := op.syncLive(m.node, m.part(p, w, false), now); r != nil {
						m.answered(p, w, r, now, m.pipe.seq.Add(1))
					} else {
						handled = false
					}
				}
			}
			if handled {
				delete(work, p)
				continue
			}
		}
		if _, ok := work[p]; !ok && heavy && (ps.until.Load() > now || ps.cut.Load()) {
			work[p] = &partWork{} // a probe, one round at a time: every partition with a copy has one
		}
	}
	if now >= m.nextSweep {
		m.sweep(now)
		m.nextSweep = now + int64(m.cfg.SweepEvery)
	}
	return m.round, m.pipe.seq.Add(1), work
}

// finishRound sends the work of round, taken by prepareRound at now with
// exchange number seq, and applies the answers; a partition whose owner
// changed gets, in the same round, the totals of every copy this member
// holds in it (and, under pipeline.heavy, its other keys' states). It
// releases pipeline.heavy if the round held it (heavy).
func (m *Member) finishRound(round, seq uint64, work partWorks, now int64, heavy bool) {
	if heavy {
		defer m.pipe.heavy.Unlock()
	}
	if changed := m.exchange(work, now, seq); len(changed) > 0 {
		if !heavy {
			m.pipe.heavy.Lock()
			defer m.pipe.heavy.Unlock()
		}
		m.counters.rebuilds.Add(uint64(len(changed)))
		again := make(partWorks, len(changed))
		for _, p := range m.local.copiesOf(changed, now, true, nil) {
			again.of(p.part).totals = append(again.of(p.part).totals, p)
		}
		for _, sp := range m.states.rebuildIn(changed, round, nil) {
			again.of(sp.part).hits = append(again.of(sp.part).hits, sp)
		}
		m.exchange(again, now, m.pipe.seq.Add(1)) // an owner that changes again waits for the next round
	}
	m.logRecovery()
}

// partWork is one partition's share of a sync round: the fixed windows'
// totals, the other keys' hits, and the resets the owner has yet to apply.
// An empty one is a probe: it asks the owner's incarnation.
type partWork struct {
	totals []pending
	hits   []statePending
	resets []queuedReset
}

// partWorks is a sync round's work, by partition.
type partWorks map[int]*partWork

// of returns partition p's work, adding it if there is none.
func (ws partWorks) of(p int) *partWork {
	w := ws[p]
	if w == nil {
		w = &partWork{}
		ws[p] = w
	}
	return w
}

// part returns w as partition p's part of a sync request; withTotals
// says whether it carries the fixed windows' totals. It names the last of
// the owner's resets of p the member has seen.
func (m *Member) part(p int, w *partWork, withTotals bool) *clusterpb.PartSync {
	part := &clusterpb.PartSync{Partition: uint32(p)}
	m.askResets(p, part)
	if withTotals {
		part.Totals = make([]*clusterpb.Total, len(w.totals))
		for i, pd := range w.totals {
			part.Totals[i] = &clusterpb.Total{Id: pd.key.id, PeriodNs: pd.key.period, Window: pd.window, Hits: pd.hits, Epoch: pd.epoch, Last: pd.last}
		}
	}
	for _, sp := range w.hits {
		part.Hits = append(part.Hits, sp.hits)
	}
	for _, r := range w.resets {
		c := r.check
		c.N = 1
		part.Resets = append(part.Resets, checkToWire(&c))
		part.ResetAt = append(part.ResetAt, r.at)
	}
	return part
}

// exchange sends work to the owners, batched by owner where the owner is
// known, and applies the answers, as those of exchange number seq. It
// returns the partitions whose owner is not the one that had this member's
// totals before.
func (m *Member) exchange(work partWorks, now int64, seq uint64) map[int]bool {
	if len(work) == 0 {
		return nil
	}
	var (
		mu      sync.Mutex
		replies = make(map[int]*clusterpb.PartReply, len(work))
		wg      sync.WaitGroup
	)
	record := func(p int, r *clusterpb.PartReply) {
		mu.Lock()
		replies[p] = r
		mu.Unlock()
	}
	// The requests to partitions' owners found one by one go at once, as
	// many as MaxMessageBytes of them in all: the engine may send those
	// to one member in one gRPC message.
	inFlight := semaphore.NewWeighted(MaxMessageBytes)
	one := func(p int) {
		req, _ := work[p].fit()
		n := int64(min(req, MaxMessageBytes))
		_ = inFlight.Acquire(context.Background(), n)
		defer inFlight.Release(n)
		record(p, m.syncPartition(p, work[p]))
	}
	work.fitAll()
	byOwner := make(map[string][]int)
	for p := range work {
		if addr := m.ownerAt(p); addr != "" && addr != m.node && m.sendTo != nil {
			byOwner[addr] = append(byOwner[addr], p)
		} else {
			wg.Go(func() { one(p) })
		}
	}
	for addr, ps := range byOwner {
		wg.Go(func() {
			for i, r := range m.syncMember(addr, ps, work) {
				if r != nil && r.GetAbsent() {
					// The member does not hold the partition (now): the
					// request goes to the owner it names, or to the one
					// the view names.
					wg.Go(func() { one(ps[i]) })
					continue
				}
				record(ps[i], r)
			}
		})
	}
	wg.Wait()
	var changed map[int]bool
	for p, r := range replies {
		if m.answered(p, work[p], r, now, seq) {
			if changed == nil {
				changed = make(map[int]bool)
			}
			changed[p] = true
		}
	}
	return changed
}

// answered applies partition p's answer r to w, the work sent by the
// exchange number seq (r nil: the request failed), and reports whether the
// owner is not the one that had this member's totals before. An answer
// that comes after a later exchange's (rounds in flight, pipeline.go)
// adds only its other keys' states and its resets' acknowledgement: the
// later one's counts, owner and resets are newer.
func (m *Member) answered(p int, w *partWork, r *clusterpb.PartReply, now int64, seq uint64) bool {
	st := &m.parts[p]
	if r == nil || r.GetAbsent() || len(r.GetCounts()) != len(w.totals) && st.owned.Load() == nil || len(r.GetStates()) != len(w.hits) {
		// The keys stay active with their hits unacknowledged, and the
		// resets kept: the next sync sends them again.
		if st.answered.Load() < seq {
			m.cutOff(p, nil)
		}
		return false
	}
	latest := st.advance(seq)
	changed := false
	fromKnown := r.GetIncarnation() == st.known.Load() // of a stale answer: from the owner the latest came from
	if latest {
		st.cut.Store(false)
		known := st.known.Swap(r.GetIncarnation())
		changed = known != 0 && known != r.GetIncarnation()
		// The resets first: the counts and states that follow reflect them.
		m.learnResets(p, r)
		for i, c := range r.GetCounts() {
			m.local.applied(w.totals[i], c.GetWindow(), c.GetCount())
			m.local.observed(w.totals[i], c.GetWindow(), c.GetCount(), now)
		}
	}
	for i, s := range r.GetStates() {
		// An owner that started empty has only the hits just sent: the
		// copy keeps its state, which goes to it whole (rebuildIn).
		m.states.applied(w.hits[i], s, now, !changed && (latest || fromKnown))
		st.holdUntil(s.GetDeath())
	}
	if len(w.resets) > 0 {
		m.resetMu.Lock()
		rs := m.resets[p]
		done := min(len(rs), len(w.resets))
		for i := range rs[:done] {
			m.resetBytes -= queuedCost(&rs[i].check)
		}
		if done == len(rs) {
			delete(m.resets, p)
		} else {
			m.resets[p] = slices.Clone(rs[done:]) // lets the sent ones go
		}
		m.resetMu.Unlock()
	}
	return changed
}

// cutOff marks partition p's owner unreachable: until a sync reaches it,
// its checks fall back to this member's share. The first partition cut off
// while none was is logged, at WARN, with why (err, which may be nil); the
// others are not, so an owner that dies with hundreds of partitions, and
// every round that fails after, make one line. logRecovery logs the end.
func (m *Member) cutOff(p int, err error) {
	if m.parts[p].cut.CompareAndSwap(false, true) && m.outage.CompareAndSwap(false, true) {
		m.counters.outages.Add(1)
		m.resetMu.Lock()
		m.resetsFullLogged = false
		m.resetMu.Unlock()
		m.cfg.Logger.Warn("actorlimit cluster: owner unreachable, its partitions' checks fall back to this member's share until it answers (logged once)",
			"partition", p, "error", err)
	}
}

// logRecovery logs, at INFO and once, that no partition is cut off any
// more, after cutOff logged that one was.
func (m *Member) logRecovery() {
	if !m.outage.Load() {
		return
	}
	for p := range m.parts {
		if m.parts[p].cut.Load() {
			return
		}
	}
	if m.outage.CompareAndSwap(true, false) {
		m.counters.recoveries.Add(1)
		m.cfg.Logger.Info("actorlimit cluster: every owner answers again")
	}
}

// ownerAt returns the address of partition p's owner, "" if unknown.
func (m *Member) ownerAt(p int) string {
	if m.ownerOf == nil {
		return ""
	}
	return m.ownerOf(p)
}

// syncPartition sends partition p's work w to its owner and returns its
// answer, nil if it failed.
func (m *Member) syncPartition(p int, w *partWork) *clusterpb.PartReply {
	req := &clusterpb.SyncRequest{Node: m.node, Parts: []*clusterpb.PartSync{m.part(p, w, true)}, KeyPrint: m.hash.print}
	m.counters.requests.Add(1)
	resp, err := m.send(p, req)
	reply, ok := resp.(*clusterpb.SyncReply)
	if err != nil || !ok || len(reply.GetParts()) != 1 {
		m.counters.failures.Add(1)
		m.cfg.Logger.Debug("actorlimit cluster: sync failed, will retry", "partition", p, "error", err)
		return nil
	}
	return reply.GetParts()[0]
}

// syncMember sends the work of partitions parts to the member at addr,
// which owns them, in requests of at most MaxMessageBytes, one after
// another, and returns its answer for each, nil where it failed; after a
// request that fails it sends no more.
func (m *Member) syncMember(addr string, parts []int, work partWorks) []*clusterpb.PartReply {
	out := make([]*clusterpb.PartReply, 0, len(parts))
	for _, batch := range work.batches(parts) {
		req := &clusterpb.SyncRequest{Node: m.node, Parts: make([]*clusterpb.PartSync, len(batch)), KeyPrint: m.hash.print}
		for i, p := range batch {
			req.Parts[i] = m.part(p, work[p], true)
		}
		m.counters.requests.Add(1)
		sent := time.Now()
		resp, err := m.sendTo(addr, req)
		reply, ok := resp.(*clusterpb.SyncReply)
		if err == nil && ok {
			m.fb.rtt.sample(addr, time.Since(sent))
		}
		if errors.Is(err, protoactor.ErrTimeout) {
			m.fb.rtt.timedOut(addr)
		}
		if err != nil || !ok || len(reply.GetParts()) != len(batch) {
			m.counters.failures.Add(1)
			m.cfg.Logger.Debug("actorlimit cluster: sync failed, will retry", "member", addr, "partitions", len(parts), "error", err)
			break
		}
		out = append(out, reply.GetParts()...)
	}
	return out[:len(parts)]
}

// requestMember is the default sendTo: a request to the sync actor of the
// member at addr.
func (m *Member) requestMember(addr string, msg *clusterpb.SyncRequest) (any, error) {
	pid := protoactor.NewPID(addr, syncActor)
	resp, err := m.engine().ActorSystem.Root.RequestFuture(pid, msg, m.bound(m.syncTimeout(addr))).Result()
	if err != nil {
		return nil, fmt.Errorf("cluster: member %s: %w", addr, err)
	}
	return resp, nil
}

// handleSync answers a batched sync as the owner of the partitions it
// names: those it does not hold (now) are refused, answered absent with
// the owner it knows.
//
// A request that fails the checks (see check.go) is rejected whole, and
// one from a member not in this member's view refused whole: both are
// answered with no parts, which the sender counts as a failure.
func (m *Member) handleSync(req *clusterpb.SyncRequest) *clusterpb.SyncReply {
	if !m.keyOK(req.GetNode(), req.GetKeyPrint()) {
		return &clusterpb.SyncReply{} // no part: the sender takes it for failed
	}
	if err := m.peerCheck().checkSync(req); err != nil {
		m.reject("sync", err)
		return &clusterpb.SyncReply{}
	}
	if !m.peerSync(req.GetNode()) {
		m.counters.refusals.Add(1)
		m.cfg.Logger.Debug("actorlimit cluster: refused a sync from a member not in the view", "member", req.GetNode())
		return &clusterpb.SyncReply{}
	}
	reply := &clusterpb.SyncReply{Parts: make([]*clusterpb.PartReply, len(req.GetParts()))}
	for i, ps := range req.GetParts() {
		var op *ownerPart
		if p := int(ps.GetPartition()); p < len(m.parts) && m.named() {
			op = m.parts[p].owned.Load()
		}
		var r *clusterpb.PartReply
		if op != nil && !m.leaving.Load() {
			r = op.syncLive(req.GetNode(), ps, m.cfg.Clock.Now().UnixNano())
		}
		if r == nil {
			m.counters.refusals.Add(1)
			r = &clusterpb.PartReply{Absent: true}
			if p := int(ps.GetPartition()); p < len(m.parts) {
				r.Owner = m.hint(p)
			}
		}
		reply.Parts[i] = r
	}
	return reply
}

// syncReceiver is each member's actor that takes the requests to the
// owner of partitions: checks, batched syncs, and partitions handed on. It
// never waits: the owners' states are behind short locks.
type syncReceiver struct{ m *Member }

// Receive answers a [clusterpb.SyncRequest], a [clusterpb.DecideRequest],
// a [clusterpb.HandOff] or a [clusterpb.QuotaRequest].
func (r syncReceiver) Receive(c protoactor.Context) {
	switch req := c.Message().(type) {
	case *clusterpb.SyncRequest:
		c.Respond(r.m.handleSync(req))
	case *clusterpb.DecideRequest:
		c.Respond(r.m.serveDecide(req))
	case *clusterpb.HandOff:
		c.Respond(r.m.handleHandOff(req))
	case *clusterpb.QuotaRequest:
		c.Respond(r.m.handleQuota(req))
	}
}
