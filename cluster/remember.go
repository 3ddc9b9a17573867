package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// An owner remembers, for a bounded time and in bounded memory, the
// decisions it made for each Owner-mode request that carried an id
// (clusterpb.DecideRequest.request_id), and the fallback charges it took:
// a request sent again after its answer was lost is answered from the
// first decision, and a charge sent again is charged once.

// rememberShards is how many locks the remembered requests are spread over.
const rememberShards = 32

// MaxRemembered is the most requests a member remembers as an owner (see
// [Config.OwnerWait]): at about 100 bytes each for a one-check request,
// some 3 MB. A request is also forgotten RememberFor after it was decided.
const MaxRemembered = 1 << 15

// rememberFactor is how many RequestTimeouts an owner remembers a request
// for: a member sends a request again for at most one RequestTimeout, and
// charges its own decision once the owner answers again.
const rememberFactor = 2

// remembered is what an owner remembers of the requests it answered. It is
// safe for concurrent use.
type remembered struct {
	keep   int64 // how long (ns, on the member's clock) a request is kept
	shards [rememberShards]rememberShard
}

// rememberShard is one lock's share of the remembered requests: a map, and
// the ids in the order they came (from head on), for the bounds.
type rememberShard struct {
	mu   sync.Mutex
	byID map[uint64]rememberedReply
	ring []rememberedID
	head int
}

// perShard is the most requests a shard remembers.
const perShard = MaxRemembered / rememberShards

// rememberedID is an id in its shard's order, and when it was decided.
type rememberedID struct {
	id uint64
	at int64
}

// rememberedReply is one request's decisions, or, charged, that the owner
// took it as a member's fallback charge (it answers a late request so);
// part is the request's partition, at when it was decided (Unix ns, on
// the member's clock).
type rememberedReply struct {
	charged   bool
	part      uint32
	at        int64
	decisions []algo.Decision
}

// newRemembered makes an owner's memory of its requests: each kept for
// keep, at most MaxRemembered in all. It grows as it is used.
func newRemembered(keep time.Duration) *remembered {
	r := &remembered{keep: int64(keep)}
	for i := range r.shards {
		r.shards[i].byID = make(map[uint64]rememberedReply)
	}
	return r
}

// shard returns id's shard.
func (r *remembered) shard(id uint64) *rememberShard {
	return &r.shards[mix64(id)%rememberShards]
}

// put remembers id's reply, decided at rep.at, at now, forgetting first
// the ids older than keep, and the oldest when the shard is full. The
// shard's lock is held.
func (s *rememberShard) put(id uint64, now, keep int64, rep rememberedReply) {
	for s.head < len(s.ring) && (len(s.ring)-s.head >= perShard || s.ring[s.head].at < now-keep) {
		if r, ok := s.byID[s.ring[s.head].id]; ok && r.at == s.ring[s.head].at {
			delete(s.byID, s.ring[s.head].id)
		}
		s.head++
	}
	if s.head > 0 && s.head >= len(s.ring)/2 {
		n := copy(s.ring, s.ring[s.head:])
		clear(s.ring[n:])
		s.ring, s.head = s.ring[:n], 0
	}
	s.ring = append(s.ring, rememberedID{id: id, at: rep.at})
	s.byID[id] = rep
}

// get returns id's reply, unless it is older than keep at now (a reply
// that a hand-off brought may wait behind younger ones in the ring). The
// shard's lock is held.
func (s *rememberShard) get(id uint64, now, keep int64) (rememberedReply, bool) {
	rep, ok := s.byID[id]
	if !ok || rep.at < now-keep {
		return rememberedReply{}, false
	}
	return rep, true
}

// export returns, for each partition of parts, the requests of it that r
// remembers at now, each with how much longer r would remember it: what a
// hand-off of the partition carries to its next owner.
func (r *remembered) export(parts map[int]bool, now int64) map[int][]*clusterpb.Remembered {
	out := make(map[int][]*clusterpb.Remembered)
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for id, rep := range s.byID {
			left := rep.at + r.keep - now
			if !parts[int(rep.part)] || left <= 0 {
				continue
			}
			w := &clusterpb.Remembered{RequestId: id, LeftNs: left, Charged: rep.charged}
			if len(rep.decisions) > 0 {
				w.Decisions = make([]*clusterpb.Decision, len(rep.decisions))
				for j, d := range rep.decisions {
					w.Decisions[j] = decisionToWire(d)
				}
			}
			out[int(rep.part)] = append(out[int(rep.part)], w)
		}
		s.mu.Unlock()
	}
	return out
}

// load remembers, at now, the requests of partition p that its previous
// owner remembered (checked: see peerCheck.remembered), each for what was
// left of its time there, at most keep; an id r remembers already keeps
// what r has. The bounds hold as for the requests r decides.
func (r *remembered) load(p uint32, reqs []*clusterpb.Remembered, now int64) {
	for _, w := range reqs {
		id, left := w.GetRequestId(), min(w.GetLeftNs(), r.keep)
		if id == 0 || left <= 0 {
			continue
		}
		rep := rememberedReply{charged: w.GetCharged(), part: p, at: now - (r.keep - left)}
		if !rep.charged {
			rep.decisions = make([]algo.Decision, len(w.GetDecisions()))
			for j, d := range w.GetDecisions() {
				rep.decisions[j] = decisionFromWire(d)
			}
		}
		s := r.shard(id)
		s.mu.Lock()
		if _, ok := s.get(id, now, r.keep); !ok {
			s.put(id, now, r.keep, rep)
		}
		s.mu.Unlock()
	}
}

// len returns how many requests are remembered.
func (r *remembered) len() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n += len(s.byID)
		s.mu.Unlock()
	}
	return n
}

// answer answers req, a request to this partition's owner whose checks
// are checks, at now: a fallback charge is charged (each request once);
// a request remembered is answered from its first decision; a request
// that came after its sender stopped waiting is answered late, deciding
// nothing; any other is decided, and remembered when it has an id. mem
// may be nil (nothing is remembered); deduped, if not nil, counts the
// requests answered from memory. With live, it answers only while the
// state is the owner's, and returns nil once it is gone.
func (o *ownerPart) answer(req *clusterpb.DecideRequest, checks []algo.Check, now int64, mem *remembered, deduped *atomic.Uint64, live bool) *clusterpb.DecideReply {
	if live {
		if !o.enter() {
			return nil
		}
		defer o.leave()
	}
	if len(req.GetCharges()) > 0 {
		o.takeCharges(req.GetPartition(), req.GetCharges(), now, mem, deduped)
		return &clusterpb.DecideReply{}
	}
	id := req.GetRequestId()
	var s *rememberShard
	if id != 0 && mem != nil {
		// Held while the request is decided: the same request sent twice
		// at once is decided once.
		s = mem.shard(id)
		s.mu.Lock()
		defer s.mu.Unlock()
		// A reply that does not fit the checks (the same id from another
		// sender: never, with random ids) is not theirs.
		if rep, ok := s.get(id, now, mem.keep); ok && (rep.charged || len(rep.decisions) == len(checks)) {
			if deduped != nil {
				deduped.Add(1)
			}
			if rep.charged {
				return &clusterpb.DecideReply{Late: true}
			}
			return decisionsReply(rep.decisions)
		}
	}
	if late := req.GetLateNs(); late > 0 && now-req.GetSentNs() > late {
		return &clusterpb.DecideReply{Late: true}
	}
	out := make([]algo.Decision, len(checks))
	o.decide(now, checks, out)
	if s != nil {
		s.put(id, now, mem.keep, rememberedReply{part: req.GetPartition(), at: now, decisions: out})
	}
	return decisionsReply(out)
}

// decisionsReply is the reply carrying out.
func decisionsReply(out []algo.Decision) *clusterpb.DecideReply {
	reply := &clusterpb.DecideReply{Decisions: make([]*clusterpb.Decision, len(out))}
	for i, d := range out {
		reply.Decisions[i] = decisionToWire(d)
	}
	return reply
}

// takeCharges charges, at now, the requests of partition p that members
// decided on their share while this owner did not answer, each once: those
// it remembers (decided, or charged already) are skipped.
func (o *ownerPart) takeCharges(p uint32, charges []*clusterpb.Charge, now int64, mem *remembered, deduped *atomic.Uint64) {
	for _, ch := range charges {
		id := ch.GetRequestId()
		var s *rememberShard
		if id != 0 && mem != nil {
			s = mem.shard(id)
			s.mu.Lock()
			if _, ok := s.get(id, now, mem.keep); ok {
				s.mu.Unlock()
				if deduped != nil {
					deduped.Add(1)
				}
				continue
			}
		}
		at := now
		if sent := ch.GetSentNs(); sent > 0 {
			at = min(sent, now)
		}
		o.charge1(ch, at, now)
		if s != nil {
			s.put(id, now, mem.keep, rememberedReply{charged: true, part: p, at: now})
			s.mu.Unlock()
		}
	}
}

// charge1 applies one fallback charge, its checks made at at: its allowed
// hits are charged to the table whatever the limit says (they happened),
// a fixed window's only when at is in the window of now (a hit of an
// ended window counts in none); its resets are applied as of at; peeks and
// denied hits change nothing. Checks that are not valid are skipped.
func (o *ownerPart) charge1(ch *clusterpb.Charge, at, now int64) {
	allowed := ch.GetAllowed()
	defer o.touch() // once the change is made (see touch)
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, w := range ch.GetChecks() {
		c, err := checkFromWire(w)
		if err != nil {
			continue
		}
		switch {
		case c.Op == algo.OpReset:
			o.resetKey(&c, at)
		case c.Op != algo.OpHit || i >= len(allowed) || !allowed[i]:
		case c.Algorithm == algo.FixedWindow:
			if algo.FloorDiv(at, int64(c.Period)) == algo.FloorDiv(now, int64(c.Period)) {
				o.table.Charge(&c, now)
			}
		default:
			o.table.Charge(&c, at)
		}
	}
}
