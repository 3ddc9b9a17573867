package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// detachedWith is newDetached with more of the config given.
func detachedWith(t *testing.T, n int, cfg cluster.Config) *detachedCluster {
	t.Helper()
	cfg.Partitions = 16
	d := &detachedCluster{owners: cluster.NewOwners(cfg)}
	for i := range n {
		m, err := cluster.Detached(cfg, fmt.Sprintf("node-%d", i), d.send(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		d.members = append(d.members, m)
	}
	return d
}

func stats(t *testing.T, m *cluster.Member) actorlimit.Stats {
	t.Helper()
	s, err := m.Limiter.Stats(context.Background())
	require.NoError(t, err)
	return s
}

// TestLocalFirstSweepsEndedWindows: the sync round deletes, every
// SweepEvery on the injected clock, the member's copies of windows that
// ended, as the single-process janitor does; copies of live windows stay.
func TestLocalFirstSweepsEndedWindows(t *testing.T) {
	clock := newFakeClock()
	d := detachedWith(t, 1, cluster.Config{Clock: clock, SweepEvery: 10 * time.Second})
	m := d.members[0]
	second := actorlimit.Policy{Limit: 5, Period: time.Second}
	for i := range 100 {
		d.hit(t, 0, fmt.Sprintf("ip:%d", i), second, 2)
	}
	d.hit(t, 0, "day", actorlimit.Policy{Limit: 5, Period: 24 * time.Hour}, 1)
	require.Equal(t, 101, stats(t, m).Entries)
	m.SyncNow() // the first round sweeps: nothing has ended
	assert.Equal(t, 101, stats(t, m).Entries)
	clock.Advance(2 * time.Second)
	m.SyncNow() // the windows of a second ended; the next sweep is not due
	assert.Equal(t, 101, stats(t, m).Entries)
	clock.Advance(10 * time.Second)
	m.SyncNow()
	s := stats(t, m)
	assert.Equal(t, 1, s.Entries, "only the day's window is left")
	assert.EqualValues(t, 100, s.Expired)
	assert.EqualValues(t, 2, s.Sweeps)
	assert.EqualValues(t, 1, peekCount(t, m, "day", actorlimit.Policy{Limit: 5, Period: 24 * time.Hour}).Count)
	d.hit(t, 0, "ip:0", second, 1)
	assert.Equal(t, 2, stats(t, m).Entries)
	clock.Advance(time.Second)
	n, err := m.Limiter.Sweep(context.Background()) // a sweep on demand
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// TestLocalFirstCopiesBounded: a flood of new ids keeps a member's copies
// within MaxCopies, and the bound evicts the copies that lose least: a
// key over its limit keeps its count through the flood.
func TestLocalFirstCopiesBounded(t *testing.T) {
	clock := newFakeClock()
	d := detachedWith(t, 1, cluster.Config{Clock: clock, MaxCopies: 640}) // 10 a shard
	p := actorlimit.Policy{Limit: 20, Period: time.Hour}
	assert.Equal(t, 20, d.hit(t, 0, "hot", p, 30))
	d.syncAll()
	for i := range 10_000 {
		d.hit(t, 0, fmt.Sprintf("flood:%d", i), p, 1)
	}
	s := stats(t, d.members[0])
	assert.LessOrEqual(t, s.Entries, 640)
	assert.GreaterOrEqual(t, s.Evictions, uint64(10_001-640))
	assert.EqualValues(t, 30, peekCount(t, d.members[0], "hot", p).Count, "the hot key's copy survived")
	assert.Equal(t, 0, d.hit(t, 0, "hot", p, 1), "and still denies")
}

// TestLocalFirstEvictedCopyAddsUp: a copy evicted and made again in the same
// window counts on top of what the owner had from the old one: the owner
// adds a new copy's total (a larger epoch) to the old copy's.
func TestLocalFirstEvictedCopyAddsUp(t *testing.T) {
	clock := newFakeClock()
	d := detachedWith(t, 2, cluster.Config{Clock: clock, MaxCopies: 64}) // 1 a shard
	p := actorlimit.Policy{Limit: 100, Period: time.Hour}
	d.hit(t, 0, "k", p, 10)
	d.syncAll()
	for i := range 1000 { // evicts k's copy at member 0
		d.hit(t, 0, fmt.Sprintf("flood:%d", i), p, 1)
	}
	d.hit(t, 0, "k", p, 3) // a new copy: 3 hits
	d.syncAll()
	d.hit(t, 1, "k", p, 1)
	d.syncAll()
	assert.EqualValues(t, 14, peekCount(t, d.members[1], "k", p).Count)
}

// send is the detached cluster's request to partition p's owner.
func (d *detachedCluster) send(t *testing.T) func(p int, msg any) (any, error) {
	return func(p int, msg any) (any, error) {
		d.sends.Add(1)
		if d.record.Load() {
			d.mu.Lock()
			d.recorded = append(d.recorded, sentRequest{p, wire(t, msg)})
			d.mu.Unlock()
		}
		if d.down.Load() {
			return nil, errors.New("owner unreachable")
		}
		var reply any
		if h := d.handler(p); h != nil {
			reply = wire(t, h(wire(t, msg)))
		} else {
			reply = wire(t, d.owners.Handle(p, wire(t, msg)))
		}
		if d.lose.Load() {
			return nil, errors.New("the answer was lost")
		}
		return reply, nil
	}
}

// TestLocalFirstOwnerEvictionKeepsHits: a member that owns a partition
// keeps its own hits in its copies; a copy it evicts puts them into the
// owner's state first, so the count does not drop.
func TestLocalFirstOwnerEvictionKeepsHits(t *testing.T) {
	d := detachedWith(t, 2, cluster.Config{Clock: newFakeClock(), MaxCopies: 64}) // 1 a shard
	p := actorlimit.Policy{Limit: 100, Period: time.Hour}
	d.own(0, cluster.Partition("k", 16))
	d.hit(t, 0, "k", p, 10)
	for i := range 1000 { // evicts k's copy at member 0
		d.hit(t, 0, fmt.Sprintf("flood:%d", i), p, 1)
	}
	d.hit(t, 1, "k", p, 1)
	d.members[1].SyncNow()
	assert.EqualValues(t, 11, peekCount(t, d.members[1], "k", p).Count)
}
