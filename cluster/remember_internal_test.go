package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// TestRememberedBounds: an owner remembers at most MaxRemembered requests,
// the oldest forgotten first, and none longer than its keep.
func TestRememberedBounds(t *testing.T) {
	r := newRemembered(2 * time.Second)
	put := func(id uint64, now int64) {
		s := r.shard(id)
		s.mu.Lock()
		s.put(id, now, r.keep, rememberedReply{decisions: []algo.Decision{{Allowed: true}}})
		s.mu.Unlock()
	}
	has := func(id uint64) bool {
		s := r.shard(id)
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.byID[id]
		return ok
	}
	for id := uint64(1); id <= 4*MaxRemembered; id++ {
		put(id, 0)
	}
	assert.LessOrEqual(t, r.len(), MaxRemembered)
	assert.Greater(t, r.len(), MaxRemembered*9/10, "the shards fill evenly")
	assert.True(t, has(4*MaxRemembered), "the newest is kept")
	assert.False(t, has(1), "the oldest is forgotten")

	second := int64(time.Second)
	put(1<<40, 3*second) // forgets, in its shard, every request older than 1 s
	s := r.shard(1 << 40)
	s.mu.Lock()
	assert.Len(t, s.byID, 1)
	s.mu.Unlock()
}

// TestAnswerRemembers: an owner answers a request sent again from its
// first decision, counting nothing twice; a charge of a request it
// decided counts nothing; a charge is taken once; a late request is
// decided by nobody, and answered late once charged.
func TestAnswerRemembers(t *testing.T) {
	o := newOwnerPart(0)
	mem := newRemembered(time.Minute)
	c := algo.Check{Op: algo.OpHit, Algorithm: algo.FixedWindow, ID: "k", Period: time.Minute, Limit: 2, N: 1}
	req := func(id uint64, sent, late int64) *clusterpb.DecideRequest {
		return &clusterpb.DecideRequest{Checks: []*clusterpb.Check{checkToWire(&c)}, RequestId: id, SentNs: sent, LateNs: late}
	}
	count := func() int64 {
		peek := c
		peek.Op = algo.OpPeek
		return o.table.Apply(&peek, 0).Count
	}
	r1 := o.answer(req(1, 0, 0), []algo.Check{c}, 0, mem, nil, true)
	require.Len(t, r1.GetDecisions(), 1)
	assert.EqualValues(t, 1, r1.GetDecisions()[0].GetCount())
	again := o.answer(req(1, 0, 0), []algo.Check{c}, 0, mem, nil, true)
	assert.EqualValues(t, 1, again.GetDecisions()[0].GetCount(), "the first decision")
	assert.EqualValues(t, 1, count())

	charge := func(id uint64) *clusterpb.DecideRequest {
		return &clusterpb.DecideRequest{Charges: []*clusterpb.Charge{{RequestId: id, Checks: []*clusterpb.Check{checkToWire(&c)}, Allowed: []bool{true}}}}
	}
	o.answer(charge(1), nil, 0, mem, nil, true)
	assert.EqualValues(t, 1, count(), "decided already: not charged")
	o.answer(charge(2), nil, 0, mem, nil, true)
	o.answer(charge(2), nil, 0, mem, nil, true)
	assert.EqualValues(t, 2, count(), "charged once")

	late := o.answer(req(3, 0, 10), []algo.Check{c}, 11, mem, nil, true)
	assert.True(t, late.GetLate())
	assert.EqualValues(t, 2, count(), "late: not decided")
	o.answer(charge(3), nil, 11, mem, nil, true)
	assert.EqualValues(t, 3, count(), "its charge is")
	assert.True(t, o.answer(req(3, 11, 0), []algo.Check{c}, 11, mem, nil, true).GetLate(), "charged: never decided as well")
	assert.EqualValues(t, 3, count())

	o.close()
	assert.Nil(t, o.answer(req(4, 0, 0), []algo.Check{c}, 0, mem, nil, true), "no longer the owner's")
}
