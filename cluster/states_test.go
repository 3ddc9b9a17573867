package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// TestLocalFirstStatesOwnerRestartRebuilds: when a partition's owner dies
// its new owner starts empty; the members find out at their next sync and
// send their copies' states whole, and the new owner keeps the fullest, on
// top of which the hits since are charged: the count never drops.
func TestLocalFirstStatesOwnerRestartRebuilds(t *testing.T) {
	for a, p := range others() {
		t.Run(a.String(), func(t *testing.T) {
			d := newDetached(t, 3, newFakeClock())
			for i := range d.members {
				d.hit(t, i, "k", p, 5+i)
			}
			d.syncAll()
			d.syncAll() // every copy holds 18
			d.owners.Drop(cluster.Partition("k", 16))
			for i := range d.members {
				d.hit(t, i, "k", p, 1)
			}
			d.syncAll()
			d.syncAll()
			for i := range d.members {
				assert.EqualValues(t, 21, d.peekCount(t, i, "k", p), "member %d", i)
			}
			assert.EqualValues(t, 1, d.members[0].SyncStats().Rebuilds)
		})
	}
}

// TestLocalFirstStatesAnswerLost: when the owner charged a sync's hits but
// its answer was lost, the member sends them again, and the owner, which
// knows how many of the copy's hits it has charged, charges them once.
func TestLocalFirstStatesAnswerLost(t *testing.T) {
	for a, p := range others() {
		t.Run(a.String(), func(t *testing.T) {
			d := newDetached(t, 2, newFakeClock())
			d.hit(t, 0, "k", p, 4)
			d.lose.Store(true)
			d.members[0].SyncNow()
			d.hit(t, 0, "k", p, 3)
			d.members[0].SyncNow()
			d.lose.Store(false)
			d.members[0].SyncNow()
			d.members[0].SyncNow()
			d.hit(t, 1, "k", p, 1)
			d.members[1].SyncNow()
			assert.EqualValues(t, 8, d.peekCount(t, 1, "k", p), "7 hits of member 0, each charged once, and member 1's")
		})
	}
}

// TestLocalFirstStatesHandOff: a member that owns a partition decides its
// keys on the owner's state itself, exactly; when the partition leaves it
// (its grain stops there), its states go, whole, to the new owner, which
// started empty.
func TestLocalFirstStatesHandOff(t *testing.T) {
	for a, p := range others() {
		t.Run(a.String(), func(t *testing.T) {
			d := newDetached(t, 3, newFakeClock())
			part := cluster.Partition("k", 16)
			release := d.ownWithRelease(0, part)
			assert.Equal(t, 5, d.hit(t, 0, "k", p, 5))
			assert.Equal(t, 2, d.hit(t, 1, "k", p, 2))
			d.members[1].SyncNow()
			assert.EqualValues(t, 7, d.peekCount(t, 0, "k", p), "the owner's own hits, and member 1's")
			assert.EqualValues(t, 7, d.peekCount(t, 1, "k", p))
			release() // the partition moves to the in-memory owners, empty
			d.members[0].SyncNow()
			assert.Equal(t, 1, d.hit(t, 2, "k", p, 1))
			d.members[2].SyncNow()
			assert.EqualValues(t, 8, d.peekCount(t, 2, "k", p), "the new owner has the old one's state")
		})
	}
}

// TestOwnerTakesHostileHits: hits from the network that do not make sense
// (a bad policy, times and counts that do not pair, counts past MaxInt64,
// times in the future) change nothing they should not, panic nothing, and
// are answered as charged, so that the member drops them.
func TestOwnerTakesHostileHits(t *testing.T) {
	clock := newFakeClock()
	owners := cluster.NewOwners(cluster.Config{Clock: clock})
	now := clock.Now().UnixNano()
	gcra := &clusterpb.Check{Algorithm: uint32(actorlimit.GCRA), Id: "k", PeriodNs: int64(time.Minute), Limit: 10, Burst: 10, N: 1}
	for _, tc := range []struct {
		name string
		hits *clusterpb.Hits
		done int64
	}{
		{"no check", &clusterpb.Hits{Epoch: 1, At: []int64{now}, N: []int64{3}}, 3},
		{"bad policy", &clusterpb.Hits{Check: &clusterpb.Check{Algorithm: uint32(actorlimit.GCRA), Id: "k", PeriodNs: -1, Limit: 10, N: 1}, Epoch: 1, At: []int64{now}, N: []int64{3}}, 3},
		{"unknown algorithm", &clusterpb.Hits{Check: &clusterpb.Check{Algorithm: 200, Id: "k", PeriodNs: 1, Limit: 10, N: 1}, Epoch: 1, N: []int64{2}}, 2},
		{"times and counts do not pair", &clusterpb.Hits{Check: gcra, Epoch: 1, At: []int64{now, now}, N: []int64{3}}, 3},
		{"counts past MaxInt64", &clusterpb.Hits{Check: gcra, Epoch: 2, At: []int64{now, now}, N: []int64{1<<63 - 1, 1<<63 - 1}}, 1<<63 - 1},
		{"a time in the future", &clusterpb.Hits{Check: gcra, Epoch: 3, At: []int64{now + int64(1000*time.Hour)}, N: []int64{1}}, 1},
		{"a garbage state", &clusterpb.Hits{Check: gcra, Epoch: 4, State: []byte{0xff, 0x01}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &clusterpb.SyncRequest{Node: "node-x", Parts: []*clusterpb.PartSync{{Partition: 0, Hits: []*clusterpb.Hits{tc.hits}}}}
			reply, ok := owners.Handle(0, req).(*clusterpb.SyncReply)
			require.True(t, ok)
			require.Len(t, reply.GetParts(), 1)
			require.Len(t, reply.GetParts()[0].GetStates(), 1)
			assert.Equal(t, tc.done, reply.GetParts()[0].GetStates()[0].GetDone())
		})
	}
	// The saturated charge left a bucket full for at most MaxSpan, and the
	// one from the future was charged now.
	check := &clusterpb.Check{Op: 1, Algorithm: gcra.Algorithm, Id: "k", PeriodNs: gcra.PeriodNs, Limit: 10, Burst: 10, N: 1}
	reply := owners.Handle(0, &clusterpb.DecideRequest{Checks: []*clusterpb.Check{check}}).(*clusterpb.DecideReply)
	require.Empty(t, reply.GetError())
	d := reply.GetDecisions()[0]
	assert.False(t, d.GetAllowed())
	assert.LessOrEqual(t, time.Duration(d.GetRetryAfterNs()), actorlimit.MaxSpan)
}

// ownWithRelease makes member i the owner of partition p, as own does, and
// returns what moves p away from it: to the in-memory owners, where it
// starts empty.
func (d *detachedCluster) ownWithRelease(i, p int) func() {
	h, release := d.members[i].Own(p)
	d.mu.Lock()
	if d.handlers == nil {
		d.handlers = make(map[int]func(any) any)
	}
	d.handlers[p] = h
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		delete(d.handlers, p)
		d.mu.Unlock()
		release()
	}
}

// TestLocalFirstStatesSurvivorsMerge: a partition's owner dies while the
// members hold hits it has not acknowledged, and their copies rest on
// different answers of it (member 0 synced last). The new owner, a fourth
// party or one of the members, takes every member's state whole and keeps
// the union of what they know: the fuller of the dead owner's states they
// last saw (member 0's, 20) plus every member's hits since (3 and 4), 27;
// not the fuller copy alone (25: member 1's 3 or member 0's 4 lost), as
// when it kept the fullest. Member 1, whose copy rests on the older
// answer, syncs with the new owner first.
func TestLocalFirstStatesSurvivorsMerge(t *testing.T) {
	for _, owner := range []int{-1, 0} {
		for a, p := range others() {
			t.Run(fmt.Sprintf("%v/new-owner-%d", a, owner), func(t *testing.T) {
				d := newDetached(t, 3, newFakeClock())
				for i := range d.members {
					d.hit(t, i, "k", p, 5+i)
				}
				d.syncAll()
				d.syncAll() // every copy holds 18
				d.hit(t, 0, "k", p, 2)
				d.members[0].SyncNow() // 20 at the owner, and in member 0's copy
				d.hit(t, 1, "k", p, 3)
				d.hit(t, 0, "k", p, 4)
				part := cluster.Partition("k", 16)
				d.owners.Drop(part) // the owner dies with none of the 7
				if owner >= 0 {
					d.own(owner, part)
				}
				d.members[1].SyncNow()
				d.members[0].SyncNow()
				d.members[2].SyncNow()
				d.syncAll()
				for i := range d.members {
					assert.EqualValues(t, 27, d.peekCount(t, i, "k", p), "member %d", i)
				}
			})
		}
	}
}
