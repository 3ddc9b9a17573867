package cluster_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/internal/logtest"
)

// idOf returns an id, made from prefix, of a partition of m's for which
// want holds (m's partition key places it).
func idOf(t *testing.T, m *cluster.Member, prefix string, want func(p int) bool) string {
	t.Helper()
	for i := range 10_000 {
		id := fmt.Sprintf("%s%d", prefix, i)
		if want(m.PartitionOf(id)) {
			return id
		}
	}
	t.Fatalf("no id of prefix %.20q fits", prefix)
	return ""
}

const hostilePartitions = 64

// ownerOfPartition makes a detached member that owns partition p of hostilePartitions,
// logging to logs.
func ownerOfPartition(t *testing.T, clock *fakeClock, logs *logtest.Recorder, p int) *cluster.Member {
	t.Helper()
	m, err := cluster.Detached(cluster.Config{Clock: clock, Partitions: hostilePartitions, Logger: slog.New(logs)}, "owner",
		func(int, any) (any, error) { return nil, errors.New("no other member") })
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	_, release := m.Own(p)
	t.Cleanup(release)
	return m
}

// keyIn returns an id of partition p of hostilePartitions.
func keyIn(t *testing.T, m *cluster.Member, p int) string {
	t.Helper()
	return idOf(t, m, "key", func(q int) bool { return q == p })
}

// TestPeerRejectionsLoggedOnce: rejected messages are counted each, and
// logged at WARN at most once a minute on the member's clock.
func TestPeerRejectionsLoggedOnce(t *testing.T) {
	clock := newFakeClock()
	logs := &logtest.Recorder{}
	m := ownerOfPartition(t, clock, logs, 3)
	bad := &clusterpb.SyncRequest{Node: "peer", Parts: []*clusterpb.PartSync{{Partition: 3,
		Totals: []*clusterpb.Total{{Id: keyIn(t, m, 3), PeriodNs: int64(time.Hour), Window: 1, Hits: -1}}}}}
	warns := func() (n int) {
		for _, r := range logs.Records() {
			if strings.HasPrefix(r, "WARN actorlimit cluster: rejected a message") {
				n++
			}
		}
		return n
	}
	for range 5 {
		reply := m.HandleSync(bad).(*clusterpb.SyncReply)
		assert.Empty(t, reply.GetParts(), "a rejected sync is answered with no parts")
	}
	assert.Equal(t, uint64(5), m.SyncStats().Rejected)
	assert.Equal(t, 1, warns())
	clock.Advance(59 * time.Second)
	m.HandleSync(bad)
	assert.Equal(t, 1, warns())
	clock.Advance(time.Second)
	m.HandleSync(bad)
	assert.Equal(t, 2, warns())
	assert.Equal(t, uint64(7), m.SyncStats().Rejected)
}

// TestPeerWindowBound: an owner takes a member's total for the next window
// by its clock (a sender a little ahead), as the table loads states, and
// rejects one for a later window: a member whose clock is far ahead cannot
// pin a key's window in the future.
func TestPeerWindowBound(t *testing.T) {
	clock := newFakeClock()
	m := ownerOfPartition(t, clock, &logtest.Recorder{}, 5)
	id := keyIn(t, m, 5)
	window := clock.Now().UnixNano() / int64(time.Minute)
	total := func(w int64) *clusterpb.SyncRequest {
		return &clusterpb.SyncRequest{Node: "peer", Parts: []*clusterpb.PartSync{{Partition: 5,
			Totals: []*clusterpb.Total{{Id: id, PeriodNs: int64(time.Minute), Window: w, Hits: 1, Epoch: 1}}}}}
	}
	reply := m.HandleSync(total(window + 2)).(*clusterpb.SyncReply)
	assert.Empty(t, reply.GetParts())
	assert.Equal(t, uint64(1), m.SyncStats().Rejected)
	reply = m.HandleSync(total(window + 1)).(*clusterpb.SyncReply)
	require.Len(t, reply.GetParts(), 1)
	assert.Equal(t, window+1, reply.GetParts()[0].GetCounts()[0].GetWindow())
	assert.Equal(t, uint64(1), m.SyncStats().Rejected)
}
