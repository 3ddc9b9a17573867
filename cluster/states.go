package cluster

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/table"
)

// The LocalFirst copies of the algorithms other than FixedWindow
// (SlidingWindow, SlidingLog, GCRA, TokenBucket, LeakyBucket). Their state
// is not a count that members can add up, so a member's copy is the
// owner's state itself, as the owner last answered, with the hits this
// member allowed since charged to it. Each sync sends the owner those hits,
// with their times; the owner charges them to its state, allowed or not by
// its own count (they happened: a bucket goes into debt, and allows nothing
// until it has drained), and answers with its state, which becomes the
// copy, with the hits allowed since the sync left charged again.

// stateShards is how many locks the state copies are spread over.
const stateShards = 32

// maxHitsKept bounds the hits a copy keeps for its next sync: beyond it,
// and within one millisecond always, a hit is added to the one before.
const maxHitsKept = 4096

// stateKey is a key of an algorithm other than FixedWindow.
type stateKey struct {
	alg    algo.Algorithm
	period int64
	id     string
}

func keyOf(c *algo.Check) stateKey {
	return stateKey{alg: c.Algorithm, period: int64(c.Period), id: c.ID}
}

func (k stateKey) table() table.Key {
	return table.Key{Kind: uint8(k.alg), Scale: k.period, ID: k.id}
}

// hit is n hits allowed at (Unix ns).
type hit struct{ at, n int64 }

// stateCopy is what a member keeps, beside the copy's state in its shard's
// table, of one key: the hits the owner has not counted yet.
type stateCopy struct {
	policy algo.Check // the key, and the policy of its last hit
	epoch  uint64     // names the copy to the owner, as a localEntry's
	total  int64      // the hits this copy allowed, in all
	acked  int64      // of those, how many the owner has charged
	hits   []hit      // the others, total-acked in all, oldest first
	taken  uint64     // the last sync round that took the key from the active list
	part   int32
	idle   int32 // syncs with nothing new to send since the last hit
	active bool  // on the shard's active list
	// rebuild says that the key's owner started empty since: the next
	// sync sends the copy's state instead of its hits.
	rebuild bool
	// reset is the time (Unix ns) of the latest reset of the key that the
	// copy has honoured: its hits before it are not charged to its state.
	reset int64
	// used is the shard's count of hits at the copy's latest hit, allowed
	// or denied: the bound evicts the copy used least lately.
	used uint64
}

// add records n hits allowed at now.
func (cp *stateCopy) add(now, n int64) {
	cp.total = satAdd(cp.total, n)
	if last := len(cp.hits) - 1; last >= 0 && (cp.hits[last].at/int64(time.Millisecond) == now/int64(time.Millisecond) || len(cp.hits) >= maxHitsKept) {
		cp.hits[last].n = satAdd(cp.hits[last].n, n)
		return
	}
	cp.hits = append(cp.hits, hit{now, n})
}

// ack drops the hits the owner has charged: done in all.
func (cp *stateCopy) ack(done int64) {
	if done <= cp.acked {
		return
	}
	drop, i := min(done, cp.total)-cp.acked, 0
	for ; i < len(cp.hits) && drop > 0; i++ {
		if cp.hits[i].n > drop {
			cp.hits[i].n -= drop
			drop = 0
			break
		}
		drop -= cp.hits[i].n
	}
	n := copy(cp.hits, cp.hits[i:])
	clear(cp.hits[n:])
	cp.hits = cp.hits[:n]
	cp.acked = min(done, cp.total)
}

// stateShard is one lock's share of the state copies.
type stateShard struct {
	mu     sync.Mutex
	t      *table.Table // the copies' states
	share  *table.Table // while an owner cannot be reached: the member's share
	copies map[stateKey]*stateCopy
	active []stateKey
	hits   uint64 // the hits decided on the shard's copies, in all
}

// states holds a member's copies of the keys of the algorithms other than
// FixedWindow. It is safe for concurrent use.
type states struct {
	seed      maphash.Seed
	perShard  int
	epoch     atomic.Uint64
	evictions atomic.Uint64
	shards    [stateShards]stateShard
}

// newStates makes the copies of a member that holds at most maxCopies of
// them (0: no bound), whose epochs count up from first.
func newStates(maxCopies int, first uint64) *states {
	st := &states{seed: maphash.MakeSeed()}
	if maxCopies > 0 {
		st.perShard = (maxCopies + stateShards - 1) / stateShards
	}
	st.epoch.Store(first)
	for i := range st.shards {
		s := &st.shards[i]
		s.t, s.share = table.New(st.perShard), table.New(st.perShard)
		s.copies = make(map[stateKey]*stateCopy)
	}
	return st
}

func (st *states) shard(id string) *stateShard {
	return &st.shards[maphash.String(st.seed, id)%stateShards]
}

// decide decides c at now on this member's copy of its key. While the
// partition's owner cannot be reached (ps.cut), the hit must also fit in
// the member's share of the policy (see share), counted since the owner
// last answered. An allowed hit is kept for the next sync.
func (st *states) decide(c *algo.Check, now int64, p int, ps *partState, members int64) algo.Decision {
	s := st.shard(c.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Op == algo.OpPeek {
		return s.t.Apply(c, now)
	}
	var fb algo.Decision
	cut := ps.cut.Load()
	if cut {
		sc := share(*c, members)
		if fb = s.share.Apply(&sc, now); !fb.Allowed {
			return fb
		}
	}
	d := s.t.Apply(c, now)
	k := keyOf(c)
	cp := s.copies[k]
	s.hits++
	if cp != nil {
		cp.used = s.hits
	}
	if !d.Allowed {
		if cp != nil {
			// Nothing to send, but the copy is synced again, to learn
			// when the owner's state allows more.
			s.activate(k, cp)
		}
		return d
	}
	if cut {
		d.Remaining = min(d.Remaining, fb.Remaining)
	}
	if cp == nil {
		if st.perShard > 0 && len(s.copies) >= st.perShard {
			st.evict(s)
		}
		cp = &stateCopy{epoch: st.epoch.Add(1), part: int32(p), used: s.hits}
		s.copies[k] = cp
	}
	cp.policy = *c
	cp.add(now, c.N)
	s.activate(k, cp)
	ps.holdUntil(now + int64(d.ResetAfter))
	return d
}

// activate puts k's copy cp on the shard's active list, for lingerSyncs
// syncs at least. The shard's lock is held.
func (s *stateShard) activate(k stateKey, cp *stateCopy) {
	cp.idle = 0
	if !cp.active {
		cp.active = true
		s.active = append(s.active, k)
	}
}

// evict deletes one copy of a full shard, chosen among a few: the one hit
// least lately, allowed or denied, as the table evicts the idlest first;
// so a flood of new ids, each hit once, evicts its own copies, never the
// copy of a key hit since (a denied key's, above all, whose state is what
// holds it back). The shard's lock is held.
func (st *states) evict(s *stateShard) {
	var (
		victim stateKey
		best   uint64
		seen   int
	)
	for k, cp := range s.copies {
		if seen == 0 || cp.used < best {
			victim, best = k, cp.used
		}
		if seen++; seen == evictSample {
			break
		}
	}
	if seen > 0 {
		delete(s.copies, victim)
		s.t.Delete(victim.table())
		s.share.Delete(victim.table())
		st.evictions.Add(1)
	}
}

// reset forgets c's key, which a reset made at at (Unix ns): its copy's
// state and its hits not yet sent.
func (st *states) reset(c *algo.Check, at int64) {
	s := st.shard(c.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(c)
	s.t.Delete(k.table())
	s.share.Delete(k.table())
	if cp := s.copies[k]; cp != nil {
		*cp = stateCopy{policy: cp.policy, epoch: st.epoch.Add(1), part: cp.part, taken: cp.taken, active: cp.active, reset: at}
	}
}

// honour has k's copy honour a reset of the key made at at (Unix ns),
// unless it has already: its state is forgotten, and made again of the
// hits allowed here since the reset. Its hits from before are still sent,
// for the owner to take as charged without charging them. The copy is
// synced again, for lingerSyncs rounds at least, to learn the owner's
// state since.
func (st *states) honour(k stateKey, at int64) {
	s := st.shard(k.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := s.copies[k]
	if cp == nil || at <= cp.reset {
		return
	}
	cp.reset = at
	s.t.Delete(k.table())
	s.share.Delete(k.table())
	s.recharge(cp)
	s.activate(k, cp)
}

// recharge charges to cp's state the hits it has allowed since its latest
// reset that the owner has not charged yet. The shard's lock is held.
func (s *stateShard) recharge(cp *stateCopy) {
	for _, x := range cp.hits {
		if x.at >= cp.reset {
			c := cp.policy
			c.N = x.n
			s.t.Charge(&c, x.at)
		}
	}
}

// seedCopy makes a copy of c's key with no hit, for a peek to be answered on
// the owner's state, and returns what to send the owner for it; it reports
// false if there is a copy already.
func (st *states) seedCopy(c *algo.Check, p int) (statePending, bool) {
	s := st.shard(c.ID)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(c)
	if _, ok := s.copies[k]; ok {
		return statePending{}, false
	}
	if st.perShard > 0 && len(s.copies) >= st.perShard {
		st.evict(s)
	}
	cp := &stateCopy{epoch: st.epoch.Add(1), part: int32(p), policy: *c}
	cp.policy.Op, cp.policy.N = algo.OpHit, 1
	s.copies[k] = cp
	s.activate(k, cp)
	return s.pending(k, cp), true
}

// statePending is one copy's part of a sync.
type statePending struct {
	key     stateKey
	part    int
	epoch   uint64
	rebuild bool // hits carries the copy's state, not its hits
	hits    *clusterpb.Hits
}

// pending returns what cp has to send: its hits since the owner last
// charged them, or its state when the owner started empty.
func (s *stateShard) pending(k stateKey, cp *stateCopy) statePending {
	policy := cp.policy
	policy.Op, policy.N = algo.OpHit, 1
	h := &clusterpb.Hits{Check: checkToWire(&policy), Epoch: cp.epoch, Base: cp.acked, ResetAt: cp.reset}
	// Its hits since the owner last charged them; when rebuilding, with
	// the state, which holds them: the new owner charges those it has not,
	// and merges the other members' with the state.
	h.At, h.N = make([]int64, len(cp.hits)), make([]int64, len(cp.hits))
	for i, x := range cp.hits {
		h.At[i], h.N[i] = x.at, x.n
	}
	if cp.rebuild {
		if r := s.t.Record(&policy); r.State != nil {
			h.State = r.State
		} else {
			h.Base, h.At, h.N = cp.total, nil, nil // no state: every hit taken as charged
		}
	}
	return statePending{key: k, part: int(cp.part), epoch: cp.epoch, rebuild: cp.rebuild, hits: h}
}

// takeActive appends to out what each active copy has to send, as
// [local.takeActive] does for the fixed windows: a copy stays active while
// it has hits the owner has not charged, and for lingerSyncs syncs after,
// to learn the other members' hits.
func (st *states) takeActive(round uint64, out []statePending) []statePending {
	for i := range st.shards {
		s := &st.shards[i]
		s.mu.Lock()
		keep := s.active[:0]
		for _, k := range s.active {
			cp := s.copies[k]
			if cp == nil || !cp.active || cp.taken == round {
				continue
			}
			cp.taken = round
			settled := cp.total == cp.acked && !cp.rebuild
			if settled && cp.idle >= lingerSyncs {
				cp.active = false
				continue
			}
			if settled {
				cp.idle++
			}
			keep = append(keep, k)
			out = append(out, s.pending(k, cp))
		}
		clear(s.active[len(keep):])
		s.active = keep
		s.mu.Unlock()
	}
	return out
}

// rebuildIn marks every copy in parts (a set by partition) that still has
// a state to be sent whole with the next sync, and appends what each has
// to send to out.
func (st *states) rebuildIn(parts map[int]bool, round uint64, out []statePending) []statePending {
	for i := range st.shards {
		s := &st.shards[i]
		s.mu.Lock()
		for k, cp := range s.copies {
			if !parts[int(cp.part)] {
				continue
			}
			if _, ok := s.t.Get(k.table()); !ok && cp.total == cp.acked {
				continue
			}
			cp.rebuild, cp.idle, cp.taken = true, 0, round
			if !cp.active {
				cp.active = true
				s.active = append(s.active, k)
			}
			out = append(out, s.pending(k, cp))
		}
		s.mu.Unlock()
	}
	return out
}

// adopt makes copies of the states of a partition this member owned and no
// longer does, to be sent whole to its new owner, which starts empty.
func (st *states) adopt(p int, recs []algo.Record, now int64) {
	for _, r := range recs {
		s := st.shard(r.ID)
		s.mu.Lock()
		k := stateKey{alg: r.Algorithm, period: int64(r.Period), id: r.ID}
		if s.t.Load(now, r) == nil {
			cp := s.copies[k]
			if cp == nil {
				if st.perShard > 0 && len(s.copies) >= st.perShard {
					st.evict(s)
				}
				cp = &stateCopy{epoch: st.epoch.Add(1), part: int32(p)}
				s.copies[k] = cp
			}
			cp.policy = algo.Check{Algorithm: r.Algorithm, Period: r.Period, ID: r.ID, Limit: 1, Burst: 1, N: 1}
			// The owner's state has honoured every reset made until now.
			cp.rebuild, cp.idle, cp.reset = true, 0, max(cp.reset, now)
			if !cp.active {
				cp.active = true
				s.active = append(s.active, k)
			}
		}
		s.mu.Unlock()
	}
}

// applied puts the owner's answer r to sp in the copy: the hits it has
// charged are dropped and, with replace, the copy becomes the owner's
// state, with the hits allowed here that it has not charged charged again.
func (st *states) applied(sp statePending, r *clusterpb.State, now int64, replace bool) {
	s := st.shard(sp.key.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := s.copies[sp.key]
	if cp == nil || cp.epoch != sp.epoch {
		return // evicted or reset since it was sent
	}
	if sp.rebuild {
		cp.rebuild = false
	}
	if !replace {
		// An owner that started empty: the copy's hits go again with its
		// state (rebuildIn), for the new owner to merge them with the other
		// members' states.
		return
	}
	cp.ack(r.GetDone())
	k := sp.key.table()
	if len(r.GetState()) == 0 {
		if mine := s.t.Record(&cp.policy); mine.State != nil && mine.Death > now {
			// The owner holds no state of the key and the copy holds a
			// live one: the owner's bound evicted it (a reset is honoured
			// before this answer, and forgets the copy's state). The copy
			// keeps its state and sends it whole with the next sync, so a
			// flood of new ids at the owner cannot reset a key the members
			// still hold.
			cp.rebuild = true
			s.activate(sp.key, cp)
			return
		}
	}
	s.t.Delete(k)
	s.share.Delete(k)
	if len(r.GetState()) > 0 && r.GetDeath() > now {
		rec := algo.Record{Algorithm: sp.key.alg, Period: time.Duration(sp.key.period), ID: sp.key.id, Death: r.GetDeath(), State: r.GetState()}
		_ = s.t.Load(now, rec) // a state the table refuses leaves the copy empty
	}
	s.recharge(cp)
}

// sweep deletes the states that ended before now, and the copies that
// hold neither a state nor a hit to send, and returns how many states it
// deleted.
func (st *states) sweep(now int64) int {
	n := 0
	for i := range st.shards {
		s := &st.shards[i]
		s.mu.Lock()
		d, _ := s.t.Expire(now, 0)
		s.share.Expire(now, 0)
		n += d
		for k, cp := range s.copies {
			if _, ok := s.t.Get(k.table()); !ok && !cp.active && cp.total == cp.acked {
				delete(s.copies, k)
			}
		}
		s.mu.Unlock()
	}
	return n
}

// len returns how many copies are held.
func (st *states) len() int {
	n := 0
	for i := range st.shards {
		s := &st.shards[i]
		s.mu.Lock()
		n += len(s.copies)
		s.mu.Unlock()
	}
	return n
}

// share returns c with its policy divided among members: the limit, and
// the burst of the bucket algorithms, divided by members and at least 1
// (LeakyBucket's burst, the hits that may wait, at least 0). A share that
// the algorithm would not accept leaves the policy whole.
func share(c algo.Check, members int64) algo.Check {
	if members <= 1 || c.Limit == 0 {
		return c
	}
	s := c
	s.Limit = max(1, c.Limit/members)
	if !c.Algorithm.Windowed() {
		least := int64(1)
		if c.Algorithm == algo.LeakyBucket {
			least = 0
		}
		s.Burst = max(least, c.Burst/members)
	}
	if algo.Validate(s.Algorithm, s.Limit, s.Period, s.Burst) != nil {
		return c
	}
	return s
}
