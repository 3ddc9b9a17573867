package cluster

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/table"
)

// partState is what a member knows of one partition. Its fields are read
// by checks and written by the sync and by the ownership's changes,
// without a lock.
type partState struct {
	// owned is the owner's state of the partition when this member owns
	// it (holds its state), else nil.
	owned atomic.Pointer[ownerPart]
	// known is the incarnation of the owner's state that has every total
	// this member holds for the partition; 0 before the first answer.
	known atomic.Uint64
	// cut says that the last sync with the partition's owner failed: the
	// fallback applies until one succeeds.
	cut atomic.Bool
	// until is the latest end (Unix ns) of a window this member made a copy
	// of in the partition: until then the sync asks the owner, every
	// round, whether it is still the one that has the copies' totals.
	until atomic.Int64
	// resets is the last of the owner's resets of the partition that this
	// member has seen; nil before the first answer.
	resets atomic.Pointer[resetSeen]
	// answered numbers the latest sync exchange whose answer was applied
	// to the partition (pipeline.go).
	answered atomic.Uint64
}

// holdUntil records that the member holds a copy of a window that ends at
// end.
func (ps *partState) holdUntil(end int64) {
	for {
		u := ps.until.Load()
		if end <= u || ps.until.CompareAndSwap(u, end) {
			return
		}
	}
}

// ownerPart is the owner's state of one partition's LocalFirst windows:
// for each key, the total each other member counted in its current window,
// and their sum. The member that owns the partition holds it. The member it runs on
// (self) keeps its own hits in its copies, where its checks count them: the
// owner's count is the sum plus that copy's hits, read when the owner
// answers, so they are in it at once; a copy that member evicts puts its
// hits in the sum. It is safe for concurrent use.
type ownerPart struct {
	inc   uint64 // the incarnation: random, not 0, new each time the partition starts
	limit int    // the most keys it holds; 0: no bound
	self  *local // the copies of the member it runs on; nil for a test's owner

	// life is held for reading by every use of the state as the owner's,
	// and for writing by close: once gone, the member that held it no
	// longer owns the partition, and its state has been (or is being)
	// handed on: nothing may change it.
	life sync.RWMutex
	gone bool
	// dirty says the state changed since it was last taken for the
	// backup; unacked that the state last taken is not yet acknowledged
	// by the backup member (under way, or failed: then dirty again).
	dirty   atomic.Bool
	unacked atomic.Bool

	mu      sync.Mutex
	windows map[localKey]*ownerWindow
	// table holds the owner's state of the other algorithms' keys (and, in
	// Owner mode, of every key); charged, for each key and member, how many
	// of that member's copy's hits it has charged to the table.
	table   *table.Table
	scratch *table.Table
	charged map[stateKey]*chargedHits
	// gen counts the resets the owner applied; marks holds, for each key
	// reset lately, its latest reset (see reset.go).
	gen   uint64
	marks map[stateKey]resetMark
	// unsynced holds, for each key, the hits charged to it since the
	// partition started here, until recordUntil (Unix ns, on the member's
	// clock; 0: never), by member: when a member sends its copy's state
	// whole (the partition moved), the other members' hits are charged to
	// that state before the owner keeps the fuller (see rebuild).
	unsynced    map[stateKey][]nodeHits
	recordUntil int64
}

// nodeHits is, for one key, the hits of one member that the owner charged
// while it records them: n in all, the latest at at (Unix ns); of its copy
// epoch, the hits up to upTo. The owner's own, decided on its state, have
// node "".
type nodeHits struct {
	node        string
	epoch       uint64
	at, n, upTo int64
}

// maxUnsyncedNodes bounds the members whose hits are kept for one key;
// the hits of more are not kept.
const maxUnsyncedNodes = 64

// note records, for k, node's n hits of its copy epoch at at, its hits up
// to upTo in all, while the owner records them. o.mu is held.
func (o *ownerPart) note(k stateKey, node string, epoch uint64, at, n, upTo, now int64) {
	if now >= o.recordUntil || n <= 0 {
		return
	}
	ls, ok := o.unsynced[k]
	if !ok && o.limit > 0 && len(o.unsynced) >= o.limit {
		for victim := range o.unsynced { // any: a merge without them keeps the fuller
			delete(o.unsynced, victim)
			break
		}
	}
	for i := range ls {
		if x := &ls[i]; x.node == node {
			if epoch != x.epoch {
				x.epoch, x.upTo = epoch, 0
			}
			x.n, x.at, x.upTo = satAdd(x.n, n), max(x.at, at), max(x.upTo, upTo)
			return
		}
	}
	if len(ls) < maxUnsyncedNodes {
		o.unsynced[k] = append(ls, nodeHits{node: node, epoch: epoch, at: at, n: n, upTo: upTo})
	}
}

// chargedHits is, for one key, how many hits of each member's copy the
// owner has charged, until the key's state dies, or the bound evicts it
// (see evictCharged).
type chargedHits struct {
	death int64
	last  int64 // when (Unix ns) the owner last charged hits to it
	nodes map[string]nodeCharged
}

// nodeCharged is how many of the hits of a member's copy epoch the owner has
// charged.
type nodeCharged struct {
	epoch uint64
	done  int64
}

// ownerWindow is one key's current fixed window as the owner sees it: each
// member's total, and their sum.
type ownerWindow struct {
	window int64
	sum    int64
	nodes  map[string]nodeTotal
}

// nodeTotal is one member's part of a window: the hits of its current copy,
// and base, those of the copies it had before in the window (a copy it
// evicted, or lost when its process restarted).
type nodeTotal struct {
	epoch uint64
	base  int64
	hits  int64
}

func newOwnerPart(limit int) *ownerPart {
	return &ownerPart{inc: rand.Uint64() | 1, limit: limit, windows: make(map[localKey]*ownerWindow),
		table: table.New(limit), scratch: table.New(0), charged: make(map[stateKey]*chargedHits),
		marks: make(map[stateKey]resetMark), unsynced: make(map[stateKey][]nodeHits)}
}

// add records node's total hits for window of k, counted by its copy
// epoch, whose latest hit was at last, and returns the window the owner
// holds for k and its count. A total for an earlier window than the
// owner's counts nothing; nor does one whose hits all came before the
// key's latest reset (it is recorded as counted).
func (o *ownerPart) add(node string, k localKey, window int64, epoch uint64, hits, last int64) (int64, int64) {
	defer o.touch() // once the change is made (see touch)
	o.mu.Lock()
	defer o.mu.Unlock()
	before := last < o.resetAt(stateKey{alg: algo.FixedWindow, period: k.period, id: k.id})
	w := o.windows[k]
	switch {
	case w == nil:
		if o.limit > 0 && len(o.windows) >= o.limit {
			o.evict(window * k.period)
		}
		w = &ownerWindow{window: window, nodes: make(map[string]nodeTotal, 4)}
		o.windows[k] = w
	case w.window < window:
		*w = ownerWindow{window: window, nodes: make(map[string]nodeTotal, 4)}
	case w.window > window:
		return w.window, w.sum
	}
	t := w.nodes[node]
	switch {
	case epoch > t.epoch: // a new copy: the earlier ones' hits stay counted
		t = nodeTotal{epoch: epoch, base: satAdd(t.base, t.hits), hits: hits}
		if !before {
			w.sum = satAdd(w.sum, hits)
		}
	case epoch == t.epoch && hits > t.hits:
		if !before {
			w.sum = satAdd(w.sum, hits-t.hits)
		}
		t.hits = hits
	default: // sent again, or an older copy's: counted already
		return w.window, w.sum
	}
	w.nodes[node] = t
	return w.window, w.sum
}

// evict deletes one key, chosen among a few: one whose window ended before
// now if there is one, else the one with the fewest hits. o.mu is held.
func (o *ownerPart) evict(now int64) {
	if victim, ok := sampleVictim(o.windows, now, func(w *ownerWindow) (int64, int64) { return w.window, w.sum }); ok {
		delete(o.windows, victim)
	}
}

// count returns the owner's count of k in window, 0 if it holds another.
func (o *ownerPart) count(k localKey, window int64) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w := o.windows[k]; w != nil && w.window == window {
		return w.sum
	}
	return 0
}

// window returns the window the owner holds for k, or window if it holds
// none or an earlier one, and the owner's sum for it.
func (o *ownerPart) window(k localKey, window int64) (int64, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w := o.windows[k]; w != nil && w.window >= window {
		return w.window, w.sum
	}
	return window, 0
}

// sync applies node's part of a sync at now: its resets first, then its
// totals and its hits; it answers with the resets node has not seen yet,
// and the owner's counts and states, which reflect them.
func (o *ownerPart) sync(node string, ps *clusterpb.PartSync, now int64) *clusterpb.PartReply {
	defer o.touch() // once the changes are made (see touch)
	at := ps.GetResetAt()
	for i, w := range ps.GetResets() {
		if c, err := checkFromWire(w); err == nil {
			when := now
			if i < len(at) && at[i] > 0 {
				when = min(at[i], now)
			}
			o.reset(&c, when)
		}
	}
	totals := ps.GetTotals()
	reply := &clusterpb.PartReply{Incarnation: o.inc, Counts: make([]*clusterpb.Count, len(totals))}
	reply.Resets, reply.ResetGen = o.marksSince(ps.GetResetIncarnation(), ps.GetResetGen())
	for i, t := range totals {
		k := localKey{id: t.GetId(), period: t.GetPeriodNs()}
		if k.period <= 0 {
			reply.Counts[i] = &clusterpb.Count{}
			continue
		}
		var w, c int64
		switch {
		case o.self == nil:
			w, c = o.add(node, k, t.GetWindow(), t.GetEpoch(), t.GetHits(), t.GetLast())
		case o.self.isSelf(node):
			// The member's own totals: its copies, which the owner reads.
			w, c = o.window(k, t.GetWindow())
			c = o.self.ownerCount(o, k, w, c)
		default:
			w, c = o.add(node, k, t.GetWindow(), t.GetEpoch(), t.GetHits(), t.GetLast())
			c = o.self.ownerCount(o, k, w, c)
		}
		reply.Counts[i] = &clusterpb.Count{Window: w, Count: c}
	}
	if hits := ps.GetHits(); len(hits) > 0 {
		reply.States = make([]*clusterpb.State, len(hits))
		for i, h := range hits {
			reply.States[i] = o.charge(node, h, now)
		}
	}
	return reply
}

// charge charges to its state the hits of h, node's copy of one key, that
// it has not charged yet, each at its time (at most now), or keeps the
// fuller of its state and the copy's state that h carries; hits made
// before the key's latest reset, and a state from a copy that has not
// honoured it, are taken as charged and change nothing. It answers with
// how many of the copy's hits it has charged and its state. Hits of a key
// it cannot take (an invalid policy, times and counts that do not pair)
// are answered as charged, so that the member drops them.
func (o *ownerPart) charge(node string, h *clusterpb.Hits, now int64) *clusterpb.State {
	c, err := checkFromWire(h.GetCheck())
	at, ns := h.GetAt(), h.GetN()
	if err != nil || c.Algorithm == algo.FixedWindow || len(at) != len(ns) {
		done := h.GetBase()
		for _, n := range ns {
			done = satAdd(done, max(n, 0))
		}
		return &clusterpb.State{Done: done}
	}
	k := keyOf(&c)
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := o.charged[k]
	if ch == nil {
		if o.limit > 0 && len(o.charged) >= o.limit {
			o.evictCharged()
		}
		ch = &chargedHits{nodes: make(map[string]nodeCharged, 4)}
		o.charged[k] = ch
	}
	ch.last = now
	nc := ch.nodes[node]
	if h.GetEpoch() > nc.epoch {
		// A new copy: the hits before base were charged to an earlier
		// state of the owner, or come with the copy's state.
		nc = nodeCharged{epoch: h.GetEpoch(), done: h.GetBase()}
	}
	reset := o.resetAt(k)
	if len(h.GetState()) > 0 {
		// The copy's state, whole (the partition moved), and the hits it
		// holds that the earlier owner did not acknowledge.
		if h.GetResetAt() >= reset {
			o.rebuild(node, &c, h, nc, reset, now)
		}
		nc.done = max(nc.done, sumHits(h.GetBase(), ns))
		ch.nodes[node] = nc
	} else if h.GetEpoch() == nc.epoch {
		cum := h.GetBase()
		for i, n := range ns {
			if n <= 0 {
				continue
			}
			next := satAdd(cum, n)
			if next > nc.done {
				if at[i] >= reset {
					c.N = next - max(cum, nc.done)
					o.table.Charge(&c, min(at[i], now))
					o.note(k, node, nc.epoch, min(at[i], now), c.N, next, now)
				}
				nc.done = next
			}
			cum = next
		}
		ch.nodes[node] = nc
	}
	r := o.table.Record(&c)
	ch.death = max(ch.death, r.Death, now+int64(c.Period))
	return &clusterpb.State{Done: nc.done, State: r.State, Death: r.Death}
}

// evictCharged deletes the record of what the owner charged of one key,
// chosen among a few: the first whose state the table no longer holds
// (evicted, idlest first, or dead), else the one charged least lately; so
// that of a key the members hit, it goes only after those of idle keys, as
// in the table. Forgetting it costs little: a member's next hits of the key
// carry how many of its copy's hits came before them (Hits.base), and only
// a sync whose answer was lost is charged twice. o.mu is held.
func (o *ownerPart) evictCharged() {
	var (
		victim stateKey
		oldest int64
		seen   int
	)
	for k, ch := range o.charged {
		if _, ok := o.table.Get(k.table()); !ok {
			victim = k
			break
		}
		if seen == 0 || ch.last < oldest {
			victim, oldest = k, ch.last
		}
		if seen++; seen == evictSample {
			break
		}
	}
	delete(o.charged, victim)
}

// sumHits returns base plus the counts of ns that are positive.
func sumHits(base int64, ns []int64) int64 {
	for _, n := range ns {
		base = satAdd(base, max(n, 0))
	}
	return base
}

// rebuild takes node's copy of c's key, sent whole because the partition
// moved: h's state, which holds h's hits (those the partition's earlier
// owner had not acknowledged, from h's base on; nc is what this owner has
// charged of them, by h or by the sync before it). Those it has not
// charged are charged, and all are noted (unsynced). Of the owner's state
// and the copy's state with the other members' hits noted charged to it,
// it keeps the fuller (see merge): the fuller of the states the earlier
// owner last answered, plus every member's hits since. Hits before the
// key's latest reset (reset) are not charged. o.mu is held.
func (o *ownerPart) rebuild(node string, c *algo.Check, h *clusterpb.Hits, nc nodeCharged, reset, now int64) {
	k := keyOf(c)
	var kept int64 // how far the notes hold node's copy's hits
	for _, x := range o.unsynced[k] {
		if x.node == node && x.epoch == h.GetEpoch() {
			kept = x.upTo
		}
	}
	if h.GetEpoch() == nc.epoch {
		cum := h.GetBase()
		for i, n := range h.GetN() {
			if n <= 0 {
				continue
			}
			next := satAdd(cum, n)
			at := min(h.GetAt()[i], now)
			if at >= reset && next > nc.done {
				cc := *c
				cc.N = next - max(cum, nc.done)
				o.table.Charge(&cc, at)
			}
			if at >= reset && next > kept {
				o.note(k, node, h.GetEpoch(), at, next-max(cum, kept), next, now)
			}
			cum = next
		}
	}
	var others []nodeHits
	for _, x := range o.unsynced[k] {
		if x.node != node {
			others = append(others, x)
		}
	}
	o.mergeWith(c, h.GetState(), now, others)
}

// merge keeps the fuller of the owner's state of c's key and state, a
// member's copy of it: the one that holds more hits at now (for a bucket,
// the one that drains later). o.mu is held.
func (o *ownerPart) merge(c *algo.Check, state []byte, now int64) {
	o.mergeWith(c, state, now, nil)
}

// mergeWith is merge, with hits charged to state first. o.mu is held.
func (o *ownerPart) mergeWith(c *algo.Check, state []byte, now int64, hits []nodeHits) {
	theirs := algo.Record{Algorithm: c.Algorithm, Period: c.Period, ID: c.ID, Death: 1<<63 - 1, State: state}
	if o.scratch.Load(now, theirs) != nil {
		return
	}
	for _, x := range hits {
		cc := *c
		cc.N = x.n
		o.scratch.Charge(&cc, x.at)
	}
	t := o.scratch.Record(c)
	o.scratch.Delete(keyOf(c).table())
	if t.State == nil {
		return // dead already
	}
	mine := o.table.Record(c)
	fuller := mine.State == nil || t.Death > mine.Death
	if c.Algorithm.Windowed() && mine.State != nil {
		peek := *c
		peek.Op = algo.OpPeek
		o.scratch.Load(now, t)
		tc := o.scratch.Apply(&peek, now).Count
		o.scratch.Delete(keyOf(c).table())
		fuller = tc > o.table.Apply(&peek, now).Count
	}
	if fuller {
		_ = o.table.Load(now, t)
	}
}

// enter reports whether the state is still the owner's, and if so holds
// it so until leave.
func (o *ownerPart) enter() bool {
	o.life.RLock()
	if o.gone {
		o.life.RUnlock()
		return false
	}
	return true
}

// leave ends what enter began.
func (o *ownerPart) leave() { o.life.RUnlock() }

// close makes the state no longer the owner's, once the uses under way
// have ended, and reports whether it was (false: closed already).
func (o *ownerPart) close() bool {
	o.life.Lock()
	defer o.life.Unlock()
	was := !o.gone
	o.gone = true
	return was
}

// touch records that the state changed since it was last taken for the
// backup. It is called once the change is made (deferred), never before:
// a backup taken between a change marked and the change made would go
// without it and leave the state clean, its backup lacking the change
// until the next one.
func (o *ownerPart) touch() {
	if !o.dirty.Load() {
		o.dirty.Store(true)
	}
}

// takeBackup marks the state clean as a backup of it is about to be taken,
// and unacknowledged: before the state is read (and before the copies it
// reads are), so that a change made meanwhile is either in the backup or
// marks the state dirty again.
func (o *ownerPart) takeBackup() {
	o.unacked.Store(true)
	o.dirty.Store(false)
}

// backupDone records the backup member's answer to the backup last taken:
// taken, or not (the state is sent again).
func (o *ownerPart) backupDone(taken bool) {
	if taken {
		o.unacked.Store(false)
	} else {
		o.dirty.Store(true)
	}
}

// backupPending reports whether the backup member lacks some of the
// state: it changed since it was last taken, or the backup last taken is
// not acknowledged yet.
func (o *ownerPart) backupPending() bool { return o.dirty.Load() || o.unacked.Load() }

// applyLive is apply while the state is the owner's; it reports false once
// it is gone.
func (o *ownerPart) applyLive(c *algo.Check, now int64) (algo.Decision, bool) {
	if !o.enter() {
		return algo.Decision{}, false
	}
	defer o.leave()
	defer o.touch() // once the change is made (see touch)
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.table.Apply(c, now)
	if d.Allowed && c.Op == algo.OpHit {
		// The owner's own hit: noted, as the members' (see rebuild).
		o.note(keyOf(c), "", 0, now, c.N, 0, now)
	}
	return d, true
}

// syncLive is sync while the state is the owner's; it returns nil once it
// is gone.
func (o *ownerPart) syncLive(node string, ps *clusterpb.PartSync, now int64) *clusterpb.PartReply {
	if !o.enter() {
		return nil
	}
	defer o.leave()
	return o.sync(node, ps, now)
}

// decide decides checks at now on the owner's table, writing the i-th
// decision to out[i]; a reset is the owner's (see ownerPart.reset).
func (o *ownerPart) decide(now int64, checks []algo.Check, out []algo.Decision) {
	defer o.touch() // once the change is made (see touch)
	o.mu.Lock()
	var selfResets []int
	for i := range checks {
		if checks[i].Op == algo.OpReset {
			if o.resetKey(&checks[i], now) && o.self != nil && checks[i].Algorithm == algo.FixedWindow {
				selfResets = append(selfResets, i)
			}
			out[i] = algo.Decision{}
			continue
		}
		out[i] = o.table.Apply(&checks[i], now)
	}
	o.mu.Unlock()
	// The member's copies are reset after the owner's lock is let go: a
	// check holds a copy's lock while it reads the owner's count.
	for _, i := range selfResets {
		o.self.reset(&checks[i], now)
	}
}

// apply decides c, a hit or a peek, at now on the owner's table.
func (o *ownerPart) apply(c *algo.Check, now int64) algo.Decision {
	defer o.touch() // once the change is made (see touch)
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.table.Apply(c, now)
}

// records returns the owner's states of the other algorithms' keys, to be
// handed on when the partition leaves this member.
func (o *ownerPart) records(now int64) []algo.Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []algo.Record
	o.table.Snapshot(now, func(r algo.Record) bool {
		if r.Algorithm != algo.FixedWindow {
			r.State = append([]byte(nil), r.State...) // the walk reuses it
			out = append(out, r)
		}
		return true
	})
	return out
}

// sweep deletes the windows and states that ended before now and returns
// how many.
func (o *ownerPart) sweep(now int64) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, _ := o.table.Expire(now, 0)
	o.sweepMarks(now)
	for k, ch := range o.charged {
		if ch.death < now {
			delete(o.charged, k)
		}
	}
	for k := range o.unsynced {
		if _, ok := o.table.Get(k.table()); !ok || now >= o.recordUntil {
			delete(o.unsynced, k)
		}
	}
	for k, w := range o.windows {
		if algo.FloorDiv(now, k.period) > w.window {
			delete(o.windows, k)
			n++
		}
	}
	return n
}
