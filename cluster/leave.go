package cluster

import (
	"sync"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The bounds of a member's leave (Member.Close).
const (
	// leaveLinger bounds how long a closing member, out of the registry,
	// goes on answering (refusing, naming the partitions' new owners) the
	// members that may still send it requests: until every member it
	// takes for live has dropped it, which closes that member's
	// connection to it, or Close's closeBound. The engine's own close
	// waits 2 s, always.
	leaveLinger = 2 * time.Second
	// lingerPoll is how often the linger looks at the connections.
	lingerPoll = 5 * time.Millisecond
)

// leave is a graceful close's part in the cluster, after the member has
// handed its partitions on: it tells the others it leaves (the gossip's
// graceful-leave key, and the registry), answers those that may still
// send it requests until they have dropped it (until Close's closeBound),
// and stops its actor system, gossip (waiting at most gossipStopBound for
// it) and remote. The gossip key, the registry's leave and the gossip
// round go on in a goroutine of their own while the member lingers: a
// registry or a gossip actor that is slow to answer does not hold the
// close past its bound. It is the engine's
// Cluster.Shutdown(true) without its fixed 2 s sleep: the members learn
// of the leave through the registry (each drops the member, blocks it,
// and closes its connection to it, which leave waits for) and through
// the gossip, which carries the key out at once and goes on while the
// member lingers.
func (m *Member) leave() {
	c := m.engine()
	opened := m.streams.opened()
	told := make(chan struct{})
	go func() {
		defer close(told)
		if err := c.Gossip.SetStateRequest(protocluster.GracefullyLeftKey, &emptypb.Empty{}); err != nil {
			m.cfg.Logger.Warn("actorlimit cluster: leaving: the gossip took no graceful-leave key", "error", err)
		}
		if err := c.Config.ClusterProvider.Shutdown(true); err != nil {
			m.cfg.Logger.Warn("actorlimit cluster: leaving: the registry", "error", err)
		}
		c.Gossip.SendState()
	}()
	m.linger(told, opened, m.bound(leaveLinger)) // Close's closeBound ends it sooner
	c.ActorSystem.Shutdown()
	c.IdentityLookup.Shutdown()
	stopped := make(chan struct{})
	go func() { defer close(stopped); c.Gossip.Shutdown() }()
	waitUntil(stopped, time.Now().Add(gossipStopBound))
	m.stopRemote()
}

// linger waits, at most bound, until told is closed (the member has told
// the others it leaves) and no member this member takes for live
// holds a connection to it of the first opened (see peerStreams.opened):
// one that member opened before it could know of the leave, and closes
// when it drops this member. A connection opened since (to carry the
// answer to the last gossip, say) is not waited for.
func (m *Member) linger(told <-chan struct{}, opened uint64, bound time.Duration) {
	deadline := time.Now().Add(bound)
	t := time.NewTicker(lingerPoll)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-told:
			if !m.streams.holding(opened, m.takesForLive) {
				return
			}
		default:
		}
		<-t.C
	}
}

// takesForLive reports whether the member with system id id is among
// those this member takes for live: listed, not blocked.
func (m *Member) takesForLive(id string) bool {
	c := m.engine()
	return c.MemberList.ContainsMemberID(id) && !c.Remote.BlockList().IsBlocked(id)
}

// stopRemote stops the member's remote once it has left: it closes its
// own connections to the others, then its server, which ends the others'
// connections to it. It does not call the engine's graceful
// Remote.Shutdown(true): that waits up to 10 s for the others'
// connections to end (held by a connection the engine retries to a
// member that died, up to 2 s a try), and its endpoint manager's stop
// races with connections ending at the same moment (it can send on a
// stream's channel the stream has just closed, or remove an endpoint from
// the map it has just cleared: either panics in the engine's goroutine).
// The linger before it has let the others drop the member already. The
// gRPC server's stop closes its listener and connections at once, then
// waits for its handlers to return, which took up to 1.4 s on a loaded
// machine: stopRemote waits for that at most remoteStopBound, and the
// handlers end on their own.
func (m *Member) stopRemote() {
	c := m.engine()
	closeConnections(c)
	stopped := make(chan struct{})
	go func() { defer close(stopped); c.Remote.Shutdown(false) }()
	waitUntil(stopped, time.Now().Add(remoteStopBound))
	m.closeClientConns(c)
}

// closeClientConns closes every connection engine c opened to the others
// (see clientConns).
func (m *Member) closeClientConns(c *protocluster.Cluster) {
	if cc, ok := m.conns.LoadAndDelete(c); ok {
		cc.(*clientConns).closeAll()
	}
}

// closeConnections closes the connections of the member whose engine c
// is to the other members, as the engine does when it takes a member's
// endpoint for terminated.
func closeConnections(c *protocluster.Cluster) {
	self := c.ActorSystem.Address()
	for _, mb := range c.MemberList.Members().Members() {
		if a := mb.Address(); a != self {
			c.ActorSystem.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: a})
		}
	}
}

// crash is Kill's part in the cluster: it stops the member as the death
// of its process would, with no goodbye (no graceful-leave key, no
// registry change, no last heartbeat). Its server (and its automanaged
// health endpoint) stops at once, and its
// own connections to the others close, as the system closes a dead
// process's sockets; left open, each would hold the graceful close of
// the member it leads to until that member's wait ran out.
func (m *Member) crash() {
	c := m.engine()
	if hp, ok := c.Config.ClusterProvider.(*healthProvider); ok {
		_ = hp.Shutdown(false) // its endpoint refuses, as a dead process's port does
	}
	c.ActorSystem.Shutdown()
	c.Gossip.Shutdown()
	c.Remote.Shutdown(false)
	closeConnections(c)
	m.closeClientConns(c)
}

// peerStreams tracks the streams open to the member's server: one from
// each member that has sent it anything, named by that member's system
// id once its connect request has come.
type peerStreams struct {
	mu   sync.Mutex
	open map[*peerStream]struct{}
	seq  uint64 // the streams opened so far
}

// peerStream is one stream to the member's server.
type peerStream struct {
	grpc.ServerStream
	ps    *peerStreams
	seq   uint64 // the stream's place in the order of opening
	id    string // the sender's system id, "" before its connect request; guarded by ps.mu
	first bool   // the first message has come; read and set by the stream's reader alone
}

// intercept is the server's stream interceptor: it tracks the stream
// while handler serves it.
func (ps *peerStreams) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s := &peerStream{ServerStream: ss, ps: ps}
	ps.mu.Lock()
	if ps.open == nil {
		ps.open = make(map[*peerStream]struct{})
	}
	ps.seq++
	s.seq = ps.seq
	ps.open[s] = struct{}{}
	ps.mu.Unlock()
	defer func() {
		ps.mu.Lock()
		delete(ps.open, s)
		ps.mu.Unlock()
	}()
	return handler(srv, s)
}

// RecvMsg receives a message, naming the stream by the first: the
// engine's connect request, which carries the sender's system id.
func (s *peerStream) RecvMsg(msg any) error {
	if err := s.ServerStream.RecvMsg(msg); err != nil {
		return err
	}
	if s.first {
		return nil
	}
	s.first = true
	if rm, ok := msg.(*remote.RemoteMessage); ok {
		if sc := rm.GetConnectRequest().GetServerConnection(); sc != nil {
			s.ps.mu.Lock()
			s.id = sc.GetSystemId()
			s.ps.mu.Unlock()
		}
	}
	return nil
}

// opened returns how many streams have been opened so far: the mark of
// those holding considers.
func (ps *peerStreams) opened() uint64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.seq
}

// holding reports whether, of the first opened streams, one is open from
// a member live takes for live, or from one not named yet.
func (ps *peerStreams) holding(opened uint64, live func(id string) bool) bool {
	ps.mu.Lock()
	ids := make([]string, 0, len(ps.open))
	for s := range ps.open {
		if s.seq <= opened {
			ids = append(ids, s.id)
		}
	}
	ps.mu.Unlock()
	for _, id := range ids {
		if id == "" || live(id) {
			return true
		}
	}
	return false
}
