package cluster

import (
	"errors"
	"sync"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// Detached makes a member without a cluster: its requests go to send, and
// its sync loop runs on cfg.Clock's ticker until Close. cfg.Provider may be
// nil. For tests of the sync protocol under the race detector.
func Detached(cfg Config, node string, send func(partition int, msg any) (any, error)) (*Member, error) {
	cfg.Provider = noProvider{}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := newMember(cfg, node, send)
	go m.syncLoop()
	return m, nil
}

// DetachedBatched is Detached with batched syncs: ownerOf names the member
// that owns each partition, and sendTo carries a batch to the member it
// names (to its [Member.HandleSync]).
func DetachedBatched(cfg Config, node string, send func(partition int, msg any) (any, error),
	ownerOf func(partition int) string, sendTo func(addr string, msg any) (any, error)) (*Member, error) {
	m, err := Detached(cfg, node, send)
	if err != nil {
		return nil, err
	}
	m.ownerOf = ownerOf
	m.sendTo = func(addr string, msg *clusterpb.SyncRequest) (any, error) { return sendTo(addr, msg) }
	return m, nil
}

// Own makes m the owner of partition p, as the partition's grain starting
// on m would, and returns that grain's handler of the requests sent to the
// partition (one at a time, as a grain's mailbox would). release undoes
// it, as the grain stopping would.
func (m *Member) Own(p int) (handle func(msg any) any, release func()) {
	o := newOwner(m.cfg.Clock, m.cfg.partEntries())
	o.m, o.part.self = m, m.local
	o.p = p
	m.claim(p, o.part)
	var mu sync.Mutex
	return func(msg any) any {
		mu.Lock()
		defer mu.Unlock()
		return o.handle(msg)
	}, func() { m.release(p, o.part, m.cfg.Clock.Now().UnixNano()) }
}

// HandleSync answers a batched sync as m's sync actor would.
func (m *Member) HandleSync(msg any) any { return m.handleSync(msg.(*clusterpb.SyncRequest)) }

// Partition returns the partition of id in a cluster of n partitions
// whose members have the default Name and PartitionKey.
func Partition(id string, n int) int {
	return newPartitioner(defaultPartitionKey(DefaultName)).of(id, n)
}

// TestPartitionKey is the partition key of a member with the default Name
// and no PartitionKey: the one Partition places ids with. Members of
// another Name given it place ids as Partition does.
var TestPartitionKey = defaultPartitionKey(DefaultName)

// PartitionOf returns the partition of id on m.
func (m *Member) PartitionOf(id string) int { return m.partition(id) }

// KeyPrint is the fingerprint of m's partition key.
func (m *Member) KeyPrint() uint64 { return m.hash.print }

// Owners are the partitions' owners of a detached cluster, in memory: a
// request to partition p is handled by the p-th owner, one at a time, as
// its grain would.
type Owners struct {
	mu     sync.Mutex
	clock  Config
	owners map[int]*owner
}

// NewOwners makes the owners; their clock is cfg.Clock.
func NewOwners(cfg Config) *Owners {
	return &Owners{clock: cfg, owners: make(map[int]*owner)}
}

// Handle answers msg as partition p's owner.
func (o *Owners) Handle(p int, msg any) any {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.owners[p]
	if w == nil {
		w = newOwner(o.clock.Clock, 1<<10)
		w.p = p
		o.owners[p] = w
	}
	return w.handle(msg)
}

// Drop forgets partition p's owner, as when its member dies: the next
// request starts it empty.
func (o *Owners) Drop(p int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.owners, p)
}

// noProvider stands in for a provider in a detached member.
type noProvider struct{}

func (noProvider) StartMember(*protocluster.Cluster) error { return nil }
func (noProvider) StartClient(*protocluster.Cluster) error { return nil }
func (noProvider) Shutdown(bool) error                     { return nil }

// SystemID is the member's actor system id: its name in the registry.
func (m *Member) SystemID() string { return m.engine().ActorSystem.ID }

// SetLive sets the number of live members a detached member divides its
// limit by while an owner cannot be reached.
func (m *Member) SetLive(n int) { m.live.Store(int64(n)) }

// OwnerSizes is the size of the owner's state on a member, every
// partition it owns together: the keys of its table, its windows, what it
// charged, its marks of resets.
type OwnerSizes struct{ Table, Windows, Charged, Marks int }

// OwnerSizes returns the size of the owner's state on m.
func (m *Member) OwnerSizes() OwnerSizes {
	var s OwnerSizes
	for p := range m.parts {
		if op := m.parts[p].owned.Load(); op != nil {
			op.mu.Lock()
			s.Table += op.table.Len()
			s.Windows += len(op.windows)
			s.Charged += len(op.charged)
			s.Marks += len(op.marks)
			op.mu.Unlock()
		}
	}
	return s
}

// OwnedParts returns how many partitions m owns.
func (m *Member) OwnedParts() int {
	n := 0
	for p := range m.parts {
		if m.parts[p].owned.Load() != nil {
			n++
		}
	}
	return n
}

// Unsettled returns how many partitions m has yet to settle: those it
// owns whose state its backup has not taken since it changed, those it
// hands on, those it waits for.
func (m *Member) Unsettled() int {
	n := 0
	for p := range m.parts {
		if op := m.parts[p].owned.Load(); op != nil && op.backupPending() {
			if v := m.view.Load(); v != nil && v.backup(p) != "" && v.backup(p) != m.node {
				n++
			}
		}
	}
	m.own.mu.Lock()
	defer m.own.mu.Unlock()
	return n + len(m.own.handing) + len(m.own.waiting)
}

// Backups returns how many partitions m's view makes it the backup of
// (owned by another member), and of how many it holds a backup.
func (m *Member) Backups() (want, held int) {
	v := m.view.Load()
	if v == nil {
		return 0, 0
	}
	m.own.mu.Lock()
	defer m.own.mu.Unlock()
	for p := range m.parts {
		if v.backup(p) == m.node && v.owner(p) != m.node {
			want++
			if m.own.backups[p] != nil {
				held++
			}
		}
	}
	return want, held
}

// PendingCharges is how many checks the member decided on its share, in
// Owner mode, that wait for their owner.
func (m *Member) PendingCharges() int { return m.pendingCharges() }

// Remembered is how many requests the member remembers as an owner.
func (m *Member) Remembered() int { return m.fb.mem.len() }

// ErrDropped is the error of a request whose answer DropReplies dropped.
var ErrDropped = errors.New("the answer was dropped on purpose")

// DropReplies makes the member's transport drop the answer of every request
// for which drop reports true, after the owner has answered it: the
// request's sender sees ErrDropped, as when an answer is lost. Call it
// before the member's first check.
func (m *Member) DropReplies(drop func(msg any) bool) {
	send := m.send
	m.send = func(p int, msg any) (any, error) {
		resp, err := send(p, msg)
		if err == nil && drop(msg) {
			return nil, ErrDropped
		}
		return resp, err
	}
}

// SetOwnersClock makes the in-memory owners read clock, not the members'.
func (o *Owners) SetOwnersClock(clock actorlimit.TickerClock) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clock.Clock = clock
}

// WrapSend makes the member's transport wrap(send): a test's hook before
// and after each request to a partition's owner. Call it before the
// member's first check.
func (m *Member) WrapSend(wrap func(send func(int, any) (any, error)) func(int, any) (any, error)) {
	m.send = wrap(m.send)
}

// OwnerAmong returns the owner of id's partition, on m, in a view of
// members (addresses).
func (m *Member) OwnerAmong(id string, members []string) string {
	return newView(members, m.ids).owner(m.partition(id))
}

// HoldOwnership holds m's lock on what it owns, backs up and hands on
// until release is called: the backups and hand-offs sent to m wait for
// their answer meanwhile, as with a slow member.
func (m *Member) HoldOwnership() (release func()) {
	m.own.mu.Lock()
	return m.own.mu.Unlock
}

// WithTLSClock returns c with its TLS checking certificates at now's
// time.
func WithTLSClock(c Config, now func() time.Time) Config {
	c.tlsNow = now
	return c
}

// WithHealthHold returns c with its automanaged health endpoint calling
// hold before each answer (a test blocks in it to freeze the endpoint).
func WithHealthHold(c Config, hold func()) Config {
	c.healthHold = hold
	return c
}

// Block blocks the member of system id id in m's engine, as the engine
// does when it takes a member for dead: m drops it at its next view, for
// good, and lists its id among the blocked on its health endpoint.
func (m *Member) Block(id string) { m.engine().Remote.BlockList().Block(id) }
