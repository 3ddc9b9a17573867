package cluster

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"

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
		s.put(id, now, r.keep, rememberedReply{at: now, decisions: []algo.Decision{{Allowed: true}}})
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

// TestRememberedTravelWithHandOff: the requests an owner remembers of a
// partition go with the partition's hand-off, in pieces when large: the
// next owner answers a request sent again from the first decision and
// counts a charge sent again once, for what was left of their time; once
// it is over, it forgets them. An entry of another partition stays.
func TestRememberedTravelWithHandOff(t *testing.T) {
	cfg, err := Config{Provider: noProvider{}, Clock: fuzzClock{fuzzNow}, Partitions: fuzzPartitions}.withDefaults()
	require.NoError(t, err)
	from := newMember(cfg, "from:1", nil)
	op := newOwnerPart(cfg.MaxEntries)
	op.self = from.local
	from.claim(1, op)
	id, other := fuzzID(from, "k", 1), fuzzID(from, "o", 2)
	c := algo.Check{Op: algo.OpHit, Algorithm: algo.FixedWindow, ID: id, Period: time.Minute, Limit: 1, N: 1}
	req := func(rid uint64, c algo.Check) *clusterpb.DecideRequest {
		return &clusterpb.DecideRequest{Partition: uint32(from.partition(c.ID)), RequestId: rid, Checks: []*clusterpb.Check{checkToWire(&c)}}
	}
	charge := &clusterpb.DecideRequest{Partition: 1, Charges: []*clusterpb.Charge{{RequestId: 8,
		Checks: []*clusterpb.Check{checkToWire(&c)}, Allowed: []bool{true}}}}
	first := from.serveDecide(req(7, c))
	require.Len(t, first.GetDecisions(), 1)
	require.True(t, first.GetDecisions()[0].GetAllowed())
	from.serveDecide(charge)
	oc := c
	oc.ID = other
	o2 := newOwnerPart(cfg.MaxEntries)
	from.claim(2, o2)
	from.serveDecide(req(9, oc))

	now := fuzzNow.UnixNano()
	st := op.export(1, now, from.node, nil)
	st.Remembered = from.fb.mem.export(map[int]bool{1: true}, now)[1]
	require.Len(t, st.GetRemembered(), 2, "the request and the charge, not partition 2's")
	// Many more, so that the state goes in pieces.
	for i := range 20_000 {
		st.Remembered = append(st.Remembered, &clusterpb.Remembered{RequestId: 1<<40 + uint64(i), LeftNs: 1,
			Decisions: []*clusterpb.Decision{{Count: 1 << 40}, {Count: 2 << 40}, {Count: 3 << 40}, {Count: 4 << 40}}})
	}
	msgs := messages([]*clusterpb.PartState{st}, func() uint64 { return 5 })
	require.Greater(t, len(msgs), 1, "in pieces")

	clock := &steppedClock{now: fuzzNow}
	cfg.Clock = clock
	to := newMember(cfg, "to:1", nil)
	for _, parts := range msgs {
		to.handleHandOff(&clusterpb.HandOff{From: from.node, Parts: parts})
	}
	require.NotNil(t, to.parts[1].owned.Load(), "taken")
	assert.Zero(t, to.SyncStats().Rejected)
	assert.LessOrEqual(t, to.fb.mem.len(), MaxRemembered, "bounded as its own")

	again := to.serveDecide(req(7, c))
	require.Len(t, again.GetDecisions(), 1)
	assert.True(t, proto.Equal(first.GetDecisions()[0], again.GetDecisions()[0]), "the first decision")
	assert.EqualValues(t, 1, to.SyncStats().Deduplicated)
	to.serveDecide(charge)
	assert.EqualValues(t, 2, to.SyncStats().Deduplicated, "the charge, once")
	peek := c
	peek.Op = algo.OpPeek
	assert.EqualValues(t, 2, to.serveDecide(req(10, peek)).GetDecisions()[0].GetCount(), "the hit and the charge, each once")
	to.claim(2, newOwnerPart(cfg.MaxEntries))
	assert.EqualValues(t, 1, to.serveDecide(req(9, oc)).GetDecisions()[0].GetCount(), "another partition's request is not carried")

	clock.add(to.fb.mem.keep + 1) // the first owner's time, and more
	later := to.serveDecide(req(7, c))
	assert.False(t, later.GetDecisions()[0].GetAllowed(), "forgotten: decided again")
}

// steppedClock is a clock a test moves.
type steppedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppedClock) add(ns int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Duration(ns))
}

func (c *steppedClock) NewTicker(time.Duration) actorlimit.Ticker { return fuzzTicker{} }
