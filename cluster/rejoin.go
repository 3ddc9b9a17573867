package cluster

import (
	"errors"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
)

// A member the others dropped rejoins. The engine blocks a member that
// was silent for longer than DeadAfter by its system id, for good: the
// block list spreads by gossip and has no removal, and a member blocked
// can no longer reach the others, nor they it, though it runs again (a
// process stopped, a machine paused, a network cut long enough). Such a
// member sees that it was dropped on the others' health endpoints
// (Config.AutoManaged), which serve the ids each has blocked: when most
// of the others that answer list its id (healthProvider.outVoted), it
// stops deciding through the cluster (each check is decided on its own:
// LocalFirst on its share of the limit, as when its owner is cut off;
// Owner mode on its share at once, kept as a charge for the owner), drops
// the partitions it owned (the others took them over from their backups
// when they dropped it, as after a crash), stops its engine, and starts
// another on the same ports, under a new system id, which the others take
// for a new member at the same address: the partitions it owns by the
// members' ranking come back to it through the hand-off, and its hits and
// charges of the meantime go to their owners with the next syncs.

// rejoinRetry is the pause before a rejoin tries again to start its
// engine (its ports not free yet, say).
const rejoinRetry = 100 * time.Millisecond

// errRejoining is why every partition is cut off (LocalFirst) while the
// member replaces its engine.
var errRejoining = errors.New("the member is rejoining the cluster")

// rejoin replaces the member's engine c, which the others have dropped,
// with a new one under a new system id (see above); live is how many
// members answered, this one included: the member's share of a limit
// meanwhile is the limit over live. It returns at once if c is no longer
// the member's engine or a rejoin is under way, and gives up if the
// member closes.
func (m *Member) rejoin(c *protocluster.Cluster, live int) {
	if m.engine() != c || !m.rejoining.CompareAndSwap(false, true) {
		return
	}
	m.engineMu.Lock()
	defer m.engineMu.Unlock()
	if m.engine() != c || m.engineDown || m.isClosed() || m.port == 0 {
		if m.port == 0 && m.engine() == c && m.cannotRejoin.CompareAndSwap(false, true) {
			m.cfg.Logger.Warn("actorlimit cluster: the other members dropped this one; it cannot rejoin: its port is not known (Port 0 with Advertise)", "member", m.node)
		}
		m.rejoining.Store(false)
		return
	}
	start := time.Now()
	m.topoMu.Lock()
	m.gen.Add(1) // c's views are the member's no more
	m.topoMu.Unlock()
	m.cfg.Logger.Warn("actorlimit cluster: the other members dropped this one; it decides on its own and rejoins under a new id",
		"member", m.node, "id", c.ActorSystem.ID, "members", live)
	m.dropAll(live)
	m.stopEngine(c, m.topology)
	m.counters.rejoins.Add(1)
	for {
		if m.isClosed() {
			return // Close finds the engine down
		}
		nc, sub, err := m.newEngine()
		if err == nil {
			if err = startMember(nc); err == nil {
				m.engineDown = false
				m.topology = sub
				m.topoMu.Lock()
				if m.engine() != nc {
					// No view of nc listed another member yet: the
					// member is alone, or they have not answered.
					m.cluster.Store(nc)
					m.setView(addresses(nc.MemberList.Members().Members()))
				}
				m.ready.Store(true)
				m.rejoining.Store(false)
				m.topoMu.Unlock()
				m.cfg.Logger.Info("actorlimit cluster: rejoined", "member", m.node, "id", nc.ActorSystem.ID,
					"took", time.Since(start).Round(time.Millisecond))
				go m.settle()
				return
			}
			m.stopEngine(nc, sub)
		}
		m.cfg.Logger.Warn("actorlimit cluster: rejoining: starting the engine failed, will retry", "member", m.node, "error", err)
		select {
		case <-m.closed:
			return
		case <-time.After(rejoinRetry):
		}
	}
}

// addresses returns the members' addresses.
func addresses(ms []*protocluster.Member) []string {
	out := make([]string, 0, len(ms))
	for _, mb := range ms {
		out = append(out, mb.Address())
	}
	return out
}

// isClosed reports whether Close or Kill has begun.
func (m *Member) isClosed() bool {
	select {
	case <-m.closed:
		return true
	default:
		return false
	}
}

// dropAll makes the member, which the others dropped, own nothing and
// know of no hand-off, backup or member, before it rejoins: the partitions
// it owned were taken over by the others (their states become its
// copies, in LocalFirst, as when it hands a partition on); its checks are
// decided on its share of the limit over live members until the new
// engine's view lists the others (in LocalFirst, every partition is cut
// off until a sync reaches its owner).
func (m *Member) dropAll(live int) {
	m.ready.Store(false) // the partitions none holds are taken over only once the engine has started
	m.own.mu.Lock()
	defer m.own.mu.Unlock()
	now := m.cfg.Clock.Now().UnixNano()
	for p := range m.parts {
		ps := &m.parts[p]
		if op := ps.owned.Load(); op != nil && ps.owned.CompareAndSwap(op, nil) {
			op.close()
			if m.cfg.Mode == LocalFirst {
				m.states.adopt(p, op.records(now), now)
			}
		}
		if m.cfg.Mode == LocalFirst {
			m.cutOff(p, errRejoining)
		}
	}
	clear(m.own.handing)
	clear(m.own.waiting)
	clear(m.own.backups)
	clear(m.own.accepted)
	clear(m.own.assembling)
	m.view.Store(nil)
	m.viewMu.Lock()
	if m.viewCh != nil {
		close(m.viewCh)
		m.viewCh = nil
	}
	m.viewMu.Unlock()
	m.live.Store(int64(max(int(m.live.Load()), live, 1)))
}

// stopEngine stops engine c, whose subscription to its views is sub, as a
// crash would, its endpoints refusing at once, so that its ports are free
// for the next; an engine whose start failed half way too. engineMu is
// held.
func (m *Member) stopEngine(c *protocluster.Cluster, sub *eventstream.Subscription) {
	m.engineDown = true
	defer func() {
		if r := recover(); r != nil { // a part the failed start left unmade
			m.cfg.Logger.Debug("actorlimit cluster: rejoining: stopping the engine", "error", r)
		}
	}()
	c.ActorSystem.EventStream.Unsubscribe(sub)
	if hp, ok := c.Config.ClusterProvider.(*healthProvider); ok {
		_ = hp.Shutdown(false)
	}
	c.ActorSystem.Shutdown()
	stopped := make(chan struct{})
	go func() { defer close(stopped); c.Gossip.Shutdown() }()
	waitUntil(stopped, time.Now().Add(gossipStopBound))
	closeConnections(c)
	c.Remote.Shutdown(false)
	m.closeClientConns(c)
}
