//go:build !race

package cluster_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// TestEtcdRegistry: 3 members that find each other through a real etcd
// server, in Owner mode (Strict: three members in one process on a loaded
// machine): exact counts across members under concurrent callers.
func TestEtcdRegistry(t *testing.T) {
	endpoint := testkit.StartEtcd(t)
	clock := newFakeClock()
	members := make([]*cluster.Member, 3)
	// protoactor's etcd provider never closes the etcd client it makes:
	// its connections are closed here, after the members (cleanups run
	// last registered first), or they outlive the test, retrying.
	var conns grpcConns
	t.Cleanup(conns.close)
	for i := range members {
		provider, err := etcd.NewWithConfig("/actorlimit-test", clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second,
			DialOptions: conns.dialOptions()})
		require.NoError(t, err)
		m, err := cluster.Start(cluster.Config{Name: "etcd-test", Provider: provider, Mode: cluster.Owner, Clock: clock, Strict: true})
		require.NoError(t, err)
		members[i] = m
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Add(1)
			go func() { defer wg.Done(); _ = m.Close() }()
		}
		wg.Wait()
	})
	waitMembers(t, members, 3)
	p := actorlimit.Policy{Limit: 40, Period: time.Minute}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for _, m := range members {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 30 {
					res, err := m.Limiter.Hit(context.Background(), "etcd:hot", p)
					if !assert.NoError(t, err) {
						return
					}
					if res.Allowed {
						allowed.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	assert.EqualValues(t, 40, allowed.Load(), "270 hits offered, exactly the limit allowed")
}
