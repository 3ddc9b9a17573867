//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
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
)

// startEtcd runs a real etcd server on free loopback ports until the test
// ends and returns its client address. Without an etcd binary it skips,
// unless CI is set: then it fails.
func startEtcd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("etcd is not installed, and CI is set (Debian: apt-get install etcd-server)")
		}
		t.Skip("etcd is not installed (Debian: apt-get install etcd-server); CI unset, so skipping")
	}
	ports := freePorts(t, 2)
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cmd := exec.Command(bin, "--name=test", "--data-dir="+t.TempDir(),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=test="+peer, "--log-level=error")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]), time.Second)
		if err == nil {
			_ = c.Close()
			return client
		}
		require.True(t, time.Now().Before(deadline), "etcd did not listen: %v", err)
		time.Sleep(50 * time.Millisecond) // etcd starting, not a window passing
	}
}

// TestEtcdRegistry: 3 members that find each other through a real etcd
// server, in Owner mode (Strict: three members in one process on a loaded
// machine): exact counts across members under concurrent callers.
func TestEtcdRegistry(t *testing.T) {
	endpoint := startEtcd(t)
	clock := newFakeClock()
	members := make([]*cluster.Member, 3)
	for i := range members {
		provider, err := etcd.NewWithConfig("/actorlimit-test", clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
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
