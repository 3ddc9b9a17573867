package cluster

import (
	"context"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// seedPeek prepares c, a LocalFirst check of partition p at now: when it
// is a peek and the member holds no copy of its key, the member asks the
// owner once for its count or state, which becomes the member's copy (with
// no hit of the member's), and the peek answers on it as the owner would.
// The copy is then synced like any other, and the next peeks answer at
// once. A member that owns p decides on the owner's state already; one
// whose owner is cut off, or whose request fails, answers on what it has.
// The request waits no longer than ctx and Config.RequestTimeout.
func (m *Member) seedPeek(ctx context.Context, c *algo.Check, now int64, p int) {
	ps := &m.parts[p]
	if c.Op != algo.OpPeek || ps.owned.Load() != nil || ps.cut.Load() {
		return
	}
	w := &partWork{}
	if c.Algorithm == algo.FixedWindow {
		pd, ok := m.local.seedCopy(c, now, p, ps, m.node)
		if !ok {
			return
		}
		w.totals = []pending{pd}
	} else {
		sp, ok := m.states.seedCopy(c, p)
		if !ok {
			return
		}
		w.hits = []statePending{sp}
	}
	m.counters.seeds.Add(1)
	req := &clusterpb.SyncRequest{Node: m.node, Parts: []*clusterpb.PartSync{m.part(p, w, true)}, KeyPrint: m.hash.print}
	resp, err := m.call(ctx, p, req)
	reply, ok := resp.(*clusterpb.SyncReply)
	if err != nil || !ok || len(reply.GetParts()) != 1 {
		m.cfg.Logger.Debug("actorlimit cluster: a peek could not ask the owner", "partition", p, "error", err)
		return
	}
	r := reply.GetParts()[0]
	if r.GetAbsent() || len(r.GetCounts()) != len(w.totals) || len(r.GetStates()) != len(w.hits) {
		return
	}
	m.learnResets(p, r)
	for i, cnt := range r.GetCounts() {
		m.local.applied(w.totals[i], cnt.GetWindow(), cnt.GetCount())
	}
	for i, s := range r.GetStates() {
		m.states.applied(w.hits[i], s, now, true)
		ps.holdUntil(s.GetDeath())
	}
}
