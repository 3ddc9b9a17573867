//go:build !race

package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
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
	// The remote's connections are recorded and closed after it: a bare
	// remote's Shutdown leaves them open, retrying.
	var conns grpcConns
	t.Cleanup(conns.close)
	record := func(c *remote.Config) { c.DialOptions = append(c.DialOptions, conns.dialOptions()...) }
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", 0, append(creds, record)...))
	r.Start()
	t.Cleanup(func() { r.Shutdown(false) })
	return &outsider{system: system}
}

// send sends msg to the member at addr and returns its answer.
func (o *outsider) send(addr string, msg any, timeout time.Duration) (any, error) {
	return o.system.Root.RequestFuture(protoactor.NewPID(addr, cluster.SyncActor), msg, timeout).Result()
}

// outsiderTLS are the remote's options of a process that dials the
// members trusting the CA in trust ("": in plaintext), presenting the
// certificate of client when not nil, and whose server, which the member
// dials to answer, presents server's certificate (nil: plaintext).
func outsiderTLS(t *testing.T, trust string, client, server *cluster.TLS) []remote.ConfigOption {
	t.Helper()
	load := func(s *cluster.TLS) []tls.Certificate {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		require.NoError(t, err)
		return []tls.Certificate{cert}
	}
	var opts []remote.ConfigOption
	if server != nil {
		opts = append(opts, remote.WithServerOptions(grpc.Creds(credentials.NewTLS(
			&tls.Config{MinVersion: tls.VersionTLS13, Certificates: load(server)}))))
	}
	if trust != "" {
		caPEM, err := os.ReadFile(trust)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(caPEM))
		c := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
		if client != nil {
			c.Certificates = load(client)
		}
		opts = append(opts, remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(c))))
	}
	return opts
}

// Changes of a member's certificate template.
var (
	expired = func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	}
	notYet = func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	}
	misnamed = func(c *x509.Certificate) {
		c.IPAddresses, c.DNSNames = []net.IP{net.ParseIP("10.9.9.9")}, []string{"elsewhere.example"}
	}
	serverOnly = func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }
)

// TestTLSRefusesOutsiders: a process that is not a member reaches a
// member's port and sends each kind of message a member takes: in
// plaintext; over TLS, trusting the members' CA, with no certificate, one
// of another CA, or one of the members' CA that has expired, is not yet
// valid, or is not for clients. None is answered, and nothing changes:
// the keys' counts and the member's counters. A process with a
// certificate from the members' CA is answered (the messages are ones a
// member acts on).
//
// The member's dialling side checks too: a process the member takes
// messages from (its certificate is of the members' CA) but whose own
// server presents a certificate of another CA, expired, not yet valid,
// or for another name gets no answer (the member does not dial it), though
// its message is taken.
func TestTLSRefusesOutsiders(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "members")
	clock := newFakeClock()
	m := startTLSMembers(t, cluster.Config{Clock: clock, Partitions: 16}, ca.issue(t, "m"))[0]
	ctx := context.Background()
	policy := actorlimit.Policy{Limit: 2, Period: time.Hour}
	spend := func(id string) {
		for range 2 {
			d, err := m.Limiter.Hit(ctx, id, policy)
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
	}
	spend("victim")
	window := clock.Now().UnixNano() / int64(time.Hour)
	part := func(id string) uint32 { return uint32(m.PartitionOf(id)) }
	resetOf := func(id string) *clusterpb.DecideRequest {
		return &clusterpb.DecideRequest{Partition: part(id), Checks: []*clusterpb.Check{
			{Op: 2, Id: id, PeriodNs: int64(time.Hour), Limit: 2, N: 1}}}
	}
	messages := map[string]any{
		"reset": resetOf("victim"),
		"sync": &clusterpb.SyncRequest{Node: "127.0.0.1:1", Parts: []*clusterpb.PartSync{{Partition: part("other"),
			Totals: []*clusterpb.Total{{Id: "other", PeriodNs: int64(time.Hour), Window: window, Hits: 1000, Epoch: 1, Last: clock.Now().UnixNano()}}}}},
		"hand-off": &clusterpb.HandOff{From: "127.0.0.1:1", Parts: []*clusterpb.PartState{{Partition: part("third"),
			Windows: []*clusterpb.Window{{Id: "third", PeriodNs: int64(time.Hour), Window: window, Sum: 1000,
				Nodes: []*clusterpb.NodeTotal{{Node: "127.0.0.1:1", Epoch: 1, Hits: 1000}}}}}}},
		"backup": &clusterpb.HandOff{From: "127.0.0.1:1", Backup: true, Parts: []*clusterpb.PartState{{Partition: part("third")}}},
		"ask":    &clusterpb.HandOff{From: "127.0.0.1:1", Ask: true, Parts: []*clusterpb.PartState{{Partition: 0}}},
	}
	remaining := func(id string) int64 {
		d, err := m.Limiter.Peek(ctx, id, policy)
		require.NoError(t, err)
		return d.Remaining
	}
	type state struct {
		remaining map[string]int64
		stats     cluster.SyncStats
	}
	read := func() state {
		s := state{remaining: map[string]int64{}}
		for _, id := range []string{"victim", "other", "third"} {
			s.remaining[id] = remaining(id)
		}
		s.stats = m.SyncStats()
		return s
	}
	before := read()
	require.Equal(t, map[string]int64{"victim": 0, "other": 2, "third": 2}, before.remaining)

	other := newTestCA(t, dir, "others")
	// The outsiders' own servers present a member's certificate, so that
	// an answer would reach them if the member took their messages.
	server := ca.issue(t, "outsider-server")
	for _, tt := range []struct {
		name  string
		creds []remote.ConfigOption
	}{
		{"plaintext", nil},
		{"trusts the members' CA, no certificate", outsiderTLS(t, ca.caFile, nil, server)},
		{"trusts the members' CA, certificate of another CA", outsiderTLS(t, ca.caFile, other.issue(t, "intruder"), server)},
		{"trusts the members' CA, expired certificate of it", outsiderTLS(t, ca.caFile, ca.issueWith(t, "expired", expired), server)},
		{"trusts the members' CA, not yet valid certificate of it", outsiderTLS(t, ca.caFile, ca.issueWith(t, "early", notYet), server)},
		{"trusts the members' CA, certificate of it not for clients", outsiderTLS(t, ca.caFile, ca.issueWith(t, "server-only", serverOnly), server)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := newOutsider(t, tt.creds)
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

	member := ca.issue(t, "control")
	for _, tt := range []struct {
		name     string
		server   *cluster.TLS
		answered bool
	}{
		{"the member dials a server of another CA", other.issueWith(t, "other-server", nil), false},
		{"the member dials a server whose certificate expired", ca.issueWith(t, "expired-server", expired), false},
		{"the member dials a server whose certificate is not yet valid", ca.issueWith(t, "early-server", notYet), false},
		{"the member dials a server whose certificate names another host", ca.issueWith(t, "misnamed-server", misnamed), false},
		{"certificates of the members' CA", ca.issue(t, "control-server"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := "key of " + tt.name
			spend(id)
			o := newOutsider(t, outsiderTLS(t, ca.caFile, member, tt.server))
			resp, err := o.send(m.Address(), resetOf(id), 2*time.Second)
			if tt.answered {
				require.NoError(t, err)
				assert.IsType(t, &clusterpb.DecideReply{}, resp)
			} else {
				assert.Error(t, err, "answered: %v", resp)
			}
			require.Eventually(t, func() bool { return remaining(id) == 2 }, 5*time.Second, 10*time.Millisecond,
				"the member takes the reset of a process with its CA's certificate")
		})
	}
}
