package cluster

import (
	"context"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/table"
)

// kind is the cluster kind of the partition owners.
const kind = "actorlimit-partition"

// expireEvery is how many messages an owner handles between two passes of
// expiry over its state.
const expireEvery = 64

// owner is the virtual actor (grain) that owns one partition: a table for
// the checks it decides itself (Owner mode, and LocalFirst's other checks),
// and the totals the members sync for their LocalFirst fixed windows. When
// the partition moves to another member the engine starts it there empty;
// the members' next syncs, which carry their totals for the current
// window, rebuild it.
type owner struct {
	clock   interface{ Now() time.Time }
	table   *table.Table
	windows map[localKey]*ownerWindow
	seen    int
	out     []algo.Decision
	checks  []algo.Check
}

// ownerWindow is one key's current fixed window as the owner sees it: each
// member's total, and their sum.
type ownerWindow struct {
	window int64
	sum    int64
	nodes  map[string]int64
}

func newOwner(clock interface{ Now() time.Time }, maxEntries int) *owner {
	return &owner{clock: clock, table: table.New(maxEntries), windows: make(map[localKey]*ownerWindow)}
}

// Receive decides checks and applies syncs.
func (o *owner) Receive(c protoactor.Context) {
	if reply := o.handle(c.Message()); reply != nil {
		c.Respond(reply)
	}
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
	if cap(o.out) < len(o.checks) {
		o.out = make([]algo.Decision, len(o.checks))
	}
	out := o.out[:len(o.checks)]
	if err := o.table.Decide(context.Background(), o.clock.Now().UnixNano(), o.checks, out); err != nil {
		return &clusterpb.DecideReply{Error: err.Error()}
	}
	for i := range o.checks {
		if o.checks[i].Op == algo.OpReset && o.checks[i].Algorithm == algo.FixedWindow {
			delete(o.windows, localKey{id: o.checks[i].ID, period: int64(o.checks[i].Period)})
		}
	}
	reply := &clusterpb.DecideReply{Decisions: make([]*clusterpb.Decision, len(out))}
	for i, d := range out {
		reply.Decisions[i] = decisionToWire(d)
	}
	return reply
}

// sync applies a member's totals: a member's total for a window only grows,
// so the owner keeps the largest it has seen from each member, and a total
// sent twice (a retry) counts once.
func (o *owner) sync(m *clusterpb.SyncRequest) *clusterpb.SyncReply {
	node := m.GetNode()
	reply := &clusterpb.SyncReply{Counts: make([]*clusterpb.Count, len(m.GetTotals()))}
	for i, t := range m.GetTotals() {
		k := localKey{id: t.GetId(), period: t.GetPeriodNs()}
		w := o.windows[k]
		switch {
		case w == nil || w.window < t.GetWindow():
			w = &ownerWindow{window: t.GetWindow(), nodes: make(map[string]int64, 4)}
			o.windows[k] = w
		case w.window > t.GetWindow():
			reply.Counts[i] = &clusterpb.Count{Window: w.window, Count: w.sum}
			continue
		}
		if prev := w.nodes[node]; t.GetHits() > prev {
			w.sum = satAdd(w.sum, t.GetHits()-prev)
			w.nodes[node] = t.GetHits()
		}
		reply.Counts[i] = &clusterpb.Count{Window: w.window, Count: w.sum}
	}
	return reply
}

// tidy deletes ended windows and expired table entries now and then.
func (o *owner) tidy() {
	o.seen++
	if o.seen%expireEvery != 0 {
		return
	}
	now := o.clock.Now().UnixNano()
	o.table.Expire(now, expireEvery)
	for k, w := range o.windows {
		if algo.FloorDiv(now, k.period) > w.window {
			delete(o.windows, k)
		}
	}
}

// satAdd adds two non-negative counts, saturating.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
