//go:build !race

package cluster_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/cluster"
)

// lateRegistry is the engine's test provider with a registry that does
// not drop a member that leaves: it still lists it until the test ends,
// as a registry slow to act on a deregistration would.
type lateRegistry struct {
	*test.Provider
	mu   sync.Mutex
	left bool
}

func (p *lateRegistry) Shutdown(bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left = true
	return nil
}

// drop deregisters the member if it left.
func (p *lateRegistry) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left {
		_ = p.Provider.Shutdown(true)
	}
}

// TestMemberLeavesThroughGossip: a member that closes while the registry
// still lists it leaves the other members' lists all the same, through
// the gossip, long before they would take it for dead (DeadAfter): its
// close carries its graceful leave out before its gossip stops.
func TestMemberLeavesThroughGossip(t *testing.T) {
	agent := test.NewInMemAgent()
	members := make([]*cluster.Member, 3)
	providers := make([]*lateRegistry, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range members {
		providers[i] = &lateRegistry{Provider: test.NewTestProvider(agent)}
		wg.Go(func() {
			members[i], errs[i] = cluster.Start(cluster.Config{
				Name: "test-" + t.Name(), Clock: newFakeClock(), Provider: providers[i],
				PartitionKey: cluster.TestPartitionKey, DeadAfter: time.Hour,
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "member %d", i)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for i, m := range members {
			wg.Go(func() { _ = m.Close(); providers[i].drop() })
		}
		wg.Wait()
	})
	waitMembers(t, members, 3)
	leaver := members[2]
	require.NoError(t, leaver.Close())
	waitMembers(t, members[:2], 2)
	for _, m := range members[:2] {
		require.NotContains(t, m.Members(), leaver.Address(), fmt.Sprint("at ", m.Address()))
	}
}
