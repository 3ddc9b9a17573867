package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/table"
)

// The receive paths of the other members' messages, fuzzed over their
// protobuf bytes: the bytes are unmarshalled and fed to a member that owns
// every partition, as its sync actor would. Properties: no panic; a
// message rejected (SyncStats.Rejected grows) changes nothing of the
// member's state; after one taken, the member's state keeps the checks'
// invariants (ids, counts, windows, states that load).

const fuzzPartitions = 4

// fuzzClock is a fixed clock: the fuzzed messages' windows are judged
// against it.
type fuzzClock struct{ now time.Time }

func (c fuzzClock) Now() time.Time                            { return c.now }
func (c fuzzClock) NewTicker(time.Duration) actorlimit.Ticker { return fuzzTicker{} }

type fuzzTicker struct{}

func (fuzzTicker) C() <-chan time.Time { return nil }
func (fuzzTicker) Stop()               {}

var fuzzNow = time.Unix(1_700_002_800, 0)

// fuzzMember makes a member that owns every partition, with a few keys
// in its state.
func fuzzMember(t testing.TB) *Member {
	t.Helper()
	cfg, err := Config{Provider: noProvider{}, Clock: fuzzClock{fuzzNow}, Partitions: fuzzPartitions, MaxEntries: 64, MaxCopies: 256}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	m := newMember(cfg, "self:1", func(int, any) (any, error) { return nil, errors.New("no other member") })
	for p := range fuzzPartitions {
		op := newOwnerPart(cfg.MaxEntries)
		op.self = m.local
		m.claim(p, op)
	}
	for _, msg := range fuzzSeeds(m) {
		switch r := msg.(type) {
		case *clusterpb.SyncRequest:
			m.handleSync(r)
		case *clusterpb.DecideRequest:
			m.serveDecide(r)
		}
	}
	return m
}

// fuzzID returns an id of partition p, made from prefix.
func fuzzID(m *Member, prefix string, p int) string {
	for i := 0; ; i++ {
		id := prefix + strings.Repeat("x", i)
		if m.partition(id) == p {
			return id
		}
	}
}

// fuzzSeeds are messages a member sends: a sync with totals, hits and a
// reset; a decision; a hand-off of a partition's state.
func fuzzSeeds(m *Member) []proto.Message {
	now := fuzzNow.UnixNano()
	minute := int64(time.Minute)
	a, b := fuzzID(m, "a", 0), fuzzID(m, "b", 1)
	gcra := &clusterpb.Check{Algorithm: uint32(algo.GCRA), Id: b, PeriodNs: minute, Limit: 10, Burst: 10, N: 1}
	bucket := table.New(0)
	c, _ := checkFromWire(gcra)
	bucket.Apply(&c, now)
	state := bucket.Record(&c).State
	handed := m.parts[1].owned.Load().export(1, now, "peer:1", nil)
	handed.Remembered = []*clusterpb.Remembered{
		{RequestId: 5, LeftNs: int64(time.Second), Decisions: []*clusterpb.Decision{{Allowed: true, Count: 1, Remaining: 9, ResetAfterNs: 6e9}}},
		{RequestId: 6, LeftNs: 1, Charged: true},
	}
	return []proto.Message{
		&clusterpb.SyncRequest{Node: "peer:1", Parts: []*clusterpb.PartSync{
			{Partition: 0, Totals: []*clusterpb.Total{{Id: a, PeriodNs: minute, Window: now / minute, Hits: 3, Epoch: 1, Last: now}}},
			{Partition: 1, Hits: []*clusterpb.Hits{{Check: gcra, Epoch: 1, At: []int64{now, now}, N: []int64{1, 2}}},
				Resets: []*clusterpb.Check{{Op: uint32(algo.OpReset), Id: b, PeriodNs: minute, Limit: 5, N: 1}}, ResetAt: []int64{now - 1}},
			{Partition: 1, Hits: []*clusterpb.Hits{{Check: gcra, Epoch: 2, Base: 3, State: state}}},
		}},
		&clusterpb.DecideRequest{Partition: 0, Checks: []*clusterpb.Check{
			{Algorithm: uint32(algo.FixedWindow), Id: a, PeriodNs: minute, Limit: 5, N: 1},
			{Op: uint32(algo.OpReset), Algorithm: uint32(algo.FixedWindow), Id: a, PeriodNs: minute, Limit: 5, N: 1}}},
		&clusterpb.HandOff{From: "peer:1", Parts: []*clusterpb.PartState{handed}},
		&clusterpb.HandOff{From: "peer:1", Backup: true, Parts: []*clusterpb.PartState{{Partition: 2,
			Windows: []*clusterpb.Window{{Id: fuzzID(m, "c", 2), PeriodNs: minute, Window: now / minute, Sum: 4,
				Nodes: []*clusterpb.NodeTotal{{Node: "peer:1", Epoch: 1, Hits: 4}}}}}}},
		&clusterpb.HandOff{From: "peer:1", Ask: true, Parts: []*clusterpb.PartState{{Partition: 3}}},
	}
}

// addSeeds adds the seeds of type T to f's corpus, and a few bad ones.
func addSeeds[T proto.Message](f *testing.F, bad ...T) {
	m := fuzzMember(f)
	for _, s := range fuzzSeeds(m) {
		if _, ok := s.(T); ok {
			b, err := proto.Marshal(s)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range bad {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// fuzzReceive feeds msg to m with handle, and checks the properties.
func fuzzReceive(t *testing.T, m *Member, handle func()) {
	before, rejected := m.StateDigest(), m.SyncStats().Rejected
	handle()
	if m.SyncStats().Rejected != rejected {
		if after := m.StateDigest(); after != before {
			t.Fatalf("a rejected message changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		return
	}
	if err := m.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// checkInvariants reports the first state of m that breaks what the
// checks of the peers' messages keep.
func (m *Member) checkInvariants() error {
	now := m.cfg.Clock.Now().UnixNano()
	pc := m.peerCheck()
	scratch := table.New(0)
	for p := range m.parts {
		op := m.parts[p].owned.Load()
		if op == nil {
			continue
		}
		op.mu.Lock()
		var err error
		for k, w := range op.windows {
			if err = pc.id(k.id, uint32(p)); err != nil {
				break
			}
			if k.period <= 0 || w.window > algo.FloorDiv(now, k.period)+1 || w.sum < 0 {
				err = errors.New("a window out of bounds: " + k.id)
				break
			}
			for n, t := range w.nodes {
				if len(n) > MaxNodeLength || t.hits < 0 || t.base < 0 {
					err = errors.New("a member's total out of bounds")
				}
			}
		}
		for k, ch := range op.charged {
			if e := pc.id(k.id, uint32(p)); e != nil {
				err = e
			}
			for n, nc := range ch.nodes {
				if len(n) > MaxNodeLength || nc.done < 0 {
					err = errors.New("charged hits out of bounds")
				}
			}
		}
		for k := range op.marks {
			if e := pc.id(k.id, uint32(p)); e != nil {
				err = e
			}
		}
		op.table.Snapshot(now, func(r algo.Record) bool {
			if e := pc.id(r.ID, uint32(p)); e != nil {
				err = e
				return false
			}
			if e := pc.state(scratch, r.Algorithm, int64(r.Period), r.ID, r.State); e != nil {
				err = e
				return false
			}
			return true
		})
		op.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if n := m.fb.mem.len(); n > MaxRemembered {
		return fmt.Errorf("%d remembered requests, more than %d", n, MaxRemembered)
	}
	for i := range m.fb.mem.shards {
		s := &m.fb.mem.shards[i]
		s.mu.Lock()
		for id, r := range s.byID {
			if id == 0 || int(r.part) >= len(m.parts) || r.at > now || r.charged && len(r.decisions) > 0 {
				s.mu.Unlock()
				return fmt.Errorf("remembered request %d out of bounds: %+v", id, r)
			}
		}
		s.mu.Unlock()
	}
	return nil
}

func FuzzHandleSync(f *testing.F) {
	addSeeds(f, &clusterpb.SyncRequest{Node: "peer:1", Parts: []*clusterpb.PartSync{{Partition: 0,
		Totals: []*clusterpb.Total{{Id: "a", PeriodNs: int64(time.Minute), Window: 1 << 40, Hits: -1}}}}})
	m := fuzzMember(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var req clusterpb.SyncRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		fuzzReceive(t, m, func() {
			reply := m.handleSync(&req)
			if n := len(reply.GetParts()); n != 0 && n != len(req.GetParts()) {
				t.Fatalf("%d parts answered for %d", n, len(req.GetParts()))
			}
		})
	})
}

func FuzzServeDecide(f *testing.F) {
	addSeeds(f, &clusterpb.DecideRequest{Partition: 9, Checks: []*clusterpb.Check{{Id: "a", N: -1}}})
	m := fuzzMember(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var req clusterpb.DecideRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		fuzzReceive(t, m, func() {
			reply := m.serveDecide(&req)
			if reply.GetError() == "" && !reply.GetRefused() && len(reply.GetDecisions()) != len(req.GetChecks()) {
				t.Fatalf("%d decisions for %d checks", len(reply.GetDecisions()), len(req.GetChecks()))
			}
		})
	})
}

func FuzzHandleHandOff(f *testing.F) {
	addSeeds(f, &clusterpb.HandOff{From: "peer:1", Parts: []*clusterpb.PartState{{Partition: 0,
		Records: []*clusterpb.Record{{Algorithm: uint32(algo.FixedWindow), PeriodNs: int64(time.Minute), Id: "a", State: []byte{1, 2, 1, 0, 0}}}}}},
		&clusterpb.HandOff{From: "peer:1", Parts: []*clusterpb.PartState{{Partition: 0,
			Remembered: []*clusterpb.Remembered{{RequestId: 0, LeftNs: 1}, {RequestId: 3, LeftNs: -1}, {RequestId: 4, LeftNs: 1, Charged: true,
				Decisions: []*clusterpb.Decision{{Count: -1}}}}}}})
	m := fuzzMember(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h clusterpb.HandOff
		if proto.Unmarshal(b, &h) != nil {
			return
		}
		fuzzReceive(t, m, func() { m.handleHandOff(&h) })
	})
}
