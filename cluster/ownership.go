package cluster

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// view is what a member takes for the live members, and each partition's
// owner and backup among them by rendezvous hashing: a partition's owner is
// the member of highest score for it, its backup the next, who becomes its
// owner if the owner leaves.
type view struct {
	members []string // sorted
	owners  []string // partition -> owner's address
	backups []string // partition -> backup's address, "" with one member
}

// newView ranks members for each partition, named by ids.
func newView(members []string, ids []string) *view {
	ms := slices.Compact(slices.Sorted(slices.Values(members)))
	v := &view{members: ms, owners: make([]string, len(ids)), backups: make([]string, len(ids))}
	for p, id := range ids {
		var best, second uint64
		bi, si := -1, -1
		for i, a := range ms {
			s := mix64(fnv1a(a + "/" + id))
			switch {
			case bi < 0 || s > best:
				second, si = best, bi
				best, bi = s, i
			case si < 0 || s > second:
				second, si = s, i
			}
		}
		if bi >= 0 {
			v.owners[p] = ms[bi]
		}
		if si >= 0 {
			v.backups[p] = ms[si]
		}
	}
	return v
}

// mix64 spreads the bits of h (FNV-1a mixes its last bytes little): the
// finalizer of SplitMix64.
func mix64(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

func (v *view) owner(p int) string  { return v.owners[p] }
func (v *view) backup(p int) string { return v.backups[p] }

// has reports whether addr is one of the members.
func (v *view) has(addr string) bool {
	_, ok := slices.BinarySearch(v.members, addr)
	return ok
}

// without returns the view of the same members less addr.
func (v *view) without(addr string, ids []string) *view {
	return newView(slices.DeleteFunc(slices.Clone(v.members), func(a string) bool { return a == addr }), ids)
}

// handing is a partition's state that its owner released, on its way to
// its next owner, to.
type handing struct {
	to    string
	state *clusterpb.PartState
}

// waiting is a partition that a member's view says it owns, whose state it
// waits for from its previous owner, from, still live, since (on the wall
// clock: a wait on the network, not a window).
type waiting struct {
	from  string
	since time.Time
}

// backupState is a partition's state that its owner, from, sent to this
// member, its backup.
type backupState struct {
	from  string
	state *clusterpb.PartState
}

// ownership is what a member knows of the partitions' owners beyond its
// own partState: its view of the members and the hand-offs under way.
type ownership struct {
	mu       sync.Mutex // held to change which partitions the member owns
	handing  map[int]*handing
	waiting  map[int]waiting
	backups  map[int]*backupState
	accepted map[int]string // partition -> the member that handed it here
	pushMu   sync.Mutex     // held by a push of hand-offs
	// assembling holds the states arriving in pieces (pieces.go); version
	// numbers this member's exports sent in pieces.
	assembling map[assemblyKey]*assembly
	version    atomic.Uint64
}

// setView makes addrs the members this member takes for live (itself
// among them): it logs the change, stops deciding at once for the
// partitions it owned that the new view gives to another member, hands
// their state on, and takes the partitions the view gives it: from their
// previous owner when it is live (it waits for its hand-off), else from
// its backup of them, if it has one.
func (m *Member) setView(addrs []string) {
	m.own.mu.Lock()
	nv := newView(addrs, m.ids)
	old := m.view.Load()
	if old != nil && slices.Equal(old.members, nv.members) {
		m.own.mu.Unlock()
		return
	}
	m.view.Store(nv)
	m.viewMu.Lock()
	if m.viewCh != nil {
		close(m.viewCh)
		m.viewCh = nil
	}
	m.viewMu.Unlock()
	m.live.Store(int64(max(1, len(nv.members))))
	var before []string
	if old != nil {
		before = old.members
	}
	m.cfg.Logger.Info("actorlimit cluster: members changed", "member", m.node, "before", before, "after", nv.members)
	clear(m.own.accepted)
	if !m.leaving.Load() {
		now := m.cfg.Clock.Now().UnixNano()
		for p := range m.parts {
			m.reassign(p, old, nv, now)
		}
		// A backup this member no longer is would be stale by the time it
		// is used: its owner sends the next one to the new backup.
		for p := range m.own.backups {
			if nv.backup(p) != m.node {
				delete(m.own.backups, p)
			}
		}
	}
	m.own.mu.Unlock()
	go m.settle()
}

// settle pushes the hand-offs, and asks the other members about the
// partitions this member waits for, until none is left, pausing longer
// after each attempt (at most settlePause), or until the member closes.
func (m *Member) settle() {
	for pause := time.Millisecond; ; pause = min(2*pause, settlePause) {
		pushing := m.pushHandOffs()
		if !m.askWaiting() && !pushing {
			return
		}
		select {
		case <-m.closed:
			return
		case <-time.After(pause):
		}
	}
}

// reassign brings partition p in line with the view nv, old the one
// before (nil: none). m.own.mu is held.
func (m *Member) reassign(p int, old, nv *view, now int64) {
	owner := nv.owner(p)
	ps := &m.parts[p]
	if op := ps.owned.Load(); op != nil {
		if owner != m.node && m.own.accepted[p] != owner {
			m.releaseTo(p, op, owner, now)
		} else {
			op.dirty.Store(true) // the backup may have changed: it gets the whole state
		}
		return
	}
	if owner != m.node {
		delete(m.own.waiting, p)
		return
	}
	if h := m.own.handing[p]; h != nil {
		delete(m.own.handing, p)
		m.install(p, h.state, now)
		return
	}
	if _, ok := m.own.waiting[p]; ok {
		return
	}
	var prev string
	if old != nil {
		prev = old.owner(p)
	} else {
		prev = nv.without(m.node, m.ids).owner(p)
	}
	if prev != "" && prev != m.node && nv.has(prev) || !m.ready.Load() {
		// Before Start returns, a view may not list every member yet: the
		// partitions that no member in it holds are taken over only once
		// the member has started, if none holds them then (askWaiting).
		m.own.waiting[p] = waiting{from: prev, since: time.Now()}
		return
	}
	m.takeOver(p, now)
}

// takeOver makes this member the owner of partition p, whose owner left
// without handing it on (or that had none): from its backup of p if it has
// one, else empty (the members' syncs rebuild a LocalFirst partition that
// starts empty). m.own.mu is held.
func (m *Member) takeOver(p int, now int64) {
	var st *clusterpb.PartState
	if b := m.own.backups[p]; b != nil {
		st = b.state
		m.counters.takeOvers.Add(1)
	}
	m.cfg.Logger.Debug("actorlimit cluster: taking a partition over", "partition", p, "backup", st != nil)
	m.install(p, st, now)
}

// install makes this member the owner of partition p, with st (nil:
// empty), under a new incarnation: the members send it what they hold
// there again. m.own.mu is held.
func (m *Member) install(p int, st *clusterpb.PartState, now int64) {
	op := newOwnerPart(m.cfg.partEntries())
	op.self = m.local
	// The members send it their copies' states whole once they see the
	// new incarnation: within a few syncs once their views agree.
	op.recordUntil = satAdd(now, int64(2*m.cfg.DeadAfter+4*m.cfg.SyncEvery))
	if st != nil {
		op.load(st, now, m.node, m.local.copyEpoch)
	}
	op.dirty.Store(true)
	delete(m.own.waiting, p)
	delete(m.own.backups, p)
	delete(m.own.assembling, assemblyKey{part: p})
	delete(m.own.assembling, assemblyKey{part: p, backup: true})
	m.parts[p].owned.Store(op)
}

// releaseTo stops this member deciding for partition p, whose owner's
// state op is, at once, and keeps that state for to, its next owner, to
// which pushHandOffs sends it. The member's copies of the partition's keys
// are synced to the next owner from now on. m.own.mu is held.
func (m *Member) releaseTo(p int, op *ownerPart, to string, now int64) {
	ps := &m.parts[p]
	if !ps.owned.CompareAndSwap(op, nil) {
		return
	}
	op.close()
	copies := m.local.copiesOf(map[int]bool{p: true}, now, true, nil)
	m.own.handing[p] = &handing{to: to, state: op.export(p, now, m.node, copies)}
	if m.cfg.Mode == LocalFirst {
		m.states.adopt(p, op.records(now), now)
		ps.holdUntil(now + int64(m.cfg.SyncEvery))
	}
}

// pushHandOffs sends the states of the partitions this member released to
// their next owners, in one request per member, and forgets those taken.
// One whose next owner left goes to the partition's owner in the view now
// (or is taken back, when that is this member). A push waits up to
// RequestTimeout for its answer: the first request to a member that just
// joined waits for the connection to it. What fails is sent again. It reports whether some are left.
func (m *Member) pushHandOffs() bool {
	if m.engine() == nil {
		return false
	}
	m.own.pushMu.Lock()
	defer m.own.pushMu.Unlock()
	m.own.mu.Lock()
	v := m.view.Load()
	byTo := make(map[string][]*clusterpb.PartState)
	sent := make(map[int]*handing)
	now := m.cfg.Clock.Now().UnixNano()
	for p, h := range m.own.handing {
		if v != nil && !v.has(h.to) && !m.leaving.Load() {
			h.to = v.owner(p)
		}
		if h.to == m.node {
			delete(m.own.handing, p)
			m.install(p, h.state, now)
			continue
		}
		if h.to == "" {
			continue
		}
		sent[p] = h
	}
	// The requests the member remembers of each partition go with it, as
	// they are when it is sent: it decides nothing there since it released
	// it.
	parts := make(map[int]bool, len(sent))
	for p := range sent {
		parts[p] = true
	}
	mem := m.fb.mem.export(parts, now)
	for p, h := range sent {
		h.state.Remembered = mem[p]
		byTo[h.to] = append(byTo[h.to], h.state)
	}
	m.own.mu.Unlock()
	var wg sync.WaitGroup
	for to, parts := range byTo {
		wg.Go(func() {
			taken, err := m.sendStates(to, parts, func(ps []*clusterpb.PartState) *clusterpb.HandOff {
				return &clusterpb.HandOff{Parts: ps}
			}, m.bound(m.cfg.RequestTimeout))
			if err != nil {
				m.cfg.Logger.Debug("actorlimit cluster: hand-off failed, will retry", "member", to, "partitions", len(parts), "error", err)
			}
			m.own.mu.Lock()
			for _, p := range taken {
				if h := m.own.handing[int(p)]; h != nil && h == sent[int(p)] {
					delete(m.own.handing, int(p))
				}
			}
			m.own.mu.Unlock()
		})
	}
	wg.Wait()
	m.own.mu.Lock()
	defer m.own.mu.Unlock()
	return len(m.own.handing) > 0
}

// askWaiting asks every other member which of the partitions this member
// waits for it holds; one that none holds (when all answered) is taken
// over (from this member's backup of it, or empty), once Start has
// returned: at the cluster's start, or when its owner left without
// handing it on. It reports whether
// the member still waits for some.
func (m *Member) askWaiting() bool {
	v := m.view.Load()
	if v == nil || m.engine() == nil {
		return false
	}
	m.own.mu.Lock()
	var ask []*clusterpb.PartState
	for p := range m.own.waiting {
		ask = append(ask, &clusterpb.PartState{Partition: uint32(p)})
	}
	m.own.mu.Unlock()
	if len(ask) == 0 {
		return false
	}
	var (
		mu     sync.Mutex
		held   = make(map[int]bool)
		failed bool
		wg     sync.WaitGroup
	)
	for _, to := range v.members {
		if to == m.node {
			continue
		}
		wg.Go(func() {
			resp, err := m.engine().ActorSystem.Root.RequestFuture(protoactor.NewPID(to, syncActor),
				&clusterpb.HandOff{From: m.node, Parts: ask, Ask: true, KeyPrint: m.hash.print}, m.bound(m.syncTimeout(to))).Result()
			if errors.Is(err, protoactor.ErrTimeout) {
				m.fb.rtt.timedOut(to) // the next ask waits longer: the member may be a region away
			}
			reply, ok := resp.(*clusterpb.HandOffReply)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || !ok {
				failed = true
				return
			}
			for _, p := range reply.GetHeld() {
				held[int(p)] = true
			}
		})
	}
	wg.Wait()
	m.own.mu.Lock()
	defer m.own.mu.Unlock()
	// Before Start returns, the asks only open the connections to the
	// other members (the answers to the first requests they send here
	// take them): nothing is taken over yet.
	if !failed && m.view.Load() == v && m.ready.Load() {
		now := m.cfg.Clock.Now().UnixNano()
		for _, st := range ask {
			p := int(st.GetPartition())
			if _, ok := m.own.waiting[p]; ok && !held[p] {
				m.takeOver(p, now)
			}
		}
	}
	return len(m.own.waiting) > 0
}

// settlePause is the longest pause between two attempts to hand
// partitions on: short, since requests to them wait meanwhile.
const settlePause = 20 * time.Millisecond

// handleHandOff takes partitions' states from another member: as their
// owner from now on, or, for a backup, keeps them for when their owner
// dies. A member that is leaving takes none.
//
// A hand-off that fails the checks (see check.go) is rejected whole. Each
// partition is then taken as the member's view allows (handOffPart,
// backupFrom); one refused is left out of the answer, and its sender sends
// it again.
func (m *Member) handleHandOff(h *clusterpb.HandOff) *clusterpb.HandOffReply {
	reply := &clusterpb.HandOffReply{}
	if !m.keyOK(h.GetFrom(), h.GetKeyPrint()) {
		return reply
	}
	if err := m.peerCheck().checkHandOff(h); err != nil {
		m.reject("hand-off", err)
		return reply
	}
	m.own.mu.Lock()
	defer m.own.mu.Unlock()
	now := m.cfg.Clock.Now().UnixNano()
	v := m.view.Load()
	var without *view
	withoutFrom := func() *view {
		if without == nil {
			without = v.without(h.GetFrom(), m.ids)
		}
		return without
	}
	for _, st := range h.GetParts() {
		p := int(st.GetPartition())
		if h.GetAsk() {
			if m.parts[p].owned.Load() != nil || m.own.handing[p] != nil {
				reply.Held = append(reply.Held, uint32(p))
			}
			continue
		}
		// Each piece is checked against the view before it is kept, so
		// that a sender the view gives no part cannot fill the assembly.
		if h.GetBackup() {
			if !m.backupFrom(h.GetFrom(), p, v) {
				m.counters.refusals.Add(1)
				continue
			}
			if st = m.assemble(h.GetFrom(), st, true); st == nil {
				continue // a piece: the state is taken with its last one
			}
			if m.parts[p].owned.Load() == nil {
				m.own.backups[p] = &backupState{from: h.GetFrom(), state: st}
			}
			reply.Taken = append(reply.Taken, uint32(p))
			continue
		}
		if m.leaving.Load() || !m.named() {
			continue
		}
		take := m.handOffPart(h.GetFrom(), p, v, withoutFrom)
		if take == refuseHandOff {
			m.counters.refusals.Add(1)
			continue
		}
		if st = m.assemble(h.GetFrom(), st, false); st == nil {
			continue // a piece: the state is taken with its last one
		}
		if take == keepHandOff {
			// Its owner is leaving, ahead of this member's view: the state
			// is kept as the backup, taken over when the view drops the
			// owner (reassign), so that the partition never has two owners.
			if m.parts[p].owned.Load() == nil {
				m.own.backups[p] = &backupState{from: h.GetFrom(), state: st}
			}
			// Remembered now: only the owner of the partition reads them.
			m.fb.mem.load(uint32(p), st.GetRemembered(), now)
			reply.Taken = append(reply.Taken, uint32(p))
			continue
		}
		if op := m.parts[p].owned.Load(); op != nil {
			op.load(st, now, m.node, m.local.copyEpoch) // sent again: kept once
		} else {
			m.install(p, st, now)
			m.counters.handOffs.Add(1)
		}
		m.fb.mem.load(uint32(p), st.GetRemembered(), now)
		m.own.accepted[p] = h.GetFrom()
		reply.Taken = append(reply.Taken, uint32(p))
	}
	return reply
}

// maintain is the sync's care of the ownership: a partition this member
// owns that its view gives to another member is handed on (a hand-off it
// took ahead of its view is kept until the view changes); one it has
// waited longer than DeadAfter for is taken over; the hand-offs not yet
// taken are sent again.
func (m *Member) maintain(now int64) {
	v := m.view.Load()
	if v == nil || m.leaving.Load() {
		return
	}
	m.own.mu.Lock()
	for p := range m.parts {
		if op := m.parts[p].owned.Load(); op != nil {
			if o := v.owner(p); o != m.node && m.own.accepted[p] != o {
				m.releaseTo(p, op, o, now)
			}
		}
	}
	for p, w := range m.own.waiting {
		if time.Since(w.since) > m.cfg.DeadAfter {
			m.cfg.Logger.Warn("actorlimit cluster: no hand-off from a partition's previous owner, taking it over", "partition", p, "from", w.from)
			m.takeOver(p, now)
		}
	}
	pending := len(m.own.handing) > 0 || len(m.own.waiting) > 0
	m.own.mu.Unlock()
	if pending {
		go m.settle()
	}
}

// sendBackups sends the state of every partition this member owns that
// changed since it was last taken for the backup to the partition's backup
// member, in one request per member; what fails is sent again by the next
// sync. Each partition is marked clean before its copies are read and its
// state taken: a change made meanwhile is either in the backup or marks it
// dirty again (see ownerPart.touch). Until the backup member acknowledges
// it, the state is not backed up (ownerPart.backupPending).
func (m *Member) sendBackups(now int64) {
	v := m.view.Load()
	if v == nil || m.engine() == nil {
		return
	}
	ops := make(map[int]*ownerPart)
	dirty := make(map[int]bool)
	for p := range m.parts {
		if op := m.parts[p].owned.Load(); op != nil && op.dirty.Load() && v.backup(p) != "" && v.backup(p) != m.node {
			op.takeBackup()
			ops[p], dirty[p] = op, true
		}
	}
	if len(dirty) == 0 {
		return
	}
	copies := make(map[int][]pending)
	for _, c := range m.local.copiesOf(dirty, now, false, nil) {
		copies[c.part] = append(copies[c.part], c)
	}
	byBackup := make(map[string][]*clusterpb.PartState)
	for p, op := range ops {
		if !op.enter() {
			delete(ops, p)
			continue
		}
		st := op.export(p, now, m.node, copies[p])
		op.leave()
		byBackup[v.backup(p)] = append(byBackup[v.backup(p)], st)
	}
	var wg sync.WaitGroup
	for to, parts := range byBackup {
		wg.Go(func() {
			taken, err := m.sendStates(to, parts, func(ps []*clusterpb.PartState) *clusterpb.HandOff {
				return &clusterpb.HandOff{Parts: ps, Backup: true}
			}, m.bound(m.syncTimeout(to)))
			if err != nil {
				m.cfg.Logger.Debug("actorlimit cluster: backup failed, will retry", "member", to, "partitions", len(parts), "error", err)
			}
			done := make(map[int]bool, len(taken))
			for _, p := range taken {
				done[int(p)] = true
			}
			for _, st := range parts {
				p := int(st.GetPartition())
				ops[p].backupDone(done[p])
			}
			m.counters.backups.Add(uint64(len(done)))
		})
	}
	wg.Wait()
}

// handOffAll hands every partition this member owns to its owner in the
// view without this member, before it leaves; it returns once they are
// taken or the pushes failed.
func (m *Member) handOffAll() {
	m.own.mu.Lock()
	m.leaving.Store(true)
	v := m.view.Load()
	if v == nil {
		m.own.mu.Unlock()
		return
	}
	next := v.without(m.node, m.ids)
	now := m.cfg.Clock.Now().UnixNano()
	for p := range m.parts {
		if op := m.parts[p].owned.Load(); op != nil {
			m.releaseTo(p, op, next.owner(p), now)
		}
	}
	m.own.mu.Unlock()
	m.pushHandOffs()
}

// route returns the address to send partition p's requests to: this
// member's when it owns p; else the owner in its view, or, while the view
// gives p to this member, the member it waits for p from, or hands p to.
func (m *Member) route(p int) string {
	if m.parts[p].owned.Load() != nil && !m.leaving.Load() {
		return m.node
	}
	v := m.view.Load()
	if v == nil {
		return ""
	}
	if o := v.owner(p); o != m.node {
		return o
	}
	return m.hint(p)
}

// hint is who this member, which does not own partition p, takes for its
// owner: the member it handed p to, or waits for p from, or p's owner in
// its view; "" if none.
func (m *Member) hint(p int) string {
	m.own.mu.Lock()
	defer m.own.mu.Unlock()
	if h := m.own.handing[p]; h != nil {
		return h.to
	}
	if w, ok := m.own.waiting[p]; ok {
		return w.from
	}
	if v := m.view.Load(); v != nil && v.owner(p) != m.node {
		return v.owner(p)
	}
	return ""
}

// serveDecide answers a DecideRequest as the owner of its partition, or
// refuses it, naming the owner it knows, when this member does not own the
// partition (now).
func (m *Member) serveDecide(req *clusterpb.DecideRequest) *clusterpb.DecideReply {
	if !m.keyOK("", req.GetKeyPrint()) {
		return &clusterpb.DecideReply{Error: "the partition key differs: give every member the same Config.PartitionKey"}
	}
	checks, err := m.peerCheck().checkDecide(req)
	if err != nil {
		m.reject("decide", err)
		return &clusterpb.DecideReply{Error: err.Error()}
	}
	p := int(req.GetPartition())
	if !m.named() {
		m.counters.refusals.Add(1)
		return &clusterpb.DecideReply{Refused: true}
	}
	op := m.parts[p].owned.Load()
	var reply *clusterpb.DecideReply
	if op != nil && !m.leaving.Load() {
		reply = op.answer(req, checks, m.cfg.Clock.Now().UnixNano(), m.fb.mem, &m.counters.deduped, true)
	}
	if reply == nil {
		m.counters.refusals.Add(1)
		return &clusterpb.DecideReply{Refused: true, Owner: m.hint(p), Moving: m.moving(p)}
	}
	return reply
}

// serve answers a request to a partition's owner made on this member.
func (m *Member) serve(msg any) any {
	switch r := msg.(type) {
	case *clusterpb.DecideRequest:
		return m.serveDecide(r)
	case *clusterpb.SyncRequest:
		return m.handleSync(r)
	}
	return nil
}

// refusal reports whether resp refuses a request to a partition's owner,
// and whom the refusing member takes for the owner.
func refusal(resp any) (string, bool) {
	switch r := resp.(type) {
	case *clusterpb.DecideReply:
		return r.GetOwner(), r.GetRefused()
	case *clusterpb.SyncReply:
		if len(r.GetParts()) == 1 && r.GetParts()[0].GetAbsent() {
			return r.GetParts()[0].GetOwner(), true
		}
	}
	return "", false
}

// errNoOwner is a request's error when no member owns its partition.
var errNoOwner = errors.New("no owner known")

// errLeft is a request's error when the member it was sent to left the
// view before it answered.
var errLeft = errors.New("the member asked left")

// ask sends msg to the member at addr and waits for its answer until
// deadline, or until addr leaves this member's view: a member that died
// answers nothing, and its partitions have new owners then.
func (m *Member) ask(addr string, msg any, deadline time.Time) (any, error) {
	changed := m.viewChanged()
	if v := m.view.Load(); v != nil && !v.has(addr) {
		return nil, errLeft
	}
	f := m.engine().ActorSystem.Root.RequestFuture(protoactor.NewPID(addr, syncActor), msg, time.Until(deadline))
	var (
		resp any
		err  error
		done = make(chan struct{})
	)
	go func() {
		resp, err = f.Result()
		close(done)
	}()
	for {
		select {
		case <-done:
			return resp, err
		case <-changed:
			if v := m.view.Load(); v != nil && !v.has(addr) {
				return nil, errLeft
			}
			changed = m.viewChanged()
		}
	}
}

// viewChanged returns a channel closed when the view changes next.
func (m *Member) viewChanged() <-chan struct{} {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	if m.viewCh == nil {
		m.viewCh = make(chan struct{})
	}
	return m.viewCh
}

// request is the default send: a request to partition p's owner. A member
// that does not own p refuses it, naming the owner it knows, and the
// request goes there, or, after a pause, to the owner the view names then;
// so does a request that found its member gone. It gives up after
// RequestTimeout (a sync's request: the sync timeout).
func (m *Member) request(p int, msg any) (any, error) {
	timeout := m.cfg.RequestTimeout
	if _, ok := msg.(*clusterpb.SyncRequest); ok {
		timeout = m.syncTimeout(m.route(p))
	}
	d, decide := msg.(*clusterpb.DecideRequest)
	if decide && len(d.GetCharges()) > 0 {
		timeout = m.syncTimeout(m.route(p)) // sent again by the next sync
	}
	if decide && d.GetPartition() != uint32(p) {
		d.Partition = uint32(p)
	}
	timeout = m.bound(timeout)
	deadline := time.Now().Add(timeout)
	var hint string
	for try := 0; ; try++ {
		addr := hint
		if addr == "" {
			addr = m.route(p)
		}
		hint = ""
		var (
			resp any
			err  error
		)
		switch addr {
		case "":
			err = errNoOwner
		case m.node:
			resp = m.serve(msg)
		default:
			resp, err = m.ask(addr, msg, deadline)
		}
		if err == nil {
			h, refused := refusal(resp)
			if refused && decide {
				m.noteMoving(d, resp)
			}
			if !refused {
				if resp == nil {
					return nil, fmt.Errorf("cluster: partition %d: no answer", p)
				}
				return resp, nil
			}
			hint, err = h, fmt.Errorf("refused by %s", addr)
		} else if !errors.Is(err, protoactor.ErrDeadLetter) && !errors.Is(err, remote.ErrDeadLetter) && err != errNoOwner && err != errLeft {
			return nil, fmt.Errorf("cluster: partition %d: %w", p, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("cluster: partition %d: %w", p, err)
		}
		if hint == "" || hint == addr || try >= 2 {
			time.Sleep(min(left, time.Millisecond<<min(try, 5)))
		}
	}
}
