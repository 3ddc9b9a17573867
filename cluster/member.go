package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/labstack/echo"
	"google.golang.org/grpc"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// Member is one running member of a cluster: the backend of its Limiter.
// Its methods are safe for concurrent use.
type Member struct {
	// Limiter is the member's limiter: the public API, on top of the
	// cluster. Closing it closes the member.
	Limiter *actorlimit.Limiter

	cfg      Config
	node     string                               // the member's name to the owners: its address
	cluster  atomic.Pointer[protocluster.Cluster] // nil for a member made by a test without one; see engine
	local    *local
	states   *states
	parts    []partState               // partition number -> what the member knows of it
	live     atomic.Int64              // the live members in the view: the fallback's divisor
	ids      []string                  // partition number -> identity
	hash     partitioner               // places ids in partitions
	topology *eventstream.Subscription // the engine's subscription to its views; guarded by engineMu once started
	topoMu   sync.Mutex                // held while a view of the engine's becomes the member's
	seenIDs  map[string]string         // address -> the system id last seen there; guarded by topoMu
	streams  peerStreams               // the streams open to the member's server
	conns    sync.Map                  // engine (*protocluster.Cluster) -> *clientConns: the connections it opened to the others
	view     atomic.Pointer[view]      // the members this member takes for live; nil before the first
	viewMu   sync.Mutex
	viewCh   chan struct{} // closed when the view changes
	own      ownership
	leaving  atomic.Bool // Close has handed the partitions on: this member owns none
	started  atomic.Bool // node is the member's address
	ready    atomic.Bool // Start has returned: the member may take over partitions none holds

	// The rejoin (rejoin.go): engineMu is held while the member replaces
	// its engine, and by Close and Kill to stop it; gen counts the
	// engines, rejoining is set while the member decides on its own;
	// port is where its remote listens; engineDown says its engine is
	// stopped (guarded by engineMu); cannotRejoin says a member that
	// cannot rejoin (its port unknown) said so.
	engineMu     sync.Mutex
	cannotRejoin atomic.Bool
	gen          atomic.Uint64
	rejoining    atomic.Bool
	port         int
	engineDown   bool

	syncMu    sync.Mutex // held by a sync round
	pipe      pipeline   // the sync loop's rounds in flight (pipeline.go)
	round     uint64
	nextSweep int64
	sweeps    atomic.Uint64
	expired   atomic.Uint64
	outage    atomic.Bool // a partition was cut off and logged; see cutOff
	rejects   rejectLog   // the logging of rejected peer messages
	// mismatchLogged says a request with another partition key was logged.
	mismatchLogged atomic.Bool
	counters       counters

	resetMu    sync.Mutex
	resets     map[int][]queuedReset // partition -> resets the owner has yet to apply
	resetBytes int64                 // the resets' queuedCost, in all
	// resetsFullLogged says a refused reset was logged since the last
	// outage began.
	resetsFullLogged bool

	fb ownerFallback // Owner mode: the fallback while an owner does not answer (ownerwait.go)

	divider atomic.Pointer[dividerBox] // divides the quota buckets the member owns (quota.go)

	closeOnce sync.Once
	// closeBy is, while Close runs, when its current phase ends (unix
	// nanoseconds; see bound); zero before.
	closeBy  atomic.Int64
	closed   chan struct{}
	syncDone chan struct{}
	mu       sync.RWMutex // held for reading by calls, for writing by Close
	down     bool

	// send makes one request to a partition's owner; tests replace it.
	send func(partition int, msg any) (any, error)
	// ownerOf returns the address of the member that owns a partition, ""
	// if unknown; sendTo sends a batch of syncs to the member at an
	// address. Without them every sync goes through send.
	ownerOf func(partition int) string
	sendTo  func(addr string, msg *clusterpb.SyncRequest) (any, error)
}

var _ actorlimit.Backend = (*Member)(nil)

// Start starts a member of the cluster cfg describes and returns it once
// its actor system listens; its Limiter answers as soon as the member has
// joined (a check in Owner mode waits, within its context and
// RequestTimeout, for an owner to be found). Close it when done.
func Start(cfg Config) (*Member, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := newMember(cfg, "", nil)
	if _, err := cfg.remoteOptions(nil); err != nil {
		return nil, err
	}
	if err := cfg.checkCertName(); err != nil {
		return nil, err
	}
	cfg.warnOpen(cfg.Logger)
	m.engineMu.Lock() // a rejoin waits for the start to end
	defer m.engineMu.Unlock()
	c, sub, err := m.newEngine()
	if err != nil {
		return nil, err
	}
	m.cluster.Store(c)
	m.topology = sub
	if err := startMember(c); err != nil {
		c.ActorSystem.EventStream.Unsubscribe(sub)
		c.ActorSystem.Shutdown()
		m.closeClientConns(c)
		return nil, err
	}
	m.topoMu.Lock()
	m.nameFrom(c.ActorSystem)
	m.ready.Store(true)
	m.topoMu.Unlock()
	m.port = listenPort(cfg, c.ActorSystem.Address())
	go m.settle()
	go m.syncLoop()
	return m, nil
}

// newEngine makes the member's actor system and cluster, not started: the
// first at Start, another each time the member rejoins (rejoin.go), on the
// same ports, under a new system id. The cluster's views of the members
// become the member's view while the member's engine generation is the
// one they were made in.
func (m *Member) newEngine() (*protocluster.Cluster, *eventstream.Subscription, error) {
	cfg := m.cfg
	conns := &clientConns{}
	remoteOpts, err := cfg.remoteOptions(conns.dialOptions(), grpc.StreamInterceptor(m.streams.intercept))
	if err != nil {
		return nil, nil, err
	}
	if cfg.Advertise != "" {
		remoteOpts = append(remoteOpts, remote.WithAdvertisedHost(cfg.Advertise))
	}
	port := cfg.Port
	if m.port != 0 {
		port = m.port // a rejoin: where the others know the member
	}
	logger := cfg.Logger
	system := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return logger }))
	var c *protocluster.Cluster // set before its provider serves or polls
	if cfg.AutoManaged != nil {
		p, err := autoManaged(cfg, system, func() []string { return c.Remote.BlockList().BlockedMembers().ToSlice() })
		if err != nil {
			system.Shutdown()
			return nil, nil, err
		}
		p.out = func(live int) { go m.rejoin(c, live) }
		cfg.Provider = p
	}
	if _, err := system.Root.SpawnNamed(protoactor.PropsFromProducer(func() protoactor.Actor { return syncReceiver{m} }), syncActor); err != nil {
		system.Shutdown()
		return nil, nil, fmt.Errorf("cluster: starting member: %w", err)
	}
	pc := protocluster.Configure(cfg.Name, cfg.Provider, cfg.Lookup,
		remote.Configure(cfg.Host, port, remoteOpts...),
		protocluster.WithRequestTimeout(cfg.RequestTimeout),
		protocluster.WithHeartbeatExpiration(cfg.DeadAfter))
	c = protocluster.New(system, pc)
	m.conns.Store(c, conns)
	if m.send == nil {
		m.send = m.request
		m.sendTo = m.requestMember
		m.ownerOf = m.route
	}
	// The member's address is known once its remote has started, which
	// the engine does before it learns of any member: the first view
	// names it. The engine's StartMember returns a second after the member
	// has registered, and the others send it requests meanwhile.
	gen := m.gen.Load()
	sub := system.EventStream.Subscribe(func(ev any) {
		t, ok := ev.(*protocluster.ClusterTopology)
		if !ok {
			return
		}
		addrs := make([]string, 0, len(t.Members))
		for _, mb := range t.Members {
			addrs = append(addrs, mb.Address())
		}
		m.topoMu.Lock()
		defer m.topoMu.Unlock()
		if m.gen.Load() != gen {
			return // a rejoin has replaced this engine, or is replacing it
		}
		if m.engine() != c {
			// A rejoin's engine: it becomes the member's at its first
			// view that lists another member (one that lists only this
			// member comes before the polls have answered).
			if len(addrs) < 2 {
				return
			}
			m.cluster.Store(c)
		}
		m.nameFrom(system)
		m.freshConnections(system, t.Joined)
		m.setView(addrs)
		if len(addrs) > 1 {
			m.rejoining.Store(false)
		}
	})
	return c, sub, nil
}

// freshConnections drops system's connection to each member of joined
// that this member saw at the same address under another system id: a
// member that rejoined (rejoin.go), or whose process restarted. A
// connection the engine opened to that address while nothing listened
// there retries only after 2 s, and the hand-off of the partitions to
// the member would wait for it; the next message opens one at once.
// topoMu is held.
func (m *Member) freshConnections(system *protoactor.ActorSystem, joined []*protocluster.Member) {
	if m.seenIDs == nil {
		m.seenIDs = make(map[string]string)
	}
	self := system.Address()
	for _, mb := range joined {
		a := mb.Address()
		if id, ok := m.seenIDs[a]; ok && id != mb.Id && a != self {
			system.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: a})
		}
		m.seenIDs[a] = mb.Id
	}
}

// nameFrom names the member by system's address, once.
func (m *Member) nameFrom(system *protoactor.ActorSystem) {
	if !m.started.Load() {
		m.node = system.Address()
		m.local.setName(m.node)
		m.started.Store(true)
	}
}

// listenPort returns the port the member's remote listens on: cfg.Port,
// or, when that is 0 (a free port), the port of addr, the member's
// address, unless it is advertised elsewhere (0 then: unknown).
func listenPort(cfg Config, addr string) int {
	if cfg.Port != 0 {
		return cfg.Port
	}
	if cfg.Advertise != "" {
		return 0
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

// autoManaged makes the automanaged provider cfg.AutoManaged describes,
// its health endpoint listening on cfg.Host and serving, with the
// member's node, the system ids the member has blocked (blocked).
func autoManaged(cfg Config, system *protoactor.ActorSystem, blocked func() []string) (*healthProvider, error) {
	am := cfg.AutoManaged
	l, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(am.Port)))
	if err != nil {
		return nil, fmt.Errorf("cluster: starting member: its automanaged endpoint: %w", err)
	}
	e := echo.New()
	e.HideBanner, e.HidePort, e.Listener = true, true, l
	e.GET("/_health", func(c echo.Context) error {
		if cfg.healthHold != nil {
			cfg.healthHold()
		}
		host, port, err := system.GetHostPort()
		if err != nil {
			return c.NoContent(http.StatusServiceUnavailable)
		}
		return c.JSON(http.StatusOK, healthNode{
			NodeModel: automanaged.NewNode(cfg.Name, system.ID, host, port, am.Port, nil),
			Blocked:   blocked(),
		})
	})
	return newHealthProvider(cfg, e, system.ID), nil
}

// newMember makes a member that sends its requests with send, and no
// sync loop yet; node names it to the owners.
func newMember(cfg Config, node string, send func(partition int, msg any) (any, error)) *Member {
	m := &Member{
		cfg: cfg, node: node, send: send,
		parts:  make([]partState, cfg.Partitions),
		closed: make(chan struct{}), syncDone: make(chan struct{}),
		own: ownership{handing: make(map[int]*handing), waiting: make(map[int]waiting),
			backups: make(map[int]*backupState), accepted: make(map[int]string)},
	}
	m.fb.init(cfg)
	m.local = newLocal(cfg.MaxCopies, epochStart(cfg.Clock.Now().UnixNano()), m.parts)
	m.states = newStates(cfg.MaxCopies, epochStart(cfg.Clock.Now().UnixNano()))
	if node != "" {
		m.local.setName(node)
	}
	m.live.Store(1)
	m.hash = newPartitioner(cfg.PartitionKey)
	m.ids = make([]string, cfg.Partitions)
	for i := range m.ids {
		m.ids[i] = strconv.Itoa(i)
	}
	m.Limiter, _ = actorlimit.Over(m)
	return m
}

// epochStart is where a member's copies' epochs start: the time it started,
// so that a member that restarts at the same address names its new copies
// with larger epochs than its old ones.
func epochStart(now int64) uint64 { return uint64(max(now, 1)) }

// startMember starts c, turning the engine's panics into an error.
func startMember(c *protocluster.Cluster) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cluster: starting member: %v", r)
		}
	}()
	c.StartMember()
	return nil
}

// named reports whether the member knows its address (its remote has
// started), or needs none (a detached member).
func (m *Member) named() bool { return m.engine() == nil || m.started.Load() }

// Address is the member's host:port.
func (m *Member) Address() string { return m.node }

// OwnerOf returns the address of the member that owns id's partition in
// this member's view of the members ("" before it has one). While a
// partition is handed on, the members' views may differ for a moment: a
// member that does not own the partition refuses its requests and names
// the owner it knows.
func (m *Member) OwnerOf(id string) string {
	v := m.view.Load()
	if v == nil {
		return ""
	}
	return v.owner(m.partition(id))
}

// Members returns the addresses of the members this member takes for live,
// itself included: those the registry lists, less those the engine has
// blocked (silent for longer than DeadAfter, or gone).
func (m *Member) Members() []string {
	c := m.engine()
	if c == nil {
		return nil
	}
	var out []string
	blocked := c.Remote.BlockList()
	for _, mb := range c.MemberList.Members().Members() {
		if !blocked.IsBlocked(mb.Id) {
			out = append(out, mb.Address())
		}
	}
	return out
}

// fnv1a is the 64-bit FNV-1a hash of s: the same on every member, as the
// members' scores for a partition must be (maphash's seeds differ between
// processes). Ids are placed by a keyed hash (partkey.go).
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// partition returns the partition of id: its keyed hash (partkey.go).
func (m *Member) partition(id string) int { return m.hash.of(id, len(m.ids)) }

// isLocal reports whether c is decided by this member at once, without a
// request: LocalFirst's hits and peeks.
func (m *Member) isLocal(c *algo.Check) bool {
	return m.cfg.Mode == LocalFirst && c.Op != algo.OpReset
}

// decideLocal decides c at now, a LocalFirst hit or peek of partition p:
// a FixedWindow one from the member's copy of the key's window; another
// on the owner's state when this member owns the partition, else on the
// member's copy of that state.
func (m *Member) decideLocal(c *algo.Check, now int64, p int) algo.Decision {
	ps := &m.parts[p]
	if c.Algorithm == algo.FixedWindow {
		return m.local.decide(c, now, p, ps, m.live.Load(), m.node)
	}
	if op := ps.owned.Load(); op != nil {
		if d, ok := op.applyLive(c, now); ok {
			return d
		}
	}
	if ps.cut.Load() && c.Op == algo.OpHit {
		m.counters.fallbacks.Add(1)
	}
	return m.states.decide(c, now, p, ps, m.live.Load())
}

// Do decides one check: in LocalFirst mode, a hit or a peek at once, by
// the member (see decideLocal); a reset, and every check in Owner mode,
// by the owner of its partition.
func (m *Member) Do(ctx context.Context, c algo.Check) (algo.Decision, error) {
	if err := m.enter(ctx); err != nil {
		return algo.Decision{}, err
	}
	defer m.mu.RUnlock()
	p := m.partition(c.ID)
	if m.isLocal(&c) {
		now := m.cfg.Clock.Now().UnixNano()
		m.seedPeek(ctx, &c, now, p)
		return m.decideLocal(&c, now, p), nil
	}
	var d [1]algo.Decision
	if err := m.decideRemote(ctx, p, []algo.Check{c}, d[:]); err != nil {
		return algo.Decision{}, err
	}
	return d[0], nil
}

// DoMany decides checks in order. Local checks are decided at one instant;
// checks sent to owners go in one request per run of checks of the same
// partition.
func (m *Member) DoMany(ctx context.Context, checks []algo.Check, out []algo.Decision) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	defer m.mu.RUnlock()
	res := make([]algo.Decision, len(checks))
	now := m.cfg.Clock.Now().UnixNano()
	for i := 0; i < len(checks); {
		p := m.partition(checks[i].ID)
		if m.isLocal(&checks[i]) {
			m.seedPeek(ctx, &checks[i], now, p)
			res[i] = m.decideLocal(&checks[i], now, p)
			i++
			continue
		}
		j := i + 1
		for j < len(checks) && !m.isLocal(&checks[j]) && m.partition(checks[j].ID) == p {
			j++
		}
		j = i + runEnd(checks[i:], j-i) // a request fits one message
		if err := m.decideRemote(ctx, p, checks[i:j], res[i:j]); err != nil {
			return err
		}
		i = j
	}
	copy(out, res)
	return nil
}

// decideRemote has partition p's owner decide checks, writing its
// decisions to out: in Owner mode, see decideOwner. In LocalFirst mode only resets come here: a reset
// forgets the member's copy of the key too, and while the owner cannot be
// reached (or when the request fails) it is kept for the next sync to
// carry to the owner, instead of failing: the owner applies it before
// the hits counted after it.
func (m *Member) decideRemote(ctx context.Context, p int, checks []algo.Check, out []algo.Decision) error {
	if m.cfg.Mode == Owner {
		return m.decideOwner(ctx, p, checks, out)
	}
	if m.cfg.Mode == LocalFirst && m.parts[p].cut.Load() && m.parts[p].owned.Load() == nil {
		return m.resetLocally(p, checks, out)
	}
	err := m.remote(ctx, p, checks, out)
	if err != nil && m.cfg.Mode == LocalFirst && ctx.Err() == nil {
		m.cutOff(p, err)
		return m.resetLocally(p, checks, out)
	}
	if err != nil {
		return err
	}
	if m.cfg.Mode == LocalFirst {
		now := m.cfg.Clock.Now().UnixNano()
		for i := range checks {
			m.forget(&checks[i], now)
		}
	}
	return nil
}

// forget forgets the member's copy of c's key, which a reset made at now.
func (m *Member) forget(c *algo.Check, now int64) {
	if c.Algorithm == algo.FixedWindow {
		m.local.reset(c, now)
	} else {
		m.states.reset(c, now)
	}
}

// queuedReset is a reset kept for the owner, and when it was made.
type queuedReset struct {
	check algo.Check
	at    int64
}

// resetLocally resets checks (LocalFirst resets of partition p, whose owner
// cannot be reached) in the member's copies, and keeps them for the next
// sync to carry to the owner; when the resets kept would pass
// MaxQueuedResetBytes, it refuses them all and changes nothing (see
// queueFull).
func (m *Member) resetLocally(p int, checks []algo.Check, out []algo.Decision) error {
	m.resetMu.Lock()
	defer m.resetMu.Unlock()
	if err := m.queueFull(p, checks); err != nil {
		return err
	}
	if m.resets == nil {
		m.resets = make(map[int][]queuedReset)
	}
	now := m.cfg.Clock.Now().UnixNano()
	for i := range checks {
		m.forget(&checks[i], now)
		m.resets[p] = append(m.resets[p], queuedReset{checks[i], now})
		m.resetBytes += queuedCost(&checks[i])
		m.counters.queuedResets.Add(1)
		out[i] = algo.Decision{}
	}
	return nil
}

// enter takes the read lock unless the member is closed or ctx has ended.
func (m *Member) enter(ctx context.Context) error {
	if m.closed == nil { // a zero Member, not made by Start
		return fmt.Errorf("%w: the Member was not made by cluster.Start", actorlimit.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("actorlimit: %w", err)
	}
	m.mu.RLock()
	if m.down {
		m.mu.RUnlock()
		return actorlimit.ErrClosed
	}
	return nil
}

// remote has partition p's owner decide checks, writing its decisions to out.
func (m *Member) remote(ctx context.Context, p int, checks []algo.Check, out []algo.Decision) error {
	req := &clusterpb.DecideRequest{Checks: make([]*clusterpb.Check, len(checks)), KeyPrint: m.hash.print}
	for i := range checks {
		req.Checks[i] = checkToWire(&checks[i])
	}
	resp, err := m.call(ctx, p, req)
	if err != nil {
		return err
	}
	reply, ok := resp.(*clusterpb.DecideReply)
	switch {
	case !ok:
		return fmt.Errorf("cluster: partition %d answered %T", p, resp)
	case reply.GetError() != "":
		return fmt.Errorf("cluster: partition %d: %s", p, reply.GetError())
	case len(reply.GetDecisions()) != len(checks):
		return fmt.Errorf("cluster: partition %d answered %d decisions for %d checks", p, len(reply.GetDecisions()), len(checks))
	}
	for i, d := range reply.GetDecisions() {
		out[i] = decisionFromWire(d)
	}
	return nil
}

// call sends msg to partition p's owner and waits for its answer, or for
// ctx to end.
func (m *Member) call(ctx context.Context, p int, msg any) (any, error) {
	if ctx.Done() == nil {
		return m.send(p, msg)
	}
	type answer struct {
		v   any
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		v, err := m.send(p, msg)
		ch <- answer{v, err}
	}()
	select {
	case a := <-ch:
		return a.v, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("actorlimit: %w", ctx.Err())
	}
}

// Sweep deletes the state of ended windows now: the member's copies, and
// the owner's state of the partitions it owns. The
// sync loop does it every Config.SweepEvery.
func (m *Member) Sweep(ctx context.Context) (int, error) {
	if err := m.enter(ctx); err != nil {
		return 0, err
	}
	defer m.mu.RUnlock()
	return m.sweep(m.cfg.Clock.Now().UnixNano()), nil
}

// sweep deletes the state of windows that ended before now.
func (m *Member) sweep(now int64) int {
	n := m.local.sweep(now) + m.states.sweep(now)
	for p := range m.parts {
		if op := m.parts[p].owned.Load(); op != nil {
			n += op.sweep(now)
		}
	}
	m.expired.Add(uint64(n))
	m.sweeps.Add(1)
	return n
}

// Stats reports the member's own state: its copies as Entries (not the
// owner's state of the partitions it owns),
// what the bound (Config.MaxCopies) evicted, and its sweeps.
func (m *Member) Stats(ctx context.Context) (actorlimit.BackendStats, error) {
	if err := m.enter(ctx); err != nil {
		return actorlimit.BackendStats{}, err
	}
	defer m.mu.RUnlock()
	return actorlimit.BackendStats{
		Entries:   m.local.len() + m.states.len(),
		Evictions: m.local.evictions.Load() + m.states.evictions.Load(),
		Expired:   m.expired.Load(),
		Sweeps:    m.sweeps.Load(),
	}, nil
}

// PID is nil: a member has no single actor to message.
func (m *Member) PID() *protoactor.PID { return nil }

// Close stops the sync after one last round, hands the partitions the
// member owns to their next owners, leaves the cluster and shuts the
// member's actor system down. It returns once the other members have
// dropped the member (each closes its connection to it when it does),
// answering meanwhile the requests they still send it, naming the
// partitions' new owners: at once with a registry that tells them at
// once. Each phase has a bound (closebound.go), so that Close returns in
// about a second whatever the others do: a last sync or a hand-off
// that a dead or closing member does not answer in time is given up, as a
// crash would give it up (the partition's next owner takes it over from
// its backup). It is idempotent.
func (m *Member) Close() error {
	if m.closed == nil {
		return nil // a zero Member: nothing to close
	}
	m.closeOnce.Do(func() {
		start := time.Now()
		m.closeBy.Store(start.Add(closeSyncBound).UnixNano())
		close(m.closed)
		waitUntil(m.syncDone, start.Add(closeSyncBound))
		m.closeBy.Store(start.Add(closeHandOffBound).UnixNano())
		handed := make(chan struct{})
		go func() { defer close(handed); m.handOffAll() }()
		waitUntil(handed, start.Add(closeHandOffBound))
		m.mu.Lock()
		m.down = true
		m.mu.Unlock()
		m.closeBy.Store(start.Add(closeBound).UnixNano())
		m.shutdown(true)
	})
	return nil
}

// Kill stops the member at once, as a crash would: no last sync, no
// goodbye to the other members (no graceful-leave gossip, no registry
// change, no last heartbeat), and its server and its own connections to
// the others close, as the system closes a dead process's sockets; the
// others take it for dead after DeadAfter. For tests of members that die.
func (m *Member) Kill() {
	if m.closed == nil {
		return
	}
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.down = true
		m.mu.Unlock()
		close(m.closed)
		<-m.syncDone
		m.shutdown(false)
	})
}

// shutdown leaves the cluster, gracefully (leave) or as a crash would
// (crash), and stops the actor system.
func (m *Member) shutdown(graceful bool) {
	if m.engine() == nil {
		return
	}
	// A rejoin under way ends first (in about a second: the engine's
	// start); one that gave up for the close left the engine down.
	m.engineMu.Lock()
	defer m.engineMu.Unlock()
	if m.engineDown {
		return
	}
	m.engineDown = true
	m.engine().ActorSystem.EventStream.Unsubscribe(m.topology)
	if graceful {
		m.leave()
	} else {
		m.crash()
	}
}

// claim records that this member owns partition p, whose owner's state is
// part: its own hits go into it from now on.
func (m *Member) claim(p int, part *ownerPart) {
	if p < len(m.parts) {
		m.parts[p].owned.Store(part)
	}
}

// release records that this member no longer owns partition p, whose
// owner's state is part, at now (a test's Member.Own). Unless the member
// is closing, the states of the other algorithms' keys become the
// member's copies, sent whole to the partition's new owner (the fixed
// windows' hits are in the member's copies already).
func (m *Member) release(p int, part *ownerPart, now int64) {
	if p >= len(m.parts) || !m.parts[p].owned.CompareAndSwap(part, nil) {
		return
	}
	part.close()
	select {
	case <-m.closed:
		return
	default:
	}
	m.states.adopt(p, part.records(now), now)
	m.parts[p].holdUntil(now + int64(m.cfg.SyncEvery))
}

// engine returns the member's cluster: the engine under it, which a rejoin
// replaces (rejoin.go); nil for a member made by a test without one.
func (m *Member) engine() *protocluster.Cluster { return m.cluster.Load() }
