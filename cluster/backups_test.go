//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestBackupUnsettledUntilTaken: an Owner-mode partition's backup counts
// as done only once its backup member has taken it. While the backup
// member has not answered (it is slow, or the owner dies first) the owner
// reports the partition unsettled, and once it has, the backup member
// holds the hit: killed then, the owner loses nothing. Before, a backup
// counted as done as soon as it was sent: TestBigStateAsProcesses saw an
// owner report every backup done, was killed with its last ones under way,
// and the new owners allowed those partitions' keys again from their
// older backups.
func TestBackupUnsettledUntilTaken(t *testing.T) {
	clock := newFakeClock()
	members, agent := startMembersWith(t, 2, cluster.Config{Clock: clock, Mode: cluster.Owner, Strict: true,
		SyncEvery: 2 * time.Second, RequestTimeout: 5 * time.Second})
	a, b := members[0], members[1]
	// The members' first backups, of their partitions' empty states.
	for deadline := time.Now().Add(10 * time.Second); a.Unsettled() > 0 || b.Unsettled() > 0; {
		require.True(t, time.Now().Before(deadline), "the members' first backups are not taken")
		a.SyncNow()
		b.SyncNow()
		time.Sleep(10 * time.Millisecond) // for the hand-offs of the start (pushed on the wall clock)
	}

	policy := actorlimit.Policy{Limit: 1, Period: time.Hour}
	var id string
	for i := 0; id == ""; i++ {
		if s := fmt.Sprint("user:", i); a.OwnerAt(a.PartitionOf(s)) == a.Address() {
			id = s
		}
	}
	res, err := a.Limiter.Hit(context.Background(), id, policy)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.Equal(t, 1, a.Unsettled(), "the hit's partition changed since its backup")

	release := b.HoldOwnership() // the backup waits for b's answer
	synced := make(chan struct{})
	go func() { defer close(synced); a.SyncNow() }()
	assert.Never(t, func() bool { return a.Unsettled() == 0 }, 300*time.Millisecond, time.Millisecond,
		"a backup under way counted as taken")
	release()
	<-synced
	assert.Zero(t, a.Unsettled(), "the backup taken")

	a.Kill()
	agent.DeregisterService(a.SystemID())
	waitMembers(t, []*cluster.Member{b}, 1)
	res, err = b.Limiter.Hit(context.Background(), id, policy)
	require.NoError(t, err)
	assert.False(t, res.Allowed, "the new owner took the hit over from its backup")
}
