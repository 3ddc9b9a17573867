package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"

	"github.com/actorlimit/actorlimit"
)

// Mode says how a member decides a check.
type Mode uint8

// The modes.
const (
	// LocalFirst answers every hit and peek, of every algorithm, from the
	// member's own copy at once and syncs with the key's owner in the
	// background: a burst may be over-admitted for about one sync
	// interval. While an owner cannot be reached the member admits at most
	// its share of the policy (limit/members) instead of failing. Resets go
	// to the owner, and wait for the next sync when it cannot be reached.
	LocalFirst Mode = iota
	// Owner sends every check to the owner of its key's partition and waits
	// for the answer: exact, at the cost of a round trip when another member
	// owns the partition.
	Owner
)

// Defaults used when a Config field is zero.
const (
	// DefaultPartitions is how many partitions the ids are hashed onto.
	DefaultPartitions = 1024
	// DefaultSyncEvery is the interval of the background sync.
	DefaultSyncEvery = 50 * time.Millisecond
	// DefaultRequestTimeout bounds one request to an owner.
	DefaultRequestTimeout = time.Second
	// DefaultMaxEntries bounds the owner's state on a member, every
	// partition it owns together: the single process's default.
	DefaultMaxEntries = 1 << 20
	// DefaultMaxCopies bounds a member's own copies.
	DefaultMaxCopies = 1 << 20
	// DefaultSweepEvery is how often a LocalFirst member deletes the state
	// of ended windows.
	DefaultSweepEvery = 10 * time.Second
	// DefaultDeadAfter is how long a silent member is given before it is
	// taken for dead.
	DefaultDeadAfter = 5 * time.Second
	// DefaultName is the cluster's name.
	DefaultName = "actorlimit"
	// DefaultAutoManagedRefresh is how often an automanaged member polls
	// the others' health endpoints.
	DefaultAutoManagedRefresh = 200 * time.Millisecond
	// DefaultOwnerWait is how long an Owner-mode check waits for its
	// owner's answer before the member decides it on its share: a tenth of
	// DefaultRequestTimeout, and about a thousand times a round trip to
	// another member (tens of microseconds; under 0.4 s in the slowest
	// hand-off measured on a loaded machine, which waits regardless, see
	// Config.OwnerWait), so that only an owner that does not run, or a
	// network that carries nothing, trips it, while the callers of a
	// frozen owner are held a tenth of a second, not a second.
	DefaultOwnerWait = 100 * time.Millisecond
)

// AutoManaged configures the automanaged membership (no registry): every
// member serves a health endpoint, in the engine's automanaged node
// format, and polls the others'.
type AutoManaged struct {
	// Port is the port of this member's health endpoint, on Config.Host.
	Port int
	// Hosts are the host:port of every member's health endpoint, this
	// member's among them.
	Hosts []string
	// Refresh is how often the member polls them: a member whose
	// endpoint refuses (it left, or its process died) is dropped at the
	// next poll; one whose endpoint does not answer (a poll times out
	// after a second: the member is stopped) is kept until DeadAfter has
	// passed since it last answered. Default [DefaultAutoManagedRefresh].
	Refresh time.Duration
}

// MaxPartitions is the most partitions a Config accepts.
const MaxPartitions = 1 << 16

// Config says how to start a member. Provider (or AutoManaged) is required; every other
// zero field takes its default. Every member of a cluster must have the
// same Name, Partitions and Mode.
type Config struct {
	// Name is the cluster's name; default [DefaultName].
	Name string
	// Host and Port are the member's address; Host defaults to 127.0.0.1,
	// Port 0 picks a free port.
	Host string
	Port int
	// Advertise is the host:port the other members reach this member at,
	// when it is not Host:Port: a member behind a proxy, a NAT or a port
	// forward. The member registers it in the membership (automanaged,
	// etcd, ...), is named by it (Member.Address), and the others dial it.
	// With TLS, the member's certificate must name its host (Start checks
	// it), since the others check that name. Default: Host and the port
	// the member listens on.
	Advertise string
	// Provider tells the member who the other members are: the engine's
	// test provider, etcd, Consul, Kubernetes, ZooKeeper or automanaged.
	// Leave it nil to set AutoManaged instead.
	Provider protocluster.ClusterProvider
	// AutoManaged, when Provider is nil, makes the member's provider an
	// automanaged one (members poll each other's health endpoint, no
	// registry), with its endpoint listening on Host only (the engine's
	// own listens on every interface) and a stopped member kept until
	// DeadAfter (the engine's drops it after 2 s).
	AutoManaged *AutoManaged
	// Lookup is the engine's identity lookup, for the engine's own grains;
	// default disthash. The partitions do not use it: the members place
	// them themselves, by rendezvous hashing over the members each takes
	// for live (see Member.OwnerOf).
	Lookup protocluster.IdentityLookup
	// Mode is LocalFirst (the default) or Owner.
	Mode Mode
	// Partitions is how many partitions ids are hashed onto; default
	// [DefaultPartitions]. A topology change moves whole partitions.
	Partitions int
	// SyncEvery is the LocalFirst sync interval; default [DefaultSyncEvery].
	SyncEvery time.Duration
	// RequestTimeout bounds one request to an owner: a check in Owner mode
	// (when the caller's context has no earlier deadline), or a reset. A sync's
	// request is bounded by the shorter of RequestTimeout and 4 × SyncEvery
	// (at least 100 ms), or twice the round trip measured to its member
	// where that is longer (docs/cluster.md, across regions), so that an
	// owner that stops answering is found out, and the fallback applies,
	// within a few sync intervals or round trips. Default
	// [DefaultRequestTimeout].
	RequestTimeout time.Duration
	// DeadAfter is how long a member may go without a heartbeat before the
	// others take it for dead and drop it from their member lists; its
	// partitions then move. Default [DefaultDeadAfter].
	DeadAfter time.Duration
	// OwnerWait bounds, in Owner mode, how long a check waits for its
	// owner's answer: an owner that does not answer in that time (stopped,
	// a long pause, a network that drops everything) has the member
	// decide the check itself, on its share of the policy (the limit, and
	// a bucket's burst, divided by the live members), as LocalFirst does
	// while an owner cannot be reached, without error; the member counts
	// it (SyncStats.OwnerFallbacks) and charges it to the owner once the
	// owner answers again, or to the partition's next owner. A check whose
	// partition is on its way between two live members (a hand-off: the
	// members asked answer that they hand it on or wait for it) waits for
	// it, at most RequestTimeout, as before. Zero (the default) makes it
	// follow the round trip measured to each owner: a smoothed round trip
	// plus four times its deviation plus [OwnerWaitMargin], at least
	// [DefaultOwnerWait] (or RequestTimeout/2 when that is shorter) and
	// at most RequestTimeout/2, so that the checks sent to a far owner
	// (another region) do not fall back while it answers
	// ([Member.OwnerWaitFor] tells the current value). A value set here is
	// used as it is, for every owner; it must be shorter than
	// RequestTimeout. Strict, or a context from [WithStrict], turns the
	// fallback off.
	OwnerWait time.Duration
	// Strict makes an Owner-mode check whose owner does not answer wait
	// up to RequestTimeout and then fail, instead of falling back to the
	// member's share after OwnerWait: for callers who prefer an error to an
	// inexact answer. [WithStrict] does it for one call.
	Strict bool
	// MaxEntries bounds the owner's state on a member, every partition
	// it owns together; default [DefaultMaxEntries]. Each partition holds
	// at most MaxEntries/Partitions keys, plus an eighth for the spread of
	// the hash, rounded up, in each of the owner's per-key maps (its table
	// of states, the LocalFirst windows' totals, what it charged of each
	// member's hits, the marks of resets), evicting the idlest (see the
	// package doc, Memory): with the partitions keyed by PartitionKey, a
	// flood of new ids spreads over them as evenly as the keys in use do.
	MaxEntries int
	// MaxCopies bounds the member's own state: its LocalFirst copies of fixed
	// windows, and of the other algorithms' states (each up to MaxCopies).
	// A full shard of fixed-window copies evicts,
	// among a few, one of an ended window, else the one that loses least: the
	// lowest count plus hits not yet sent, so that a flood of new ids evicts
	// its own copies before a busy key's. Default [DefaultMaxCopies].
	MaxCopies int
	// SweepEvery is how often a LocalFirst member's sync deletes the state of
	// ended windows (its copies, the owner's state of
	// the partitions it owns), as the single-process limiter's janitor does;
	// default [DefaultSweepEvery].
	SweepEvery time.Duration
	// Clock is read for every decision and ticks the sync; default the wall
	// clock.
	Clock actorlimit.TickerClock
	// Logger gets the actor system's and the engine's logs; default silent.
	Logger *slog.Logger
	// TLS, when set, makes the members authenticate each other with
	// mutual TLS (see [TLS]): every member of the cluster must set it,
	// with certificates from the same CA. Without it the members' port
	// takes any message from anyone who reaches it: Start refuses a member
	// whose Host is not loopback without TLS, unless TrustedNetwork says
	// that nobody but the members can reach its port.
	TLS *TLS
	// TrustedNetwork lets a member whose Host is not loopback start
	// without TLS: the operator states that only the members can reach
	// the members' ports (a private network of their own, a service mesh
	// that authenticates them). Anyone who does reach a port without TLS
	// can reset keys, change counts and take partitions. The member logs
	// a warning when it starts so. It changes nothing with TLS set or on
	// loopback.
	TrustedNetwork bool
	// PartitionKey is the secret key of the hash that places ids in
	// partitions (SipHash-2-4): at least [MinPartitionKeyLen] bytes,
	// random, the same on every member, and kept from the callers, so that
	// nobody can choose ids that land in one partition. Every request
	// carries a fingerprint of it; a member refuses, counts
	// (SyncStats.KeyMismatches) and logs at ERROR the requests of a member
	// whose key differs. Empty is allowed only when Host is loopback (all
	// members on one machine): the key is then derived from Name, which
	// anyone who knows the name can compute. With any other Host, Start
	// fails without one.
	PartitionKey []byte

	// tlsNow, when set, is the time at which TLS checks certificates: for
	// tests of expiry; default time.Now.
	tlsNow func() time.Time
	// ownerWaitAuto says OwnerWait was left zero: it follows the round
	// trips (rtt.go), OwnerWait its floor.
	ownerWaitAuto bool
	// dial, when set, makes the member's connections to the others:
	// for tests that put a network between the members (wan_test.go).
	dial func(ctx context.Context, addr string) (net.Conn, error)
	// noPredict turns LocalFirst's prediction of the others' hits off
	// (predict.go): for the WAN harness's figures without it.
	noPredict bool
	// healthHold, when set, is called by the automanaged health endpoint
	// before it answers: tests freeze a member's endpoint with it.
	healthHold func()
	// onFallback, when set, is told of each Owner-mode fallback: when
	// the check was sent, when it was to fall back, and when it did; and
	// later, with fellBack zero, of the owner's answer to a check that fell
	// back (at, when it came): for the WAN harness's account of them.
	onFallback func(owner string, sent, fallAt, fellBack, late time.Time)
}

// partEntries is the most keys the owner's state of one partition holds in
// each of its maps: MaxEntries/Partitions, plus an eighth, rounded up.
func (c Config) partEntries() int {
	n := (c.MaxEntries + c.Partitions - 1) / c.Partitions
	return n + (n+7)/8
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Provider == nil && c.AutoManaged == nil:
		return c, fmt.Errorf("%w: cluster.Config: Provider and AutoManaged are nil", actorlimit.ErrInvalidArgument)
	case c.Provider != nil && c.AutoManaged != nil:
		return c, fmt.Errorf("%w: cluster.Config: Provider and AutoManaged are both set", actorlimit.ErrInvalidArgument)
	case c.AutoManaged != nil && (c.AutoManaged.Port <= 0 || c.AutoManaged.Port > 65535):
		return c, fmt.Errorf("%w: cluster.Config: AutoManaged.Port %d is not a port", actorlimit.ErrInvalidArgument, c.AutoManaged.Port)
	case c.AutoManaged != nil && len(c.AutoManaged.Hosts) == 0:
		return c, fmt.Errorf("%w: cluster.Config: AutoManaged.Hosts is empty", actorlimit.ErrInvalidArgument)
	case c.AutoManaged != nil && c.AutoManaged.Refresh < 0:
		return c, fmt.Errorf("%w: cluster.Config: AutoManaged.Refresh %v is negative", actorlimit.ErrInvalidArgument, c.AutoManaged.Refresh)
	case c.Mode > Owner:
		return c, fmt.Errorf("%w: cluster.Config: Mode %d is unknown", actorlimit.ErrInvalidArgument, c.Mode)
	case c.Partitions < 0 || c.Partitions > MaxPartitions:
		return c, fmt.Errorf("%w: cluster.Config: Partitions %d is not between 1 and %d", actorlimit.ErrInvalidArgument, c.Partitions, MaxPartitions)
	case c.SyncEvery < 0:
		return c, fmt.Errorf("%w: cluster.Config: SyncEvery %v is negative", actorlimit.ErrInvalidArgument, c.SyncEvery)
	case c.RequestTimeout < 0:
		return c, fmt.Errorf("%w: cluster.Config: RequestTimeout %v is negative", actorlimit.ErrInvalidArgument, c.RequestTimeout)
	case c.DeadAfter < 0:
		return c, fmt.Errorf("%w: cluster.Config: DeadAfter %v is negative", actorlimit.ErrInvalidArgument, c.DeadAfter)
	case c.MaxEntries < 0:
		return c, fmt.Errorf("%w: cluster.Config: MaxEntries %d is negative", actorlimit.ErrInvalidArgument, c.MaxEntries)
	case c.MaxCopies < 0:
		return c, fmt.Errorf("%w: cluster.Config: MaxCopies %d is negative", actorlimit.ErrInvalidArgument, c.MaxCopies)
	case c.OwnerWait < 0:
		return c, fmt.Errorf("%w: cluster.Config: OwnerWait %v is negative", actorlimit.ErrInvalidArgument, c.OwnerWait)
	case c.SweepEvery < 0:
		return c, fmt.Errorf("%w: cluster.Config: SweepEvery %v is negative", actorlimit.ErrInvalidArgument, c.SweepEvery)
	case c.Port < 0 || c.Port > 65535:
		return c, fmt.Errorf("%w: cluster.Config: Port %d is not a port", actorlimit.ErrInvalidArgument, c.Port)
	case len(c.PartitionKey) > 0 && len(c.PartitionKey) < MinPartitionKeyLen:
		return c, fmt.Errorf("%w: cluster.Config: PartitionKey is %d bytes, shorter than %d", actorlimit.ErrInvalidArgument, len(c.PartitionKey), MinPartitionKeyLen)
	case len(c.PartitionKey) == 0 && c.Host != "" && !isLoopback(c.Host):
		return c, fmt.Errorf("%w: cluster.Config: PartitionKey is empty and Host %q is not loopback: give every member the same random key of at least %d bytes", actorlimit.ErrInvalidArgument, c.Host, MinPartitionKeyLen)
	case c.TLS == nil && !c.TrustedNetwork && c.Host != "" && !isLoopback(c.Host):
		return c, fmt.Errorf("%w: cluster.Config: TLS is nil and Host %q is not loopback: anyone who reaches the member's port could reset keys and take partitions; set TLS (certificates from the members' CA), or TrustedNetwork when only the members can reach their ports", actorlimit.ErrInvalidArgument, c.Host)
	}
	if err := c.checkAdvertise(); err != nil {
		return c, err
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if len(c.PartitionKey) == 0 {
		c.PartitionKey = defaultPartitionKey(c.Name)
	}
	if c.AutoManaged != nil && c.AutoManaged.Refresh == 0 {
		am := *c.AutoManaged
		am.Refresh = DefaultAutoManagedRefresh
		c.AutoManaged = &am
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Lookup == nil {
		c.Lookup = disthash.New()
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.SyncEvery == 0 {
		c.SyncEvery = DefaultSyncEvery
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	switch {
	case c.OwnerWait == 0:
		c.OwnerWait = min(DefaultOwnerWait, c.RequestTimeout/2)
		c.ownerWaitAuto = true
	case c.OwnerWait >= c.RequestTimeout:
		return c, fmt.Errorf("%w: cluster.Config: OwnerWait %v is not shorter than RequestTimeout %v", actorlimit.ErrInvalidArgument, c.OwnerWait, c.RequestTimeout)
	}
	if c.DeadAfter == 0 {
		c.DeadAfter = DefaultDeadAfter
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultMaxEntries
	}
	if c.MaxCopies == 0 {
		c.MaxCopies = DefaultMaxCopies
	}
	if c.SweepEvery == 0 {
		c.SweepEvery = DefaultSweepEvery
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// syncTimeout bounds one request of a sync: 4 × SyncEvery, at least
// 100 ms, at most RequestTimeout.
func (c Config) syncTimeout() time.Duration {
	return min(c.RequestTimeout, max(4*c.SyncEvery, 100*time.Millisecond))
}

// wallClock is the default clock.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) NewTicker(d time.Duration) actorlimit.Ticker { return wallTicker{time.NewTicker(d)} }

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time { return w.t.C }
func (w wallTicker) Stop()               { w.t.Stop() }
