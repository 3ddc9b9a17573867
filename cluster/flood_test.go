package cluster_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// floodBound is the bound of TestFloodBoundsMemory: at most this many
// keys in each of a member's per-key maps (copies; the owner's state, all
// partitions together), and the heap both members may use, after a GC
// (less what the process held before they started).
const (
	floodBound  = 50_000
	floodHeap   = 160 << 20
	activeEvery = 20     // flood ids between two hits of the active ids
	syncEvery   = 50_000 // flood ids between two syncs of each member
)

// TestFloodBoundsMemory: a flood of new ids on one member of two
// (floodIDs of them, or ACTORLIMIT_FLOOD_IDS; half fixed windows, half
// token buckets, each hit once, syncs every syncEvery ids), with MaxCopies
// and MaxEntries of floodBound, keeps both members' heap under floodHeap; four active ids, hit between every
// activeEvery ids of the flood (a fixed window and a token bucket in each
// member's partitions), are allowed their limit and no more: the flood
// never resets their count. The owner's state of every kind is bounded:
// its table, its windows, what it charged of the other member's hits.
func TestFloodBoundsMemory(t *testing.T) {
	before := heapAfterGC() // what the other tests of the process left
	clock := newFakeClock()
	cfg := cluster.Config{Clock: clock, Partitions: 64, MaxEntries: floodBound, MaxCopies: floodBound}
	byAddr := make(map[string]*cluster.Member)
	ownerOf := func(p int) string { return fmt.Sprintf("node-%d", p%2) }
	sendTo := func(addr string, msg any) (any, error) { return wire(t, byAddr[addr].HandleSync(wire(t, msg))), nil }
	noGrain := func(int, any) (any, error) { return nil, errors.New("no grain") }
	var members []*cluster.Member
	for i := range 2 {
		m, err := cluster.DetachedBatched(cfg, fmt.Sprintf("node-%d", i), noGrain, ownerOf, sendTo)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		byAddr[m.Address()] = m
		members = append(members, m)
	}
	for p := range cfg.Partitions {
		members[p%2].Own(p)
	}
	flooded := members[0]

	const limit = 100
	fixed := actorlimit.Policy{Limit: limit, Period: time.Hour}
	bucket := actorlimit.Policy{Algorithm: actorlimit.TokenBucket, Limit: limit, Period: time.Hour}
	type active struct {
		id      string
		policy  actorlimit.Policy
		allowed int
	}
	var actives []*active
	for _, pol := range []actorlimit.Policy{fixed, bucket} {
		for owner := range 2 {
			for i := 0; ; i++ {
				id := fmt.Sprintf("active:%d:%d", pol.Algorithm, i)
				if flooded.PartitionOf(id)%2 == owner {
					actives = append(actives, &active{id: id, policy: pol})
					break
				}
			}
		}
	}

	const batch = 1000
	reqs := make([]actorlimit.HitRequest, 0, batch)
	res := make([]actorlimit.Result, batch)
	send := func() {
		require.NoError(t, flooded.Limiter.HitMany(t.Context(), reqs, res[:len(reqs)]))
		for i, r := range reqs {
			for _, a := range actives {
				if r.ID == a.id && res[i].Allowed {
					a.allowed++
				}
			}
		}
		reqs = reqs[:0]
	}
	ids := floodIDs
	if v := os.Getenv("ACTORLIMIT_FLOOD_IDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "ACTORLIMIT_FLOOD_IDS")
		require.Positive(t, n, "ACTORLIMIT_FLOOD_IDS")
		ids = n
	}
	activeHits := 0
	for i := range ids {
		pol := fixed
		if i%2 == 1 {
			pol = bucket
		}
		reqs = append(reqs, actorlimit.HitRequest{ID: fmt.Sprintf("flood:%d", i), Policy: pol})
		if i%activeEvery == activeEvery-1 {
			for _, a := range actives {
				reqs = append(reqs, actorlimit.HitRequest{ID: a.id, Policy: a.policy})
			}
			activeHits++
		}
		if len(reqs) >= batch-len(actives)-1 {
			send()
		}
		if i%syncEvery == syncEvery-1 {
			clock.Advance(time.Millisecond)
			flooded.SyncNow()
			members[1].SyncNow()
		}
	}
	send()
	flooded.SyncNow()
	members[1].SyncNow()

	for _, a := range actives {
		assert.Equal(t, limit, a.allowed, "%s (%v): allowed", a.id, a.policy.Algorithm)
		if a.policy.Algorithm == actorlimit.FixedWindow {
			assert.EqualValues(t, activeHits, peekCount(t, flooded, a.id, a.policy).Count, "%s: its count, never reset", a.id)
		}
	}
	for i, m := range members {
		s := stats(t, m)
		assert.LessOrEqual(t, s.Entries, 2*(floodBound+64), "member %d: its copies (each shard rounds up)", i)
		o := m.OwnerSizes()
		t.Logf("member %d: copies %d, owner's state %+v", i, s.Entries, o)
		for name, n := range map[string]int{"table": o.Table, "windows": o.Windows, "charged": o.Charged, "marks": o.Marks} {
			assert.LessOrEqual(t, n, floodBound*9/8+cfg.Partitions, "member %d: the owner's %s", i, name)
		}
	}
	after := heapAfterGC()
	grown := after - min(before, after)
	t.Logf("heap after %d new ids and a GC: %d MiB more than before the members started", ids, grown>>20)
	assert.Less(t, grown, uint64(floodHeap), "the heap, both members together")
}

// heapAfterGC returns the bytes of the heap's live objects.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
