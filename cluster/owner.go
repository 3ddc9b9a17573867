package cluster

import (
	"time"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// expireEvery is how many messages an owner handles between two passes of
// expiry over its state.
const expireEvery = 64

// owner answers the requests to one partition's owner, one at a time, on
// the owner's state of the partition (ownerPart): a member's tests stand it
// in for the member that owns the partition (Member.Own, Owners). A real
// member answers them with its sync actor (serveDecide, handleSync).
type owner struct {
	clock  interface{ Now() time.Time }
	m      *Member // the member it runs on; nil for a test's in-memory owner
	p      int     // the partition; -1 until named
	part   *ownerPart
	mem    *remembered // the requests it answered, by id
	seen   int
	checks []algo.Check
}

func newOwner(clock interface{ Now() time.Time }, maxEntries int) *owner {
	part := newOwnerPart(maxEntries)
	part.recordUntil = 1<<63 - 1 // a test's owner: its members rebuild it whenever they see it
	return &owner{clock: clock, p: -1, part: part,
		mem: newRemembered(rememberFactor * DefaultRequestTimeout)}
}

// handle answers one request, or returns nil for a message that is none.
func (o *owner) handle(msg any) any {
	var reply any
	switch m := msg.(type) {
	case *clusterpb.DecideRequest:
		reply = o.decide(m)
	case *clusterpb.SyncRequest:
		reply = o.sync(m)
	default:
		return nil
	}
	o.tidy()
	return reply
}

func (o *owner) decide(m *clusterpb.DecideRequest) *clusterpb.DecideReply {
	o.checks = o.checks[:0]
	for _, w := range m.GetChecks() {
		chk, err := checkFromWire(w)
		if err != nil {
			return &clusterpb.DecideReply{Error: err.Error()}
		}
		o.checks = append(o.checks, chk)
	}
	return o.part.answer(m, o.checks, o.clock.Now().UnixNano(), o.mem, nil, false)
}

// sync applies a member's totals for this partition (see ownerPart.add);
// parts for other partitions are answered absent.
func (o *owner) sync(m *clusterpb.SyncRequest) *clusterpb.SyncReply {
	reply := &clusterpb.SyncReply{Parts: make([]*clusterpb.PartReply, len(m.GetParts()))}
	for i, ps := range m.GetParts() {
		if int64(ps.GetPartition()) != int64(o.p) {
			reply.Parts[i] = &clusterpb.PartReply{Absent: true}
			continue
		}
		reply.Parts[i] = o.part.sync(m.GetNode(), ps, o.clock.Now().UnixNano())
	}
	return reply
}

// tidy deletes ended windows and expired table entries now and then.
func (o *owner) tidy() {
	o.seen++
	if o.seen%expireEvery != 0 {
		return
	}
	o.part.sweep(o.clock.Now().UnixNano())
}

// satAdd adds two non-negative counts, saturating.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
