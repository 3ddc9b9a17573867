package cluster_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestLocalFirstOwnerAppliesOwnHitsDirectly: a member that owns a
// partition puts its own hits into the owner's state as it counts them,
// with no sync: another member's first sync learns them, and the owner
// learns the others' hits from their syncs without one of its own.
func TestLocalFirstOwnerAppliesOwnHitsDirectly(t *testing.T) {
	d := newDetached(t, 2, newFakeClock())
	p := actorlimit.Policy{Limit: 10, Period: time.Minute}
	d.own(0, cluster.Partition("k", 16))
	assert.Equal(t, 5, d.hit(t, 0, "k", p, 5))
	d.hit(t, 1, "k", p, 1)
	d.members[1].SyncNow()
	assert.EqualValues(t, 6, peekCount(t, d.members[1], "k", p).Count, "member 0's hits were in the owner's state")
	assert.EqualValues(t, 6, peekCount(t, d.members[0], "k", p).Count, "member 0 reads the owner's state")
	before := d.sends.Load()
	d.members[0].SyncNow()
	assert.Equal(t, before, d.sends.Load(), "the owner sends nothing")
	assert.Equal(t, 4, d.hit(t, 0, "k", p, 5))
}

// batchedCluster is n detached members that own the partitions between
// them (partition p by member p mod n, except those in unowned) and send
// their syncs batched per owner member.
type batchedCluster struct {
	*detachedCluster
	batches atomic.Int64
}

func newBatched(t *testing.T, n int, clock *fakeClock, unowned ...int) *batchedCluster {
	t.Helper()
	cfg := cluster.Config{Clock: clock, Partitions: 16}
	b := &batchedCluster{detachedCluster: &detachedCluster{owners: cluster.NewOwners(cfg)}}
	byAddr := make(map[string]*cluster.Member)
	ownerOf := func(p int) string { return fmt.Sprintf("node-%d", p%n) }
	sendTo := func(addr string, msg any) (any, error) {
		b.batches.Add(1)
		return wire(t, byAddr[addr].HandleSync(wire(t, msg))), nil
	}
	for i := range n {
		m, err := cluster.DetachedBatched(cfg, fmt.Sprintf("node-%d", i), b.send(t), ownerOf, sendTo)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		b.members = append(b.members, m)
		byAddr[m.Address()] = m
	}
	for p := range 16 {
		if !contains(unowned, p) {
			b.own(p%n, p)
		}
	}
	return b
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// idsByPartition returns one id for each of 16 partitions.
func idsByPartition(t *testing.T) []string {
	t.Helper()
	ids := make([]string, 16)
	found := 0
	for i := 0; found < 16; i++ {
		id := fmt.Sprintf("id:%d", i)
		if p := cluster.Partition(id, 16); ids[p] == "" {
			ids[p] = id
			found++
		}
		require.Less(t, i, 10_000)
	}
	return ids
}

// TestLocalFirstSyncBatchedPerOwner: a sync sends one request per member
// that owns partitions, whatever the number of partitions; the partitions
// the member owns take its totals directly; a partition whose grain does
// not run where the member expected (partition 1 here) is sent to its
// grain instead.
func TestLocalFirstSyncBatchedPerOwner(t *testing.T) {
	b := newBatched(t, 3, newFakeClock(), 1)
	p := actorlimit.Policy{Limit: 10, Period: time.Minute}
	ids := idsByPartition(t)
	for _, id := range ids {
		b.hit(t, 0, id, p, 2)
	}
	b.members[0].SyncNow()
	assert.EqualValues(t, 2, b.batches.Load(), "one request to each other member")
	assert.EqualValues(t, 1, b.sends.Load(), "and one to partition 1's grain")
	for part, id := range ids {
		if part != 1 {
			owner := b.members[part%3]
			assert.EqualValues(t, 2, peekCount(t, owner, id, p).Count, "%s (partition %d) at its owner", id, part)
		}
	}
	b.hit(t, 2, ids[1], p, 1)
	b.members[2].SyncNow()
	assert.EqualValues(t, 3, peekCount(t, b.members[2], ids[1], p).Count, "partition 1's grain has member 0's 2")
	b.hit(t, 1, ids[2], p, 1) // partition 2 is member 2's
	b.members[1].SyncNow()
	b.members[0].SyncNow()
	assert.EqualValues(t, 3, peekCount(t, b.members[0], ids[2], p).Count)
}
