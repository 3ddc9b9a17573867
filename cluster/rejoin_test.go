//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// rejoinCallBound is the longest a check may take at any member while one
// rejoins: RequestTimeout (1 s), as during any member's join (a check of a
// partition on its way to the member waits for it, RequestTimeout at
// most), and 250 ms for a loaded machine. The rejoining member itself
// decides on its own at once, or after OwnerWait before it saw it was
// dropped.
const rejoinCallBound = cluster.DefaultRequestTimeout + 250*time.Millisecond

// TestBlockedMemberRejoins: 3 automanaged members in one process, each
// hitting ids from a few goroutines; the other two block the third's system
// id, as the engine does with a member silent for longer than DeadAfter.
// The third sees it on their health endpoints and rejoins under a new id:
// both others list it again, its SyncStats count one rejoin, it owns
// partitions again, and no check at any member fails or takes longer than
// rejoinCallBound. With close=rejoining, the third is closed while it
// rejoins: Close returns within 3 s and the others drop it.
func TestBlockedMemberRejoins(t *testing.T) {
	tests := []struct {
		name  string
		mode  cluster.Mode
		close bool
	}{
		{"mode=LocalFirst", cluster.LocalFirst, false},
		{"mode=Owner", cluster.Owner, false},
		{"mode=Owner/close=rejoining", cluster.Owner, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { testBlockedMemberRejoins(t, tt.mode, tt.close) })
	}
}

func testBlockedMemberRejoins(t *testing.T, mode cluster.Mode, closeEarly bool) {
	ports := testkit.FreePorts(t, 3)
	hosts := make([]string, 3)
	for i, p := range ports {
		hosts[i] = fmt.Sprint("127.0.0.1:", p)
	}
	members := make([]*cluster.Member, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() {
			members[i], errs[i] = cluster.Start(cluster.Config{
				Name: "test-rejoin", PartitionKey: cluster.TestPartitionKey, Partitions: 64,
				DeadAfter: 3 * time.Second, Mode: mode,
				AutoManaged: &cluster.AutoManaged{Port: ports[i], Hosts: hosts},
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "member %d", i)
	}
	var closed [3]atomic.Bool
	t.Cleanup(func() {
		for i, m := range members {
			if !closed[i].Load() {
				wg.Go(func() { _ = m.Close() })
			}
		}
		wg.Wait()
	})
	waitMembers(t, members, 3)
	victim := members[2]

	stop := make(chan struct{})
	var (
		callers sync.WaitGroup
		mu      sync.Mutex
		callErr []error
		slowest time.Duration
	)
	for i, m := range members {
		for g := range 3 {
			callers.Go(func() {
				p := actorlimit.Policy{Limit: 1 << 30, Period: time.Second}
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
					if closeEarly && i == 2 && closed[2].Load() {
						continue
					}
					start := time.Now()
					_, err := m.Limiter.Hit(context.Background(), fmt.Sprintf("id-%d-%d", g, n%50), p)
					took := time.Since(start)
					mu.Lock()
					slowest = max(slowest, took)
					if err != nil && !(closeEarly && i == 2) {
						callErr = append(callErr, fmt.Errorf("member %d: %w", i, err))
					}
					mu.Unlock()
				}
			})
		}
	}
	time.Sleep(300 * time.Millisecond) // calls before the block
	oldID := victim.SystemID()
	for _, m := range members[:2] {
		m.Block(oldID)
	}
	blocked := time.Now()
	deadline := time.Now().Add(20 * time.Second)
	if closeEarly {
		for victim.SyncStats().Rejoins == 0 {
			require.True(t, time.Now().Before(deadline), "the blocked member never began to rejoin")
			time.Sleep(time.Millisecond)
		}
		closed[2].Store(true)
		start := time.Now()
		require.NoError(t, victim.Close())
		took := time.Since(start)
		t.Logf("Close during the rejoin took %v", took.Round(time.Millisecond))
		assert.Less(t, took, 3*time.Second, "Close during the rejoin")
		for _, m := range members[:2] {
			for slices.Contains(m.Members(), victim.Address()) {
				require.True(t, time.Now().Before(deadline), "%s still lists the closed member", m.Address())
				time.Sleep(10 * time.Millisecond)
			}
		}
	} else {
		for i, m := range members[:2] {
			for !slices.Contains(m.Members(), victim.Address()) || len(m.Members()) != 3 || victim.SystemID() == oldID {
				require.True(t, time.Now().Before(deadline), "member %d lists %v; the blocked member's id %s (was %s)",
					i, m.Members(), victim.SystemID(), oldID)
				time.Sleep(10 * time.Millisecond)
			}
		}
		t.Logf("listed again %v after the block", time.Since(blocked).Round(time.Millisecond))
		for victim.OwnedParts() == 0 {
			require.True(t, time.Now().Before(deadline), "the rejoined member owns no partition")
			time.Sleep(10 * time.Millisecond)
		}
		assert.Equal(t, uint64(1), victim.SyncStats().Rejoins, "rejoins")
		time.Sleep(300 * time.Millisecond) // calls after the rejoin
	}
	close(stop)
	callers.Wait()
	assert.Empty(t, callErr, "callers' errors")
	t.Logf("the slowest check took %v", slowest.Round(time.Millisecond))
	assert.Less(t, slowest, rejoinCallBound, "the slowest check")
}
