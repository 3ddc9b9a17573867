//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestMemberKilledUnderLoad: 3 LocalFirst members under load on many ids,
// half of the hits under a fixed window, half under GCRA; one is killed (no goodbye). The survivors' callers get no error and never
// hang; the survivors drop the dead member from their member
// lists; its partitions restart on the survivors and are rebuilt by their
// syncs, so the survivors agree on the counts again.
func TestMemberKilledUnderLoad(t *testing.T) {
	clock := newFakeClock()
	members, agent := startMembersWith(t, 3, cluster.Config{Clock: clock, DeadAfter: 2 * time.Second, RequestTimeout: 300 * time.Millisecond})
	survivors, victim := members[:2], members[2]
	policies := []actorlimit.Policy{
		{Limit: 1 << 30, Period: time.Hour},
		{Algorithm: actorlimit.GCRA, Limit: 1 << 30, Period: time.Hour, Burst: 1 << 30},
	}
	const ids = 64
	var (
		stop    atomic.Bool
		calls   atomic.Int64
		slowest atomic.Int64
		wg      sync.WaitGroup
		errs    = make(chan error, 64)
		// counted[s][i] is how many hits survivor s was answered for id i
		// (under policies[i%2]); each is written by its survivor's caller
		// alone, and read after wg.Wait.
		counted [2][ids]int64
	)
	for k, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				start := time.Now()
				_, err := m.Limiter.Hit(context.Background(), fmt.Sprintf("id:%d", i%ids), policies[i%2])
				if m == victim {
					continue // its own callers may see ErrClosed
				}
				slowest.Store(max(slowest.Load(), int64(time.Since(start))))
				calls.Add(1)
				if err != nil {
					errs <- err
					return
				}
				counted[k][i%ids]++
			}
		}()
	}
	syncs := func() {
		for _, m := range survivors {
			m.SyncNow()
		}
	}
	waitCalls := func(n int64) {
		deadline := time.Now().Add(10 * time.Second)
		for start := calls.Load(); calls.Load() < start+n; {
			require.True(t, time.Now().Before(deadline), "the survivors' callers are stuck")
			syncs()
		}
	}
	waitCalls(1000)
	victim.Kill()
	killed := time.Now()
	deadline := time.Now().Add(20 * time.Second)
	for {
		syncs()
		gone := true
		for _, m := range survivors {
			gone = gone && len(m.Members()) == 2
		}
		if gone {
			break
		}
		require.True(t, time.Now().Before(deadline), "the dead member is still listed: %v", survivors[0].Members())
	}
	t.Logf("dead member dropped after %v (DeadAfter 2s)", time.Since(killed).Round(10*time.Millisecond))
	// The registry drops the member whose TTL lapsed (etcd and Consul do it
	// by themselves; the engine's in-memory test agent has no TTLs), and
	// its partitions move to the survivors.
	agent.DeregisterService(victim.SystemID())
	waitCalls(1000)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, calls.Load())
	t.Logf("%d calls on the survivors, slowest %v", calls.Load(), time.Duration(slowest.Load()))
	// The slowest call is logged, not asserted: on a shared 2-CPU machine
	// with three members in one process, scheduling alone can take
	// hundreds of milliseconds. That a check never waits on the network is
	// TestLocalFirstFailedSyncLosesNoHits's: it answers with every owner
	// unreachable.
	// Rebuilt: after syncs on the new topology, both survivors see, for
	// each id, the same count. The limits are never reached and the clock
	// never moves, so every hit counts, and the count holds at least:
	//   - under the fixed window, the hits both survivors were answered
	//     for (the owner adds up the members' totals, which they send the
	//     new owner again; the victim's own may be lost with it);
	//   - under GCRA, the same: the new owner keeps the fuller of the
	//     dead owner's states that the survivors last saw (and its
	//     backup) with every survivor's hits since charged to it, not the
	//     fuller copy alone (which lost the other survivor's hits since
	//     its last answer: TestLocalFirstStatesSurvivorsMerge).
	for range 4 {
		syncs()
	}
	var lost int64
	for i := range ids {
		id, p := fmt.Sprintf("id:%d", i), policies[i%2]
		c0, c1 := counted[0][i], counted[1][i]
		require.Positive(t, c0+c1, "%s: no hit on the survivors", id)
		a := peekCount(t, survivors[0], id, p)
		b := peekCount(t, survivors[1], id, p)
		assert.Equal(t, a.Count, b.Count, "%s %v", id, p.Algorithm)
		if p.Algorithm == actorlimit.FixedWindow {
			assert.GreaterOrEqual(t, a.Count, c0+c1, "%s %v: the survivors counted %d and %d", id, p.Algorithm, c0, c1)
			continue
		}
		assert.GreaterOrEqual(t, a.Count, c0+c1, "%s %v: the survivors counted %d and %d", id, p.Algorithm, c0, c1)
		lost += max(0, c0+c1-a.Count)
	}
	t.Logf("GCRA: %d of the survivors' hits missing from the rebuilt counts", lost)
}

// TestMemberLeaves: a member that closes leaves every other member's list
// (gubernator kept departed members in its peer list), and the others go
// on answering for its partitions.
func TestMemberLeaves(t *testing.T) {
	clock := newFakeClock()
	members := startMembers(t, 3, clock, cluster.Owner)
	require.NoError(t, members[2].Close())
	waitMembers(t, members[:2], 2)
	p := actorlimit.Policy{Limit: 2, Period: time.Minute}
	for i := range 16 {
		id := fmt.Sprintf("left:%d", i)
		for j, want := range []bool{true, true, false} {
			res, err := members[j%2].Limiter.Hit(context.Background(), id, p)
			require.NoError(t, err)
			assert.Equal(t, want, res.Allowed, "%s hit %d", id, j)
		}
	}
}

// TestLocalFirstMembersAgree: 3 real LocalFirst members count hits on ids
// spread over all their partitions; after their syncs (batched per owner
// member, the owners' own hits applied directly) every member sees every
// id's exact total, and the owner of each id's partition sees it without
// a sync of its own.
func TestLocalFirstMembersAgree(t *testing.T) {
	clock := newFakeClock()
	members, _ := startMembersWith(t, 3, cluster.Config{Clock: clock, Partitions: 64})
	p := actorlimit.Policy{Limit: 1000, Period: time.Minute}
	const ids = 200
	ctx := context.Background()
	for i, m := range members {
		for id := range ids {
			for range i + 1 {
				_, err := m.Limiter.Hit(ctx, fmt.Sprintf("agree:%d", id), p)
				require.NoError(t, err)
			}
		}
	}
	for _, m := range members {
		m.SyncNow()
	}
	byAddr := map[string]*cluster.Member{}
	for _, m := range members {
		byAddr[m.Address()] = m
	}
	for id := range ids {
		key := fmt.Sprintf("agree:%d", id)
		owner := byAddr[members[0].OwnerOf(key)]
		require.NotNil(t, owner, key)
		assert.EqualValues(t, 6, peekCount(t, owner, key, p).Count, "%s at its owner", key)
	}
	for _, m := range members {
		m.SyncNow()
	}
	for _, m := range members {
		for id := range ids {
			key := fmt.Sprintf("agree:%d", id)
			assert.EqualValues(t, 6, peekCount(t, m, key, p).Count, "%s at %s", key, m.Address())
		}
	}
}
