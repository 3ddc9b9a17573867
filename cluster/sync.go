package cluster

import (
	"sync"

	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// syncLoop runs a sync every SyncEvery on the clock's ticker until Close,
// then one last one.
func (m *Member) syncLoop() {
	defer close(m.syncDone)
	if m.cfg.Mode != LocalFirst {
		<-m.closed
		return
	}
	t := m.cfg.Clock.NewTicker(m.cfg.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			m.SyncNow()
		case <-m.closed:
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
// failed: each owner gets the totals of the keys of its partitions counted
// since the last sync, one request per partition, all at once; answers
// correct the member's copies, and the totals a failed request carried are
// sent again by the next round. The sync loop calls it every SyncEvery;
// tests call it to sync at a moment of their choosing. Checks never wait
// for it.
func (m *Member) SyncNow() {
	if m.cluster != nil {
		m.live.Store(int64(max(1, len(m.Members()))))
	}
	batch := m.local.takeActive(m.cfg.Clock.Now().UnixNano(), nil)
	if len(batch) == 0 {
		return
	}
	byPartition := make(map[int][]pending)
	for _, p := range batch {
		n := m.partition(p.key.id)
		byPartition[n] = append(byPartition[n], p)
	}
	var wg sync.WaitGroup
	for n, ps := range byPartition {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.syncPartition(m.node, n, ps)
		}()
	}
	wg.Wait()
}

// syncPartition sends one partition's totals to its owner and applies the
// answer.
func (m *Member) syncPartition(node string, n int, ps []pending) {
	req := &clusterpb.SyncRequest{Node: node, Totals: make([]*clusterpb.Total, len(ps))}
	for i, p := range ps {
		req.Totals[i] = &clusterpb.Total{Id: p.key.id, PeriodNs: p.key.period, Window: p.window, Hits: p.hits}
	}
	resp, err := m.send(n, req)
	reply, ok := resp.(*clusterpb.SyncReply)
	if err != nil || !ok || len(reply.GetCounts()) != len(ps) {
		// The keys stay active with their hits unacknowledged: the next
		// sync sends their totals again.
		m.cfg.Logger.Debug("actorlimit cluster: sync failed, will retry", "partition", n, "error", err)
		for _, p := range ps {
			m.local.unreached(p)
		}
		return
	}
	for i, c := range reply.GetCounts() {
		m.local.applied(ps[i], c.GetWindow(), c.GetCount())
	}
}
