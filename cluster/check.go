package cluster

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/table"
)

// The checks of the other members' messages. Every message a member takes
// from the network is checked whole before it changes anything, even from
// a member that TLS authenticated: a faulty member (a bug, a clock far
// ahead, a different configuration) must not corrupt the others. A message
// that fails is refused whole: counted in SyncStats.Rejected, logged at
// WARN at most once a minute (rejectLogEvery), and answered so that the
// sender counts a failure (an error, a reply with no parts, nothing
// taken). What a message must hold:
//
//   - ids of 1 to actorlimit.MaxIDLength bytes, each in the partition the
//     message names, of a partition that exists;
//   - member names of at most MaxNodeLength bytes, at most maxNodes of them
//     in one key's state;
//   - counts, hits, charges and sums that are not negative;
//   - fixed windows no later than the next one by the receiver's clock (as
//     the embedded table loads them), and times no later than the end of
//     that window; deaths and the end of reset marks no later than
//     2 × algo.MaxSpan from now;
//   - states that decode and pass algo's checks, as the table loads them
//     (a fixed window's count is not negative, among others);
//   - resets that are resets;
//   - at most MaxRemembered remembered requests in a partition's state,
//     each with an id and time left, and decisions not negative.
//
// Which member may send what is checked against the receiver's view (see
// peerSync and handOffPart).

// MaxNodeLength is the longest member name (host:port) a member takes
// from another member's message.
const MaxNodeLength = 512

// maxNodes is the most members one key's state in a message may name.
const maxNodes = 1024

// rejectLogEvery is how often, at most, a member logs the messages it
// rejected.
const rejectLogEvery = time.Minute

// errPeer is wrapped by the error of every rejected peer message.
var errPeer = errors.New("cluster: peer message rejected")

// rejectLog is a member's record of its rejected messages' logging.
type rejectLog struct {
	next   atomic.Int64 // when (Unix ns, on the member's clock) the next line may be logged
	silent atomic.Uint64
}

// reject counts a rejected message, and logs err (why) unless a line was
// logged less than rejectLogEvery ago: the line says how many were
// rejected, unlogged, since the last.
func (m *Member) reject(kind string, err error) {
	m.counters.rejected.Add(1)
	now := m.cfg.Clock.Now().UnixNano()
	next := m.rejects.next.Load()
	if now < next || !m.rejects.next.CompareAndSwap(next, now+int64(rejectLogEvery)) {
		m.rejects.silent.Add(1)
		return
	}
	m.cfg.Logger.Warn("actorlimit cluster: rejected a message from another member (logged at most once a minute)",
		"message", kind, "error", err, "rejected_unlogged_since_last", m.rejects.silent.Swap(0))
}

// peerCheck checks one peer message at now, for member m.
type peerCheck struct {
	m   *Member
	now int64
}

func (m *Member) peerCheck() peerCheck {
	return peerCheck{m: m, now: m.cfg.Clock.Now().UnixNano()}
}

// partition checks that p is a partition.
func (pc peerCheck) partition(p uint32) error {
	if int64(p) >= int64(len(pc.m.parts)) {
		return fmt.Errorf("%w: partition %d of %d", errPeer, p, len(pc.m.parts))
	}
	return nil
}

// id checks that id is an id the API takes, of partition p.
func (pc peerCheck) id(id string, p uint32) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: an empty id", errPeer)
	case len(id) > actorlimit.MaxIDLength:
		return fmt.Errorf("%w: an id of %d bytes, more than %d", errPeer, len(id), actorlimit.MaxIDLength)
	case pc.m.partition(id) != int(p):
		return fmt.Errorf("%w: id %.64q is not of partition %d", errPeer, id, p)
	}
	return nil
}

// node checks a member's name.
func (pc peerCheck) node(name string) error {
	if name == "" || len(name) > MaxNodeLength {
		return fmt.Errorf("%w: a member name of %d bytes, not 1 to %d", errPeer, len(name), MaxNodeLength)
	}
	return nil
}

// count checks that n, a count called what, is not negative.
func count(what string, n int64) error {
	if n < 0 {
		return fmt.Errorf("%w: %s %d is negative", errPeer, what, n)
	}
	return nil
}

// period checks a key's period.
func period(ns int64) error {
	if ns <= 0 {
		return fmt.Errorf("%w: period %d ns is not positive", errPeer, ns)
	}
	return nil
}

// window checks a fixed window of period ns (positive): no later than the
// next one at now, and not so early that its start overflows.
func (pc peerCheck) window(w, period int64) error {
	if next := algo.FloorDiv(pc.now, period) + 1; w > next {
		return fmt.Errorf("%w: window %d of %v, after the next one (%d): the sender's clock is ahead", errPeer, w, time.Duration(period), next)
	}
	if w < math.MinInt64/period {
		return fmt.Errorf("%w: window %d of %v starts before the earliest time", errPeer, w, time.Duration(period))
	}
	return nil
}

// time checks that t (Unix ns), a time called what, is no later than the
// end of the next window of period at now.
func (pc peerCheck) time(what string, t, period int64) error {
	if limit := satAdd(pc.now, satAdd(period, period)); t > limit {
		return fmt.Errorf("%w: %s %d is later than the next window's end (%d)", errPeer, what, t, limit)
	}
	return nil
}

// until checks that t (Unix ns), a death or the end of a mark, is within
// 2 × algo.MaxSpan of now.
func (pc peerCheck) until(what string, t int64) error {
	if limit := satAdd(max(pc.now, 0), 2*int64(algo.MaxSpan)); t > limit {
		return fmt.Errorf("%w: %s %d is later than %d", errPeer, what, t, limit)
	}
	return nil
}

// check checks a check of partition p: what checkFromWire checks, and its
// id; a reset (want) must be one.
func (pc peerCheck) check(w *clusterpb.Check, p uint32, reset bool) (algo.Check, error) {
	if err := pc.id(w.GetId(), p); err != nil {
		return algo.Check{}, err
	}
	c, err := checkFromWire(w)
	if err != nil {
		return c, fmt.Errorf("%w: %w", errPeer, err)
	}
	if reset && c.Op != algo.OpReset {
		return c, fmt.Errorf("%w: a reset of op %d", errPeer, c.Op)
	}
	return c, nil
}

// state checks a key's state in the table's encoding as the table loads it
// (algo's checks: among them, a fixed window's count is not negative);
// scratch, a table of no bound, is left empty.
func (pc peerCheck) state(scratch *table.Table, a algo.Algorithm, period int64, id string, state []byte) error {
	if len(state) == 0 {
		return nil
	}
	r := algo.Record{Algorithm: a, Period: time.Duration(period), ID: id, Death: math.MaxInt64, State: state}
	if err := scratch.Load(pc.now, r); err != nil {
		return fmt.Errorf("%w: %w", errPeer, err)
	}
	scratch.Delete(table.Key{Kind: uint8(a), Scale: period, ID: id})
	return nil
}

// checkSync checks a sync request.
func (pc peerCheck) checkSync(req *clusterpb.SyncRequest) error {
	if err := pc.node(req.GetNode()); err != nil {
		return err
	}
	var scratch *table.Table
	for _, ps := range req.GetParts() {
		p := ps.GetPartition()
		if err := pc.partition(p); err != nil {
			return err
		}
		for _, t := range ps.GetTotals() {
			if err := pc.id(t.GetId(), p); err != nil {
				return err
			}
			if err := period(t.GetPeriodNs()); err != nil {
				return err
			}
			if err := pc.window(t.GetWindow(), t.GetPeriodNs()); err != nil {
				return err
			}
			if err := count("a total's hits", t.GetHits()); err != nil {
				return err
			}
			if err := pc.time("a total's last hit", t.GetLast(), t.GetPeriodNs()); err != nil {
				return err
			}
		}
		for _, h := range ps.GetHits() {
			c, err := pc.check(h.GetCheck(), p, false)
			if err != nil {
				return err
			}
			if len(h.GetAt()) != len(h.GetN()) {
				return fmt.Errorf("%w: %d hits' times for %d counts", errPeer, len(h.GetAt()), len(h.GetN()))
			}
			if err := count("hits' base", h.GetBase()); err != nil {
				return err
			}
			for _, n := range h.GetN() {
				if err := count("hits", n); err != nil {
					return err
				}
			}
			if err := pc.time("hits' reset", h.GetResetAt(), int64(c.Period)); err != nil {
				return err
			}
			if len(h.GetState()) > 0 {
				if scratch == nil {
					scratch = table.New(0)
				}
				if err := pc.state(scratch, c.Algorithm, int64(c.Period), c.ID, h.GetState()); err != nil {
					return err
				}
			}
		}
		for _, r := range ps.GetResets() {
			if _, err := pc.check(r, p, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDecide checks a request for decisions; it returns its checks.
func (pc peerCheck) checkDecide(req *clusterpb.DecideRequest) ([]algo.Check, error) {
	p := req.GetPartition()
	if err := pc.partition(p); err != nil {
		return nil, err
	}
	checks := make([]algo.Check, len(req.GetChecks()))
	for i, w := range req.GetChecks() {
		c, err := pc.check(w, p, false)
		if err != nil {
			return nil, err
		}
		checks[i] = c
	}
	for _, ch := range req.GetCharges() {
		if len(ch.GetAllowed()) > len(ch.GetChecks()) {
			return nil, fmt.Errorf("%w: a charge of %d checks with %d answers", errPeer, len(ch.GetChecks()), len(ch.GetAllowed()))
		}
		for _, w := range ch.GetChecks() {
			c, err := pc.check(w, p, false)
			if err != nil {
				return nil, err
			}
			// A charge's hits count as of when they were made: never
			// later than the end of the next window, as a total's.
			if err := pc.time("charge", ch.GetSentNs(), int64(c.Period)); err != nil {
				return nil, err
			}
		}
	}
	return checks, nil
}

// checkHandOff checks a hand-off's names and, unless it asks, the states it
// carries.
func (pc peerCheck) checkHandOff(h *clusterpb.HandOff) error {
	if err := pc.node(h.GetFrom()); err != nil {
		return err
	}
	var scratch *table.Table
	for _, st := range h.GetParts() {
		p := st.GetPartition()
		if err := pc.partition(p); err != nil {
			return err
		}
		if h.GetAsk() {
			continue
		}
		if scratch == nil {
			scratch = table.New(0)
		}
		if err := pc.partState(scratch, st); err != nil {
			return err
		}
	}
	return nil
}

// nodes checks the member names of one key's state.
func (pc peerCheck) nodes(n int, name func(i int) string) error {
	if n > maxNodes {
		return fmt.Errorf("%w: a key's state names %d members, more than %d", errPeer, n, maxNodes)
	}
	for i := range n {
		if err := pc.node(name(i)); err != nil {
			return err
		}
	}
	return nil
}

// partState checks a partition's state.
func (pc peerCheck) partState(scratch *table.Table, st *clusterpb.PartState) error {
	p := st.GetPartition()
	for _, w := range st.GetWindows() {
		if err := pc.id(w.GetId(), p); err != nil {
			return err
		}
		if err := period(w.GetPeriodNs()); err != nil {
			return err
		}
		if err := pc.window(w.GetWindow(), w.GetPeriodNs()); err != nil {
			return err
		}
		if err := count("a window's sum", w.GetSum()); err != nil {
			return err
		}
		ns := w.GetNodes()
		if err := pc.nodes(len(ns), func(i int) string { return ns[i].GetNode() }); err != nil {
			return err
		}
		for _, n := range ns {
			if err := count("a member's base", n.GetBase()); err != nil {
				return err
			}
			if err := count("a member's hits", n.GetHits()); err != nil {
				return err
			}
		}
	}
	for _, r := range st.GetRecords() {
		a := algo.Algorithm(r.GetAlgorithm())
		if !a.Known() {
			return fmt.Errorf("%w: algorithm %d", errPeer, r.GetAlgorithm())
		}
		if err := pc.id(r.GetId(), p); err != nil {
			return err
		}
		if err := period(r.GetPeriodNs()); err != nil {
			return err
		}
		if err := pc.until("a record's death", r.GetDeath()); err != nil {
			return err
		}
		if len(r.GetState()) == 0 {
			return fmt.Errorf("%w: a record with no state", errPeer)
		}
		if err := pc.state(scratch, a, r.GetPeriodNs(), r.GetId(), r.GetState()); err != nil {
			return err
		}
	}
	for _, c := range st.GetCharged() {
		if a := algo.Algorithm(c.GetAlgorithm()); !a.Known() || a == algo.FixedWindow {
			return fmt.Errorf("%w: charged hits of algorithm %d", errPeer, c.GetAlgorithm())
		}
		if err := pc.id(c.GetId(), p); err != nil {
			return err
		}
		if err := period(c.GetPeriodNs()); err != nil {
			return err
		}
		if err := pc.until("charged hits' death", c.GetDeath()); err != nil {
			return err
		}
		ns := c.GetNodes()
		if err := pc.nodes(len(ns), func(i int) string { return ns[i].GetNode() }); err != nil {
			return err
		}
		for _, n := range ns {
			if err := count("charged hits", n.GetDone()); err != nil {
				return err
			}
		}
	}
	for _, r := range st.GetResets() {
		if a := algo.Algorithm(r.GetAlgorithm()); !a.Known() {
			return fmt.Errorf("%w: a reset of algorithm %d", errPeer, r.GetAlgorithm())
		}
		if err := pc.id(r.GetId(), p); err != nil {
			return err
		}
		if err := period(r.GetPeriodNs()); err != nil {
			return err
		}
		if err := pc.time("a reset", r.GetAt(), r.GetPeriodNs()); err != nil {
			return err
		}
		if err := pc.until("a reset's end", r.GetUntil()); err != nil {
			return err
		}
	}
	return pc.remembered(st.GetRemembered())
}

// remembered checks the requests a partition's previous owner remembered:
// at most MaxRemembered, each with an id, time left, no decision when
// charged, and decisions whose counts and waits are not negative.
func (pc peerCheck) remembered(reqs []*clusterpb.Remembered) error {
	if len(reqs) > MaxRemembered {
		return fmt.Errorf("%w: %d remembered requests, more than %d", errPeer, len(reqs), MaxRemembered)
	}
	for _, r := range reqs {
		switch {
		case r.GetRequestId() == 0:
			return fmt.Errorf("%w: a remembered request with no id", errPeer)
		case r.GetLeftNs() <= 0:
			return fmt.Errorf("%w: a remembered request with %d ns left", errPeer, r.GetLeftNs())
		case r.GetCharged() && len(r.GetDecisions()) > 0:
			return fmt.Errorf("%w: a remembered charge with %d decisions", errPeer, len(r.GetDecisions()))
		}
		for _, d := range r.GetDecisions() {
			for _, n := range []struct {
				what string
				v    int64
			}{{"a decision's count", d.GetCount()}, {"a decision's remaining", d.GetRemaining()},
				{"a decision's retry after", d.GetRetryAfterNs()}, {"a decision's reset after", d.GetResetAfterNs()},
				{"a decision's delay", d.GetDelayNs()}} {
				if err := count(n.what, n.v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// peerSync reports whether the member takes node's syncs: a member
// started by Start takes them only from the members in its view (a
// member it took for dead, or one it has not heard of yet, is refused,
// and sends them again); one made by a test without a cluster takes every
// node's.
func (m *Member) peerSync(node string) bool {
	if m.engine() == nil {
		return true
	}
	v := m.view.Load()
	return v != nil && v.has(node)
}

// handOffTake is what a member does with one partition of a hand-off.
type handOffTake uint8

const (
	// refuseHandOff: the partition is not taken (the sender sends it
	// again, until the views agree).
	refuseHandOff handOffTake = iota
	// ownHandOff: the member owns the partition from now on.
	ownHandOff
	// keepHandOff: the member keeps the state as its backup of the
	// partition, which it takes over when its view drops the sender.
	keepHandOff
)

// handOffPart says what the member does with partition p's state handed
// on by from, in its view v (m.own.mu is held): it owns it if its view
// gives it p and from is another member in its view; it keeps it as its
// backup if its view gives p to from and the view without from (without,
// made when first needed) gives it to this member: from is leaving, and
// this member is its successor. Else, as for a hand-off from a member it
// does not know, it refuses it. A member made by a test without a cluster
// owns every partition handed to it.
func (m *Member) handOffPart(from string, p int, v *view, without func() *view) handOffTake {
	if m.engine() == nil {
		return ownHandOff
	}
	if v == nil || from == m.node || !v.has(from) {
		return refuseHandOff
	}
	switch v.owner(p) {
	case m.node:
		return ownHandOff
	case from:
		if without().owner(p) == m.node {
			return keepHandOff
		}
	}
	return refuseHandOff
}

// backupFrom reports whether the member takes from's backup of partition
// p, in its view v: when its view says from owns p and this member is p's
// backup. A member made by a test without a cluster takes every backup.
func (m *Member) backupFrom(from string, p int, v *view) bool {
	if m.engine() == nil {
		return true
	}
	return v != nil && from != m.node && v.has(from) && v.owner(p) == from && v.backup(p) == m.node
}
