//go:build !race

package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// startTLSMembers starts one member for each of settings, in one cluster,
// each with its own certificate, and waits until each sees them all.
func startTLSMembers(t *testing.T, base cluster.Config, settings ...*cluster.TLS) []*cluster.Member {
	t.Helper()
	agent := test.NewInMemAgent()
	members := make([]*cluster.Member, len(settings))
	errs := make([]error, len(settings))
	var wg sync.WaitGroup
	for i, s := range settings {
		wg.Go(func() {
			cfg := base
			cfg.Name = "test-" + t.Name()
			if cfg.PartitionKey == nil {
				cfg.PartitionKey = cluster.TestPartitionKey // cluster.Partition places ids as these members do
			}
			cfg.Provider = test.NewTestProvider(agent)
			cfg.TLS = s
			members[i], errs[i] = cluster.Start(cfg)
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "member %d", i)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Go(func() { _ = m.Close() })
		}
		wg.Wait()
	})
	waitMembers(t, members, len(members))
	return members
}

// TestTLSMembers: two members with certificates from the members' CA find
// each other and decide together: in Owner mode every check of a key goes
// to its one owner, so the limit holds across both.
func TestTLSMembers(t *testing.T) {
	ca := newTestCA(t, t.TempDir(), "members")
	members := startTLSMembers(t, cluster.Config{Clock: newFakeClock(), Mode: cluster.Owner},
		ca.issue(t, "a"), ca.issue(t, "b"))
	policy := actorlimit.Policy{Limit: 3, Period: time.Hour}
	ctx := context.Background()
	for i := range 3 {
		d, err := members[i%2].Limiter.Hit(ctx, "k", policy)
		require.NoError(t, err)
		assert.True(t, d.Allowed, "hit %d", i)
	}
	for _, m := range members {
		d, err := m.Limiter.Hit(ctx, "k", policy)
		require.NoError(t, err)
		assert.False(t, d.Allowed, "the owner counted the other member's hits")
	}
}

// outsider is a process with an actor system and protoactor's remote,
// which sends a member messages as a member would; creds is its transport
// (nil: the engine's default insecure one).
type outsider struct{ system *protoactor.ActorSystem }

func newOutsider(t *testing.T, creds []remote.ConfigOption) *outsider {
	t.Helper()
	system := protoactor.NewActorSystem(protoactor.WithLoggerFactory(
		func(*protoactor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, creds...))
	r.Start()
	t.Cleanup(func() { r.Shutdown(false) })
	return &outsider{system: system}
}

// send sends msg to the member at addr and returns its answer.
func (o *outsider) send(addr string, msg any, timeout time.Duration) (any, error) {
	return o.system.Root.RequestFuture(protoactor.NewPID(addr, cluster.SyncActor), msg, timeout).Result()
}

// tlsOptions are the remote's options of a process holding s's certificate.
func tlsOptions(t *testing.T, s *cluster.TLS) []remote.ConfigOption {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
	require.NoError(t, err)
	caPEM, err := os.ReadFile(s.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	server := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	client := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool}
	return []remote.ConfigOption{
		remote.WithServerOptions(grpc.Creds(credentials.NewTLS(server))),
		remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(client))),
	}
}

// TestTLSRefusesOutsiders: a process that is not a member (no
// certificate, or one from another CA) reaches a member's port and sends
// each kind of message a member takes: none is answered, and nothing
// changes: the keys' counts and the member's counters. A process with a
// certificate from the members' CA is answered (the messages are ones a
// member acts on).
func TestTLSRefusesOutsiders(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "members")
	clock := newFakeClock()
	m := startTLSMembers(t, cluster.Config{Clock: clock, Partitions: 16}, ca.issue(t, "m"))[0]
	ctx := context.Background()
	policy := actorlimit.Policy{Limit: 2, Period: time.Hour}
	for range 2 {
		d, err := m.Limiter.Hit(ctx, "victim", policy)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	window := clock.Now().UnixNano() / int64(time.Hour)
	part := func(id string) uint32 { return uint32(m.PartitionOf(id)) }
	reset := &clusterpb.DecideRequest{Partition: part("victim"), Checks: []*clusterpb.Check{
		{Op: 2, Id: "victim", PeriodNs: int64(time.Hour), Limit: 2, N: 1}}}
	messages := map[string]any{
		"reset": reset,
		"sync": &clusterpb.SyncRequest{Node: "127.0.0.1:1", Parts: []*clusterpb.PartSync{{Partition: part("other"),
			Totals: []*clusterpb.Total{{Id: "other", PeriodNs: int64(time.Hour), Window: window, Hits: 1000, Epoch: 1, Last: clock.Now().UnixNano()}}}}},
		"hand-off": &clusterpb.HandOff{From: "127.0.0.1:1", Parts: []*clusterpb.PartState{{Partition: part("third"),
			Windows: []*clusterpb.Window{{Id: "third", PeriodNs: int64(time.Hour), Window: window, Sum: 1000,
				Nodes: []*clusterpb.NodeTotal{{Node: "127.0.0.1:1", Epoch: 1, Hits: 1000}}}}}}},
		"backup": &clusterpb.HandOff{From: "127.0.0.1:1", Backup: true, Parts: []*clusterpb.PartState{{Partition: part("third")}}},
		"ask":    &clusterpb.HandOff{From: "127.0.0.1:1", Ask: true, Parts: []*clusterpb.PartState{{Partition: 0}}},
	}
	type state struct {
		remaining map[string]int64
		stats     cluster.SyncStats
	}
	read := func() state {
		s := state{remaining: map[string]int64{}}
		for _, id := range []string{"victim", "other", "third"} {
			d, err := m.Limiter.Peek(ctx, id, policy)
			require.NoError(t, err)
			s.remaining[id] = d.Remaining
		}
		s.stats = m.SyncStats()
		return s
	}
	before := read()
	require.Equal(t, map[string]int64{"victim": 0, "other": 2, "third": 2}, before.remaining)

	other := newTestCA(t, dir, "others")
	for name, creds := range map[string][]remote.ConfigOption{
		"no certificate":            nil,
		"certificate of another CA": tlsOptions(t, other.issue(t, "intruder")),
	} {
		t.Run(name, func(t *testing.T) {
			o := newOutsider(t, creds)
			var wg sync.WaitGroup
			for kind, msg := range messages {
				wg.Go(func() {
					resp, err := o.send(m.Address(), msg, 500*time.Millisecond)
					assert.Error(t, err, "%s answered: %v", kind, resp)
				})
			}
			wg.Wait()
			assert.Equal(t, before, read(), "nothing changed")
		})
	}

	t.Run("certificate of the members' CA", func(t *testing.T) {
		o := newOutsider(t, tlsOptions(t, ca.issue(t, "control")))
		resp, err := o.send(m.Address(), reset, 5*time.Second)
		require.NoError(t, err)
		assert.IsType(t, &clusterpb.DecideReply{}, resp)
		d, err := m.Limiter.Peek(ctx, "victim", policy)
		require.NoError(t, err)
		assert.Equal(t, int64(2), d.Remaining, "a member's reset is taken")
	})
}
