package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// TestSyncRoundsInFlight: with the wall clock, a LocalFirst member's sync
// loop sends its next round while the last one waits for its answer (an
// owner a round trip away), the fixed windows' totals in every round and
// the other algorithms' hits in one round at a time; once the answers
// come, the owner has counted each hit once. The owner's answers are held
// by the test, not by time.
func TestSyncRoundsInFlight(t *testing.T) {
	cfg := cluster.Config{Mode: cluster.LocalFirst, SyncEvery: time.Hour, Clock: cluster.WallClock()} // the loop never ticks by itself
	owners := cluster.NewOwners(cfg)
	entered := make(chan *clusterpb.SyncRequest, 16)
	release := make(chan struct{})
	send := func(p int, msg any) (any, error) {
		if sr, ok := msg.(*clusterpb.SyncRequest); ok {
			entered <- sr
			<-release
		}
		return owners.Handle(p, msg), nil
	}
	m, err := cluster.Detached(cfg, "a", send)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	ctx := context.Background()
	fixed := actorlimit.Policy{Limit: 100, Period: time.Hour}
	sliding := actorlimit.Policy{Algorithm: actorlimit.SlidingWindow, Limit: 100, Period: time.Hour}
	const id = "k" // both keys in one partition: one request a round
	var got []*clusterpb.SyncRequest
	for round := 1; round <= 3; round++ {
		_, err := m.Limiter.Hit(ctx, id, fixed)
		require.NoError(t, err)
		_, err = m.Limiter.Hit(ctx, id, sliding)
		require.NoError(t, err)
		go m.Tick()
		select {
		case sr := <-entered:
			got = append(got, sr)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d was not sent while %d rounds wait for their answers", round, round-1)
		}
	}
	for i, sr := range got {
		require.Len(t, sr.GetParts(), 1, "round %d", i+1)
		part := sr.GetParts()[0]
		require.Len(t, part.GetTotals(), 1, "round %d: the fixed window's total", i+1)
		assert.Equal(t, int64(i+1), part.GetTotals()[0].GetHits(), "round %d: the fixed window's total", i+1)
		if i == 0 {
			assert.Len(t, part.GetHits(), 1, "round 1: the sliding window's hits")
		} else {
			assert.Empty(t, part.GetHits(), "round %d: the sliding window's hits, with round 1 in flight", i+1)
		}
	}
	close(release)
	released = true
	m.SyncNow() // after the round that carries the sliding window's hits
	for _, p := range []actorlimit.Policy{fixed, sliding} {
		r, err := m.Limiter.Peek(ctx, id, p)
		require.NoError(t, err)
		assert.Equal(t, int64(3), r.Count, "%v: the member's count", p.Algorithm)
	}
	// The owner counted each hit once, though rounds carried them again.
	other, err := cluster.Detached(cfg, "b", func(p int, msg any) (any, error) { return owners.Handle(p, msg), nil })
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	for _, p := range []actorlimit.Policy{fixed, sliding} {
		r, err := other.Limiter.Peek(ctx, id, p)
		require.NoError(t, err)
		assert.Equal(t, int64(3), r.Count, "%v: the owner's count, as another member sees it", p.Algorithm)
	}
}
