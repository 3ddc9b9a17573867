//go:build !race

package cluster_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// forwarder is a TCP port forward, as a NAT or a proxy in front of a
// member would be: it listens on one address and copies every connection
// to another, counting the connections it carried.
type forwarder struct {
	l     net.Listener
	to    string
	conns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	open  []net.Conn
}

// newForwarder forwards listen (host:port, port 0 for any) to to.
func newForwarder(t *testing.T, listen, to string) *forwarder {
	t.Helper()
	l, err := net.Listen("tcp", listen)
	require.NoError(t, err)
	f := &forwarder{l: l, to: to}
	f.wg.Go(f.serve)
	t.Cleanup(f.close)
	return f
}

func (f *forwarder) serve() {
	for {
		in, err := f.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", f.to)
		if err != nil {
			_ = in.Close()
			continue
		}
		f.conns.Add(1)
		f.mu.Lock()
		f.open = append(f.open, in, out)
		f.mu.Unlock()
		for _, pair := range [][2]net.Conn{{in, out}, {out, in}} {
			f.wg.Go(func() {
				_, _ = io.Copy(pair[0], pair[1])
				_ = pair[0].Close()
				_ = pair[1].Close()
			})
		}
	}
}

// close stops the forward and ends the connections it carries.
func (f *forwarder) close() {
	_ = f.l.Close()
	f.mu.Lock()
	for _, c := range f.open {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// addr is the forward's address: the member's advertised one.
func (f *forwarder) addr() string { return f.l.Addr().String() }

// TestAdvertise: a member listens on 127.0.0.1 and is advertised at
// 127.0.0.2 (all of 127.0.0.0/8 is loopback on Linux), where a forwarder
// carries the connections to it. The others list it, and dial it, at the
// advertised address only: its own address is nowhere in their views, the
// forwarder carries a connection from each of them, and checks in Owner
// mode through it are exact. With TLS, the member's certificate names
// 127.0.0.2; one that names only 127.0.0.1 is refused at Start with an
// error naming the advertised host.
func TestAdvertise(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		t.Run("tls="+strconv.FormatBool(withTLS), func(t *testing.T) { testAdvertise(t, withTLS) })
	}
}

func testAdvertise(t *testing.T, withTLS bool) {
	ports := testkit.FreePorts(t, 1)
	hidden := "127.0.0.1:" + strconv.Itoa(ports[0])
	fwd := newForwarder(t, "127.0.0.2:0", hidden)
	var ca *testCA
	if withTLS {
		ca = newTestCA(t, t.TempDir(), "members")
		bad := ca.issue(t, "only-loopback")
		_, err := cluster.Start(cluster.Config{
			Name: "bad-" + t.Name(), Provider: test.NewTestProvider(test.NewInMemAgent()),
			Port: ports[0], Advertise: fwd.addr(), TLS: bad, PartitionKey: cluster.TestPartitionKey,
		})
		require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
		require.ErrorContains(t, err, `advertised host "127.0.0.2"`)
	}
	agent := test.NewInMemAgent()
	members := make([]*cluster.Member, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() {
			cfg := cluster.Config{
				Name: "test-" + t.Name(), Provider: test.NewTestProvider(agent),
				PartitionKey: cluster.TestPartitionKey, Partitions: 64, Mode: cluster.Owner, Strict: true,
			}
			if i == 0 {
				cfg.Port, cfg.Advertise = ports[0], fwd.addr()
			}
			if withTLS {
				cfg.TLS = ca.issueWith(t, fmt.Sprint("m", i), func(c *x509.Certificate) {
					c.IPAddresses = append(c.IPAddresses, net.ParseIP("127.0.0.2"))
				})
			}
			members[i], errs[i] = cluster.Start(cfg)
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "member %d", i)
	}
	t.Cleanup(func() {
		for _, m := range members {
			wg.Go(func() { _ = m.Close() })
		}
		wg.Wait()
	})
	waitMembers(t, members, 3)
	require.Equal(t, fwd.addr(), members[0].Address())
	for i, m := range members {
		assert.Contains(t, m.Members(), fwd.addr(), "member %d", i)
		assert.NotContains(t, m.Members(), hidden, "member %d", i)
	}
	// Ids owned by the advertised member, hit from the others: exact.
	p := actorlimit.Policy{Limit: 3, Period: time.Minute}
	owned := 0
	for i := 0; owned < 8; i++ {
		id := fmt.Sprint("adv:", i)
		if members[1].OwnerOf(id) != fwd.addr() {
			continue
		}
		owned++
		for j, want := range []bool{true, true, true, false} {
			res, err := members[1+j%2].Limiter.Hit(context.Background(), id, p)
			require.NoError(t, err)
			assert.Equal(t, want, res.Allowed, "%s hit %d", id, j)
		}
	}
	assert.GreaterOrEqual(t, fwd.conns.Load(), int64(2), "connections through the advertised address")
}

// TestAdvertiseConfig: a bad Advertise is refused with an error naming it.
func TestAdvertiseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, advertise, want string
	}{
		{"no port", "127.0.0.2", "not host:port"},
		{"no host", ":7000", "has no host"},
		{"port zero", "127.0.0.2:0", "not from 1 to 65535"},
		{"port too big", "127.0.0.2:70000", "not from 1 to 65535"},
		{"unspecified", "0.0.0.0:7000", "no address the others can reach"},
		{"beyond loopback without TLS", "10.1.2.3:7000", "not loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cluster.Start(cluster.Config{Provider: noProvider{}, Advertise: tc.advertise})
			require.Error(t, err)
			assert.True(t, errors.Is(err, actorlimit.ErrInvalidArgument), "%v", err)
			assert.ErrorContains(t, err, tc.want)
			assert.ErrorContains(t, err, "Advertise")
		})
	}
}
