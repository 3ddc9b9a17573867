//go:build !race

package cluster_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// TestHealthFrozenKeepsPlace: 3 automanaged members, DeadAfter 10 s; the
// third member's health endpoint stops answering for 5 s (it holds every
// request; longer than a poll's timeout, shorter than DeadAfter). The
// others list it all along (the engine's own provider, with its fixed 2 s
// timeout, dropped it after 2 s, and blocked it for good); and after the
// freeze they still do. A member whose endpoint is refused (closed) is
// dropped at once: TestMemberLeaves and the process tests.
func TestHealthFrozenKeepsPlace(t *testing.T) {
	ports := testkit.FreePorts(t, 3)
	hosts := make([]string, 3)
	for i, p := range ports {
		hosts[i] = fmt.Sprint("127.0.0.1:", p)
	}
	var frozen atomic.Bool
	thaw := make(chan struct{})
	members := make([]*cluster.Member, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() {
			cfg := cluster.Config{
				Name: "test-" + t.Name(), PartitionKey: cluster.TestPartitionKey, Partitions: 64,
				DeadAfter:   10 * time.Second,
				AutoManaged: &cluster.AutoManaged{Port: ports[i], Hosts: hosts},
			}
			if i == 2 {
				cfg = cluster.WithHealthHold(cfg, func() {
					if frozen.Load() {
						<-thaw
					}
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
	frozen.Store(true)
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		for i, m := range members[:2] {
			require.Contains(t, m.Members(), members[2].Address(), "member %d dropped the frozen member after %v", i, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
	frozen.Store(false)
	close(thaw)
	time.Sleep(time.Second) // a few polls after the thaw
	for i, m := range members[:2] {
		assert.Contains(t, m.Members(), members[2].Address(), "member %d after the thaw", i)
	}
}
