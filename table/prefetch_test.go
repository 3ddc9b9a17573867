package table

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
)

// prefetchCheck is a fixed-window hit on id with the window scale.
func prefetchCheck(id string, scale int64) algo.Check {
	return algo.Check{Op: algo.OpHit, Algorithm: algo.FixedWindow, ID: id, Period: time.Duration(scale), Limit: 1 << 40, Burst: 1 << 40, N: 1}
}

// seenSlot returns the slot Prefetch names for c, or nil.
func seenSlot(tb *Table, c algo.Check) *uint32 {
	v := tb.seen.Load()
	if v.depth < prefetchDepth {
		return nil
	}
	return tb.seenSlot(v, &c)
}

// TestPrefetchNamesTheHomeSlot: once the index has prefetchDepth bits of
// directory, Prefetch names for every key the slot its lookup starts at;
// before, and for a window the table has no run of, it names none.
func TestPrefetchNamesTheHomeSlot(t *testing.T) {
	tb := New(0)
	now := int64(1_000) * sec
	require.Nil(t, seenSlot(tb, prefetchCheck("k0", sec)), "an empty table")
	var ids []string
	for i := 0; tb.depth < prefetchDepth; i++ {
		if i%1000 == 0 {
			id := fmt.Sprintf("k%d", i)
			require.Nil(t, seenSlot(tb, prefetchCheck(id, sec)), "directory of depth %d", tb.depth)
		}
		c := prefetchCheck(fmt.Sprintf("k%d", i), sec)
		tb.Apply(&c, now)
		ids = append(ids, c.ID)
	}
	checkIndex(t, tb)
	for _, id := range ids {
		c := prefetchCheck(id, sec)
		r := tb.runOf(uint8(c.Algorithm), int64(c.Period))
		h := tb.hash(r.num, id)
		slots := tb.sub(h).slots
		require.Same(t, &slots[home(h, len(slots))], seenSlot(tb, c), id)
		tb.Prefetch(&c)
	}
	assert.Nil(t, seenSlot(tb, prefetchCheck(ids[0], 2*sec)), "a window with no run")
}

// TestPrefetchRuns: Prefetch knows the runs as they are made and deleted,
// the first maxSeenRuns of them by number.
func TestPrefetchRuns(t *testing.T) {
	tb := New(0)
	now := int64(1_000) * sec
	for s := range int64(maxSeenRuns + 4) {
		c := prefetchCheck("a", (s+1)*sec)
		tb.Apply(&c, now)
		checkSeen(t, tb)
	}
	require.Len(t, *tb.seenRuns.Load(), maxSeenRuns)
	for s := range int64(maxSeenRuns + 4) {
		if s%3 == 0 {
			require.True(t, tb.Delete(key(uint8(algo.FixedWindow), (s+1)*sec, "a")))
			checkSeen(t, tb)
		}
	}
	n, _ := tb.Expire(now+sec*int64(maxSeenRuns+10)+sec*3600, 0)
	require.Positive(t, n)
	checkSeen(t, tb)
	assert.Empty(t, *tb.seenRuns.Load())
}

// TestPrefetchBesideTheOwner: Prefetch, called without end by other
// goroutines while the owner inserts keys (parts growing and splitting,
// the directory doubling), deletes them, sweeps them and makes and
// deletes runs, changes nothing and reads nothing the owner writes (run
// with -race). The index is whole at the end.
func TestPrefetchBesideTheOwner(t *testing.T) {
	tb := New(0)
	now := int64(1_000) * sec
	const n = 40_000
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				c := prefetchCheck(fmt.Sprintf("k%d", (i*7919+g)%n), sec*int64(1+i%2))
				tb.Prefetch(&c)
			}
		})
	}
	for round := range 2 {
		for i := range n {
			c := prefetchCheck(fmt.Sprintf("k%d", i), sec*int64(1+i%2))
			tb.Apply(&c, now)
		}
		for i := 0; i < n; i += 3 {
			tb.Delete(key(uint8(algo.FixedWindow), sec*int64(1+i%2), fmt.Sprintf("k%d", i)))
		}
		if round == 0 {
			tb.Expire(now+3*sec, 0) // every run goes, and comes back
		}
	}
	stop.Store(true)
	wg.Wait()
	checkIndex(t, tb)
	assert.GreaterOrEqual(t, tb.depth, uint8(prefetchDepth))
}
