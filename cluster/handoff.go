package cluster

import (
	"time"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// export returns the owner's state of partition p at now, whole, for its
// next owner or its backup: the windows, with copies (the fixed-window
// copies, in p, of the member it runs on, named node) counted as another
// member's totals; the table's states; and what it has charged of each
// member's copies. Ended windows and dead states are left out.
func (o *ownerPart) export(p int, now int64, node string, copies []pending) *clusterpb.PartState {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := &clusterpb.PartState{Partition: uint32(p)}
	wins := make(map[localKey]*clusterpb.Window, len(o.windows))
	for k, w := range o.windows {
		if algo.FloorDiv(now, k.period) > w.window {
			continue
		}
		pw := &clusterpb.Window{Id: k.id, PeriodNs: k.period, Window: w.window, Sum: w.sum}
		for n, t := range w.nodes {
			pw.Nodes = append(pw.Nodes, &clusterpb.NodeTotal{Node: n, Epoch: t.epoch, Base: t.base, Hits: t.hits})
		}
		wins[k] = pw
	}
	for _, c := range copies {
		if c.part != p || algo.FloorDiv(now, c.key.period) > c.window {
			continue
		}
		pw := wins[c.key]
		switch {
		case pw == nil || pw.Window < c.window:
			pw = &clusterpb.Window{Id: c.key.id, PeriodNs: c.key.period, Window: c.window}
			wins[c.key] = pw
		case pw.Window > c.window:
			continue
		}
		foldTotal(pw, node, c.epoch, c.hits)
	}
	for _, pw := range wins {
		st.Windows = append(st.Windows, pw)
	}
	o.table.Snapshot(now, func(r algo.Record) bool {
		st.Records = append(st.Records, &clusterpb.Record{Algorithm: uint32(r.Algorithm), PeriodNs: int64(r.Period),
			Id: r.ID, Death: r.Death, State: append([]byte(nil), r.State...)})
		return true
	})
	for k, ch := range o.charged {
		if ch.death < now {
			continue
		}
		pc := &clusterpb.Charged{Algorithm: uint32(k.alg), PeriodNs: k.period, Id: k.id, Death: ch.death}
		for n, nc := range ch.nodes {
			pc.Nodes = append(pc.Nodes, &clusterpb.NodeCharged{Node: n, Epoch: nc.epoch, Done: nc.done})
		}
		st.Charged = append(st.Charged, pc)
	}
	st.Resets = o.exportMarks(now)
	return st
}

// foldTotal records, in pw, node's total hits of its copy epoch, as
// ownerPart.add does.
func foldTotal(pw *clusterpb.Window, node string, epoch uint64, hits int64) {
	var t *clusterpb.NodeTotal
	for _, n := range pw.Nodes {
		if n.Node == node {
			t = n
			break
		}
	}
	switch {
	case t == nil:
		pw.Nodes = append(pw.Nodes, &clusterpb.NodeTotal{Node: node, Epoch: epoch, Hits: hits})
		pw.Sum = satAdd(pw.Sum, hits)
	case epoch > t.Epoch:
		t.Base, t.Epoch, t.Hits = satAdd(t.Base, t.Hits), epoch, hits
		pw.Sum = satAdd(pw.Sum, hits)
	case epoch == t.Epoch && hits > t.Hits:
		pw.Sum = satAdd(pw.Sum, hits-t.Hits)
		t.Hits = hits
	}
}

// load puts st, a partition's state that another member exported, in o at
// now, for node, the member o runs on. A window's total of node's copy that
// is still node's current copy (own reports the epoch of node's copy of a
// window, if it has one) leaves the sum: the owner reads that copy as it
// answers. Where o holds a key already, it keeps the fuller: the window
// with the larger sum, the state that holds more hits. Records it cannot
// load are skipped.
func (o *ownerPart) load(st *clusterpb.PartState, now int64, node string, own func(k localKey, window int64) (uint64, bool)) {
	defer o.touch() // once the change is made (see touch)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, pw := range st.GetWindows() {
		k := localKey{id: pw.GetId(), period: pw.GetPeriodNs()}
		if k.period <= 0 || algo.FloorDiv(now, k.period) > pw.GetWindow() {
			continue
		}
		w := &ownerWindow{window: pw.GetWindow(), sum: pw.GetSum(), nodes: make(map[string]nodeTotal, len(pw.GetNodes()))}
		for _, n := range pw.GetNodes() {
			t := nodeTotal{epoch: n.GetEpoch(), base: n.GetBase(), hits: n.GetHits()}
			if n.GetNode() == node && own != nil {
				if e, ok := own(k, w.window); ok && e == t.epoch {
					w.sum = max(0, w.sum-t.hits)
					t.hits = 0
				}
			}
			w.nodes[n.GetNode()] = t
		}
		old := o.windows[k]
		if old != nil && (old.window > w.window || old.window == w.window && old.sum >= w.sum) {
			continue
		}
		if old == nil && o.limit > 0 && len(o.windows) >= o.limit {
			o.evict(now)
		}
		o.windows[k] = w
	}
	for _, r := range st.GetRecords() {
		c := algo.Check{Algorithm: algo.Algorithm(r.GetAlgorithm()), Period: time.Duration(r.GetPeriodNs()), ID: r.GetId(), Limit: 1, Burst: 1, N: 1}
		if !c.Algorithm.Known() || c.ID == "" || c.Period <= 0 {
			continue
		}
		if o.table.Record(&c).State == nil {
			_ = o.table.Load(now, algo.Record{Algorithm: c.Algorithm, Period: c.Period, ID: c.ID, Death: r.GetDeath(), State: r.GetState()})
		} else if c.Algorithm != algo.FixedWindow {
			o.merge(&c, r.GetState(), now)
		}
	}
	o.loadMarks(st.GetResets(), now)
	for _, pc := range st.GetCharged() {
		k := stateKey{alg: algo.Algorithm(pc.GetAlgorithm()), period: pc.GetPeriodNs(), id: pc.GetId()}
		ch := o.charged[k]
		if ch == nil {
			if o.limit > 0 && len(o.charged) >= o.limit {
				o.evictCharged()
			}
			ch = &chargedHits{last: now, nodes: make(map[string]nodeCharged, len(pc.GetNodes()))}
			o.charged[k] = ch
		}
		ch.death = max(ch.death, pc.GetDeath())
		for _, n := range pc.GetNodes() {
			nc := ch.nodes[n.GetNode()]
			if n.GetEpoch() > nc.epoch || n.GetEpoch() == nc.epoch && n.GetDone() > nc.done {
				ch.nodes[n.GetNode()] = nodeCharged{epoch: n.GetEpoch(), done: n.GetDone()}
			}
		}
	}
}

// copyEpoch returns the epoch of this member's copy of k's window, if it
// holds one.
func (l *local) copyEpoch(k localKey, window int64) (uint64, bool) {
	s := l.shard(k.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[k]; e != nil && e.window == window {
		return e.epoch, true
	}
	return 0, false
}
