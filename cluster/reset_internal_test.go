package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// TestResetMarksHandedOn: a partition's state handed on to its next owner
// (or its backup) carries the marks of its resets: at the new owner, a
// late total or hits from before a reset count nothing, a copy's state
// from before it is not kept, and a member that saw the old owner's
// incarnation learns the reset.
func TestResetMarksHandedOn(t *testing.T) {
	const p = 3
	now := time.Unix(1_700_002_800, 0).UnixNano() + int64(30*time.Second)
	fixed := algo.Check{Op: algo.OpReset, Algorithm: algo.FixedWindow, ID: "f", Period: time.Minute, Limit: 10, N: 1}
	gcra := algo.Check{Op: algo.OpReset, Algorithm: algo.GCRA, ID: "g", Period: time.Minute, Limit: 10, Burst: 10, N: 1}
	k := localKey{id: "f", period: int64(time.Minute)}
	w := algo.FloorDiv(now, k.period)

	old := newOwnerPart(0)
	old.add("node-b", k, w, 1, 23, now-int64(10*time.Second))
	gcraHit := gcra
	gcraHit.Op = algo.OpHit
	full := &clusterpb.Hits{Check: checkToWire(&gcraHit), Epoch: 1, At: []int64{now - int64(10*time.Second)}, N: []int64{10}}
	old.charge("node-b", full, now)
	stale := old.table.Record(&gcraHit).State // the state before the reset
	require.NotNil(t, stale)
	old.reset(&fixed, now)
	old.reset(&gcra, now)

	next := newOwnerPart(0)
	next.load(old.export(p, now, "node-a", nil), now, "node-x", nil)

	_, count := next.add("node-c", k, w, 5, 4, now-int64(5*time.Second))
	assert.EqualValues(t, 0, count, "a late total from before the reset")
	_, count = next.add("node-c", k, w, 5, 6, now+1)
	assert.EqualValues(t, 2, count, "the hits after it count")

	late := &clusterpb.Hits{Check: checkToWire(&gcraHit), Epoch: 7, At: []int64{now - 1}, N: []int64{5}}
	assert.EqualValues(t, 5, next.charge("node-c", late, now).GetDone(), "taken as charged")
	whole := &clusterpb.Hits{Check: checkToWire(&gcraHit), Epoch: 8, Base: 10, State: stale, ResetAt: now - 1}
	next.charge("node-d", whole, now)
	peek := gcraHit
	peek.Op = algo.OpPeek
	assert.EqualValues(t, 0, next.table.Apply(&peek, now).Count, "neither the late hits nor the stale state")

	marks, gen := next.marksSince(old.inc, 2)
	assert.Len(t, marks, 2, "a member that saw the old owner's incarnation learns both resets")
	assert.EqualValues(t, 2, gen)
	marks, _ = next.marksSince(next.inc, gen)
	assert.Empty(t, marks, "and only once")
}
