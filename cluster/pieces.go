package cluster

import (
	"fmt"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// Bounded messages. A member's server refuses a gRPC message over
// MaxReceiveBytes (MaxMessageBytes and the engine's envelope), before it
// is decoded, and a member sends each message in a gRPC message of its own
// (the engine would otherwise send what is queued for one member in one).
// So every message a member sends another is kept under MaxMessageBytes,
// and the large ones go one at a time to each member: a sync round sends
// its pieces to an owner one after another, and its backups after it; a
// hand-off sends its pieces one after another.
//
//   - A sync round sends each owner its partitions' parts in requests of at
//     most MaxMessageBytes, with answers estimated as large at most. A
//     partition's part is cut to fit: its queued resets first (when they do
//     not all fit, only they go, the rest at the next rounds, so the owner
//     applies every reset before the hits after it), then its totals, then
//     its hits; the keys left out stay active and go at the next round.
//   - A partition's state (a backup, a hand-off) larger than a message goes
//     in numbered pieces of one export (its version), in order; the
//     receiver assembles them and takes the state only once it has all of
//     them: a hand-off never starts a partition with part of its state, and
//     a backup replaces the one before only when whole. A piece that fails
//     has the whole state sent again, under a new version. The receiver
//     bounds what it assembles by its own bounds, as each piece arrives:
//     the pieces' number, each kind of entry (its owner's MaxEntries'
//     share of a partition, MaxRemembered) and their total bytes (see
//     stateBounds); past a bound the assembly is dropped, and a piece
//     count over the bound is refused at the first piece.
//   - A run of checks sent to an owner in one request (DoMany) is cut where
//     its ids pass MaxMessageBytes.

// MaxMessageBytes bounds the protobuf size of every request a member sends
// another, and (estimated) of the answer: an eighth of gRPC's 4 MiB.
const MaxMessageBytes = 512 << 10

// MaxReceiveBytes is the largest gRPC message a member's server takes:
// MaxMessageBytes and the engine's envelope (the batch's type name, the
// target's and sender's PIDs, a header). A member sends one message of the
// engine in each gRPC message, so that its own messages always fit; a
// larger one is refused by gRPC before it is decoded, and the connection
// that sent it is closed.
const MaxReceiveBytes = MaxMessageBytes + envelopeBytes

// envelopeBytes is the room left, in MaxReceiveBytes, for the engine's
// envelope of one message: some hundreds of bytes, and the engine's own
// messages (gossip: some hundred bytes a member) of a cluster of a few
// hundred members.
const envelopeBytes = 128 << 10

// pieceBudget is what the parts of one message may take: MaxMessageBytes
// less room for the message's own fields.
const pieceBudget = MaxMessageBytes - 4<<10

// Estimated protobuf sizes of what a sync part carries, and of its answer.
const (
	partCost       = 64  // a part's own fields
	totalCost      = 48  // a Total, less its id
	countCost      = 24  // a Count
	resetCost      = 64  // a reset, less its id
	checkCost      = 64  // a Check or a Decision, less its id
	stateReplyCost = 128 // a State, less a sliding log's entries
)

// stateAnswerCost estimates the size of the owner's answer to hits of c's
// key: a sliding log's state holds up to Limit times.
func stateAnswerCost(c *clusterpb.Check) int {
	if algo.Algorithm(c.GetAlgorithm()) == algo.SlidingLog {
		return stateReplyCost + 10*int(min(max(c.GetLimit(), 0), algo.MaxSlidingLogLimit))
	}
	return stateReplyCost
}

// fit cuts w, one partition's work, to what one message may carry, request
// and answer: its resets first (when they do not all fit, they go alone),
// then its totals, then its hits. What it leaves out goes at the next
// round: the keys stay active, the resets queued. It returns w's request
// and answer sizes, estimated.
func (w *partWork) fit() (req, answer int) {
	req, answer = partCost, partCost
	for i, r := range w.resets {
		c := resetCost + len(r.check.ID)
		if i > 0 && req+c > pieceBudget {
			w.resets, w.totals, w.hits = w.resets[:i], nil, nil
			return req, answer
		}
		req += c
	}
	for i, pd := range w.totals {
		c := totalCost + len(pd.key.id)
		if i > 0 && (req+c > pieceBudget || answer+countCost > pieceBudget) {
			w.totals, w.hits = w.totals[:i], nil
			return req, answer
		}
		req, answer = req+c, answer+countCost
	}
	for i, sp := range w.hits {
		c, a := proto.Size(sp.hits)+8, stateAnswerCost(sp.hits.GetCheck())
		if (i > 0 || len(w.totals) > 0) && (req+c > pieceBudget || answer+a > pieceBudget) {
			w.hits = w.hits[:i]
			return req, answer
		}
		req, answer = req+c, answer+a
	}
	return req, answer
}

// fitAll cuts every partition's work in ws to one message (see fit).
func (ws partWorks) fitAll() {
	for _, w := range ws {
		w.fit()
	}
}

// batches groups parts, partitions whose work is in ws (each cut by fit),
// into runs that fit one message each, request and answer.
func (ws partWorks) batches(parts []int) [][]int {
	var (
		out          [][]int
		cur          []int
		req, answer  int
		oneReq, oneA int
	)
	for _, p := range parts {
		oneReq, oneA = ws[p].fit()
		if len(cur) > 0 && (req+oneReq > pieceBudget || answer+oneA > pieceBudget) {
			out, cur, req, answer = append(out, cur), nil, 0, 0
		}
		cur, req, answer = append(cur, p), req+oneReq, answer+oneA
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// runEnd returns where the run of checks that starts at checks[0] must end
// for its request to fit one message: at most at end.
func runEnd(checks []algo.Check, end int) int {
	size := 0
	for i := range end {
		size += checkCost + len(checks[i].ID)
		if i > 0 && size > pieceBudget {
			return i
		}
	}
	return end
}

// pieces returns st in pieces of at most pieceBudget each, in order,
// numbered, of export version; st alone, whole, when it fits.
func pieces(st *clusterpb.PartState, version uint64) []*clusterpb.PartState {
	if proto.Size(st) <= pieceBudget {
		return []*clusterpb.PartState{st}
	}
	var (
		out  []*clusterpb.PartState
		cur  *clusterpb.PartState
		size int
	)
	room := func(n int) *clusterpb.PartState {
		if cur == nil || size > 0 && size+n > pieceBudget {
			cur = &clusterpb.PartState{Partition: st.GetPartition(), Piece: uint32(len(out)), Version: version}
			out, size = append(out, cur), 0
		}
		size += n
		return cur
	}
	for _, w := range st.GetWindows() {
		c := room(proto.Size(w) + 8)
		c.Windows = append(c.Windows, w)
	}
	for _, r := range st.GetRecords() {
		c := room(proto.Size(r) + 8)
		c.Records = append(c.Records, r)
	}
	for _, ch := range st.GetCharged() {
		c := room(proto.Size(ch) + 8)
		c.Charged = append(c.Charged, ch)
	}
	for _, r := range st.GetResets() {
		c := room(proto.Size(r) + 8)
		c.Resets = append(c.Resets, r)
	}
	for _, r := range st.GetRemembered() {
		c := room(proto.Size(r) + 8)
		c.Remembered = append(c.Remembered, r)
	}
	for _, c := range out {
		c.Pieces = uint32(len(out))
	}
	return out
}

// messages groups states' pieces, in order, into the parts of messages of
// at most pieceBudget each.
func messages(states []*clusterpb.PartState, version func() uint64) [][]*clusterpb.PartState {
	var (
		out  [][]*clusterpb.PartState
		cur  []*clusterpb.PartState
		size int
	)
	for _, st := range states {
		for _, pc := range pieces(st, version()) {
			n := proto.Size(pc) + 8
			if len(cur) > 0 && size+n > pieceBudget {
				out, cur, size = append(out, cur), nil, 0
			}
			cur, size = append(cur, pc), size+n
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// sendStates sends states (whole partitions' states) to the member at to
// in messages of at most MaxMessageBytes, one after another, each made by
// msg and given timeout to be answered; it stops at the first that fails.
// It returns the partitions the member took (those whose last piece it
// acknowledged), and the error that stopped it.
func (m *Member) sendStates(to string, states []*clusterpb.PartState, msg func(parts []*clusterpb.PartState) *clusterpb.HandOff, timeout time.Duration) ([]uint32, error) {
	var taken []uint32
	for _, parts := range messages(states, func() uint64 { return m.own.version.Add(1) }) {
		h := msg(parts)
		h.From, h.KeyPrint = m.node, m.hash.print
		resp, err := m.engine().ActorSystem.Root.RequestFuture(protoactor.NewPID(to, syncActor), h, timeout).Result()
		if err != nil {
			return taken, err
		}
		reply, ok := resp.(*clusterpb.HandOffReply)
		if !ok {
			return taken, fmt.Errorf("cluster: member %s answered %T", to, resp)
		}
		taken = append(taken, reply.GetTaken()...)
	}
	return taken, nil
}

// assemblyKey names a state being assembled from pieces: its partition,
// and whether it is a backup.
type assemblyKey struct {
	part   int
	backup bool
}

// assembly is a state being assembled from its pieces.
type assembly struct {
	from    string
	version uint64
	pieces  uint32 // how many the first piece said
	next    uint32 // the piece it expects
	bytes   int64  // the pieces' protobuf sizes so far
	state   *clusterpb.PartState
}

// Per-entry sizes stateBounds allows, in protobuf bytes.
const (
	// entryBytes is a window's, record's, charge's or reset's fields
	// other than its id and a record's state (a window's or a charge's
	// members' parts among them).
	entryBytes = 1 << 10
	// recordStateBytes is a record's state: a sliding log's times, the
	// largest.
	recordStateBytes = 64 + 10*algo.MaxSlidingLogLimit
	// rememberedBytes is a remembered request with its decisions.
	rememberedBytes = 256
)

// stateBounds is the most a partition's state may hold that a member
// assembles from pieces: what its own bounds let it hold of the
// partition, as owner.
type stateBounds struct {
	entries    int    // each of windows, records, charges and resets
	remembered int    // remembered requests
	bytes      int64  // the pieces' protobuf sizes together
	pieces     uint32 // the pieces
}

// stateBounds returns the bounds of a partition's state the member takes
// in pieces: MaxEntries' share of a partition of each kind of entry
// (partEntries), MaxRemembered requests, each entry at most the id's
// bound and its fields (entryBytes, recordStateBytes, rememberedBytes);
// and as many pieces as those bytes make, each filled by the sender to at
// least pieceBudget less its largest entry, and one.
func (c Config) stateBounds() stateBounds {
	n := int64(c.partEntries())
	b := stateBounds{entries: int(n), remembered: MaxRemembered}
	b.bytes = 4*n*(actorlimit.MaxIDLength+entryBytes) + n*recordStateBytes + MaxRemembered*rememberedBytes
	fill := int64(pieceBudget - (actorlimit.MaxIDLength + entryBytes + recordStateBytes))
	b.pieces = uint32(min(b.bytes/fill+2, 1<<31))
	return b
}

// over reports which bound of b a holds past, "" if none.
func (b stateBounds) over(a *assembly) string {
	st := a.state
	switch {
	case a.pieces > b.pieces:
		return fmt.Sprintf("%d pieces, over %d", a.pieces, b.pieces)
	case a.bytes > b.bytes:
		return fmt.Sprintf("%d bytes, over %d", a.bytes, b.bytes)
	case max(len(st.Windows), len(st.Records), len(st.Charged), len(st.Resets)) > b.entries:
		return fmt.Sprintf("%d windows, %d records, %d charges, %d resets: over %d of a kind",
			len(st.Windows), len(st.Records), len(st.Charged), len(st.Resets), b.entries)
	case len(st.Remembered) > b.remembered:
		return fmt.Sprintf("%d remembered requests, over %d", len(st.Remembered), b.remembered)
	}
	return ""
}

// assemble takes st, a state or a piece of one from the member from, and
// returns the whole state once it has every piece (st itself when whole),
// else nil. A piece out of order, or of another export, is dropped, and so
// is what was assembled of the export before: the sender sends the whole
// state again when a piece fails. So is an assembly that would pass the
// member's bounds (Config.stateBounds), checked as each piece arrives: a
// first piece that says more pieces than the bounds allow is dropped at
// once, and so is the assembly, counted in refusals and logged at WARN.
// m.own.mu is held.
func (m *Member) assemble(from string, st *clusterpb.PartState, backup bool) *clusterpb.PartState {
	if st.GetPieces() <= 1 {
		return st
	}
	k := assemblyKey{part: int(st.GetPartition()), backup: backup}
	a := m.own.assembling[k]
	switch {
	case st.GetPiece() == 0:
		a = &assembly{from: from, version: st.GetVersion(), pieces: st.GetPieces(), state: &clusterpb.PartState{Partition: st.GetPartition()}}
		if m.own.assembling == nil {
			m.own.assembling = make(map[assemblyKey]*assembly)
		}
		m.own.assembling[k] = a
	case a == nil || a.from != from || a.version != st.GetVersion() || a.next != st.GetPiece() || a.pieces != st.GetPieces():
		delete(m.own.assembling, k)
		return nil
	}
	a.next++
	a.bytes += int64(proto.Size(st))
	a.state.Windows = append(a.state.Windows, st.GetWindows()...)
	a.state.Records = append(a.state.Records, st.GetRecords()...)
	a.state.Charged = append(a.state.Charged, st.GetCharged()...)
	a.state.Resets = append(a.state.Resets, st.GetResets()...)
	a.state.Remembered = append(a.state.Remembered, st.GetRemembered()...)
	if why := m.cfg.stateBounds().over(a); why != "" {
		delete(m.own.assembling, k)
		m.counters.refusals.Add(1)
		m.cfg.Logger.Warn("actorlimit cluster: a state in pieces passes the member's bounds: dropped",
			"from", from, "partition", k.part, "backup", backup, "piece", st.GetPiece(), "why", why)
		return nil
	}
	if a.next < a.pieces {
		return nil
	}
	delete(m.own.assembling, k)
	return a.state
}
