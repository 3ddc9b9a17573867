//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// TestHostilePeer: a member (authenticated, in the view) sends another
// member each kind of bad message; each is refused, counted (Rejected, or
// Refusals for what the view does not allow), and changes nothing: the
// receiver's whole state of the partitions it owns, its hand-offs and
// backups, its own copies, its counters, and the count of the key it
// holds.
func TestHostilePeer(t *testing.T) {
	clock := newFakeClock()
	members, _ := startMembersWith(t, 3, cluster.Config{Clock: clock, Partitions: hostilePartitions})
	victim, hostile, third := members[0], members[1], members[2]
	ctx := context.Background()
	hour := int64(time.Hour)
	now := clock.Now().UnixNano()
	window := now / hour
	// A partition the victim owns, and one the hostile member owns whose
	// backup (its successor) is the third member.
	var ownP, otherP int = -1, -1
	for p := range hostilePartitions {
		switch {
		case ownP < 0 && victim.OwnerAt(p) == victim.Address():
			ownP = p
		case otherP < 0 && victim.OwnerAt(p) == hostile.Address() && victim.BackupAt(p) == third.Address():
			otherP = p
		}
	}
	require.GreaterOrEqual(t, ownP, 0)
	require.GreaterOrEqual(t, otherP, 0)
	own := idOf(t, victim, "own", func(p int) bool { return p == ownP })
	other := idOf(t, victim, "other", func(p int) bool { return p == otherP })
	policy := actorlimit.Policy{Limit: 10, Period: time.Hour}
	for range 3 {
		d, err := victim.Limiter.Hit(ctx, own, policy)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.Eventually(t, func() bool { return victim.Owns(ownP) }, 10*time.Second, 10*time.Millisecond)

	fixed := func(count int64) []byte {
		s := algo.FixedState{Window: window, Count: count, Created: now, Modified: now}
		b, err := s.AppendBinary(nil)
		require.NoError(t, err)
		return b
	}
	total := func(id string, w, hits int64) *clusterpb.SyncRequest {
		return &clusterpb.SyncRequest{Node: hostile.Address(), Parts: []*clusterpb.PartSync{{Partition: uint32(ownP),
			Totals: []*clusterpb.Total{{Id: id, PeriodNs: hour, Window: w, Hits: hits, Epoch: 1 << 62, Last: now}}}}}
	}
	// Over MaxIDLength, under what the member's server receives (a
	// longer one is refused by gRPC unread: TestReceiveBound).
	huge := idOf(t, victim, strings.Repeat("x", 256<<10), func(p int) bool { return p == ownP })
	names := make([]*clusterpb.NodeTotal, 5000)
	for i := range names {
		names[i] = &clusterpb.NodeTotal{Node: fmt.Sprintf("10.0.%d.%d:4000", i/250, i%250), Hits: 0}
	}
	reset := func(id string) *clusterpb.Check {
		return &clusterpb.Check{Op: uint32(algo.OpReset), Id: id, PeriodNs: hour, Limit: 10, N: 1}
	}
	for _, tc := range []struct {
		name     string
		msg      any
		rejected bool // else refused by the view
	}{
		{"negative total", total(own, window, -1), true},
		{"future window", total(own, window+2, 1), true},
		{"256 KB id", total(huge, window, 1), true},
		{"id of another partition", total(other, window, 1), true},
		{"sync from a name not in the view", &clusterpb.SyncRequest{Node: strings.Repeat("n", 400) + ":1",
			Parts: []*clusterpb.PartSync{{Partition: uint32(ownP), Totals: []*clusterpb.Total{{Id: own, PeriodNs: hour, Window: window, Hits: 1, Epoch: 1, Last: now}}}}}, false},
		{"endless member name", &clusterpb.SyncRequest{Node: strings.Repeat("n", 1<<16),
			Parts: []*clusterpb.PartSync{{Partition: uint32(ownP), Totals: []*clusterpb.Total{{Id: own, PeriodNs: hour, Window: window, Hits: 1, Epoch: 1, Last: now}}}}}, true},
		{"endless member names in a window", &clusterpb.HandOff{From: hostile.Address(), Parts: []*clusterpb.PartState{{Partition: uint32(ownP),
			Windows: []*clusterpb.Window{{Id: own, PeriodNs: hour, Window: window, Sum: 0, Nodes: names}}}}}, true},
		{"fixed-window record of count -1", &clusterpb.HandOff{From: hostile.Address(), Parts: []*clusterpb.PartState{{Partition: uint32(ownP),
			Records: []*clusterpb.Record{{Algorithm: uint32(algo.FixedWindow), PeriodNs: hour, Id: own, Death: (window + 1) * hour, State: fixed(-1)}}}}}, true},
		{"fixed-window record of a future window", &clusterpb.HandOff{From: hostile.Address(), Parts: []*clusterpb.PartState{{Partition: uint32(ownP),
			Windows: []*clusterpb.Window{{Id: own, PeriodNs: hour, Window: window + 2, Sum: 100}}}}}, true},
		{"hand-off naming the real owner, of a partition the victim does not hold", &clusterpb.HandOff{From: hostile.Address(),
			Parts: []*clusterpb.PartState{{Partition: uint32(otherP), Windows: []*clusterpb.Window{{Id: other, PeriodNs: hour, Window: window, Sum: 1}}}}}, false},
		{"hand-off in 2^32-1 pieces", &clusterpb.HandOff{From: hostile.Address(), Parts: []*clusterpb.PartState{{Partition: uint32(ownP),
			Piece: 0, Pieces: 1<<32 - 1, Version: 1, Windows: []*clusterpb.Window{{Id: own, PeriodNs: hour, Window: window, Sum: 1}}}}}, false},
		{"backup of a partition the victim does not back up", &clusterpb.HandOff{From: hostile.Address(), Backup: true,
			Parts: []*clusterpb.PartState{{Partition: uint32(otherP)}}}, false},
		{"reset of a key the victim does not own", &clusterpb.DecideRequest{Partition: uint32(ownP), Checks: []*clusterpb.Check{reset(other)}}, true},
		{"queued reset of a key the victim does not own", &clusterpb.SyncRequest{Node: hostile.Address(),
			Parts: []*clusterpb.PartSync{{Partition: uint32(ownP), Resets: []*clusterpb.Check{reset(other)}, ResetAt: []int64{now}}}}, true},
		{"queued reset that is a hit", &clusterpb.SyncRequest{Node: hostile.Address(),
			Parts: []*clusterpb.PartSync{{Partition: uint32(ownP), Resets: []*clusterpb.Check{{Op: uint32(algo.OpHit), Id: own, PeriodNs: hour, Limit: 10, N: 1}}}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, stats := victim.StateDigest(), victim.SyncStats()
			_, err := hostile.Send(victim.Address(), tc.msg, 5*time.Second)
			require.NoError(t, err, "the victim answers")
			assert.Equal(t, before, victim.StateDigest(), "nothing changed")
			after := victim.SyncStats()
			if tc.rejected {
				assert.Equal(t, stats.Rejected+1, after.Rejected, "rejected")
			} else {
				assert.Equal(t, stats.Refusals+1, after.Refusals, "refused")
			}
			d, err := victim.Limiter.Peek(ctx, own, policy)
			require.NoError(t, err)
			assert.Equal(t, int64(7), d.Remaining, "the key's count")
		})
	}
	assert.False(t, victim.Owns(otherP), "one owner for each partition")

	// A hand-off from a partition's owner to its successor, ahead of the
	// successor's view (the owner leaving), is kept as the successor's
	// backup: the successor does not own the partition while its view
	// says another member does.
	succP := -1
	for p := range hostilePartitions {
		if victim.OwnerAt(p) == hostile.Address() && victim.BackupAt(p) == victim.Address() {
			succP = p
			break
		}
	}
	require.GreaterOrEqual(t, succP, 0)
	succ := idOf(t, victim, "succ", func(p int) bool { return p == succP })
	_, err := hostile.Send(victim.Address(), &clusterpb.HandOff{From: hostile.Address(),
		Parts: []*clusterpb.PartState{{Partition: uint32(succP), Windows: []*clusterpb.Window{{Id: succ, PeriodNs: hour, Window: window, Sum: 1}}}}}, 5*time.Second)
	require.NoError(t, err)
	assert.False(t, victim.Owns(succP), "one owner for each partition")
}
