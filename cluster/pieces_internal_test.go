package cluster

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// bigState is a partition's state of n keys of each kind, with ids of
// idLen bytes, and n remembered requests.
func bigState(n, idLen int) *clusterpb.PartState {
	st := &clusterpb.PartState{Partition: 7}
	pad := strings.Repeat("x", idLen)
	for i := range n {
		id := fmt.Sprintf("%s%08d", pad, i)
		st.Windows = append(st.Windows, &clusterpb.Window{Id: id, PeriodNs: 1e9, Window: 5, Sum: 3,
			Nodes: []*clusterpb.NodeTotal{{Node: "127.0.0.1:4001", Epoch: 9, Hits: 3}}})
		st.Records = append(st.Records, &clusterpb.Record{Algorithm: uint32(algo.TokenBucket), PeriodNs: 1e9, Id: id, Death: 1e18, State: []byte("0123456789abcdef")})
		st.Charged = append(st.Charged, &clusterpb.Charged{Algorithm: uint32(algo.TokenBucket), PeriodNs: 1e9, Id: id, Death: 1e18,
			Nodes: []*clusterpb.NodeCharged{{Node: "127.0.0.1:4002", Epoch: 4, Done: 8}}})
		st.Resets = append(st.Resets, &clusterpb.Reset{Algorithm: uint32(algo.GCRA), Id: id, PeriodNs: 1e9, At: 5, Until: 1e18})
		st.Remembered = append(st.Remembered, &clusterpb.Remembered{RequestId: uint64(i) + 1, LeftNs: 1e9,
			Decisions: []*clusterpb.Decision{{Allowed: true, Count: 3, Remaining: 7}}})
	}
	return st
}

// TestStateInPieces: a state larger than a message goes in pieces of at
// most MaxMessageBytes, in messages of at most MaxMessageBytes; the
// receiver takes it only with its last piece, whole; a piece out of order
// or of another export drops what was assembled, and nothing is taken.
func TestStateInPieces(t *testing.T) {
	st := bigState(20_000, 40) // about 6 MB
	require.Greater(t, proto.Size(st), 4<<20, "larger than gRPC's limit")
	var v uint64
	msgs := messages([]*clusterpb.PartState{st, bigState(10, 4)}, func() uint64 { v++; return v })
	require.Greater(t, len(msgs), 8)
	var all []*clusterpb.PartState
	for _, msg := range msgs {
		h := &clusterpb.HandOff{From: "127.0.0.1:4001", Parts: msg, KeyPrint: 1 << 63}
		assert.LessOrEqual(t, proto.Size(h), MaxMessageBytes)
		all = append(all, msg...)
	}
	small := all[len(all)-1]
	assert.Zero(t, small.GetPieces(), "a state that fits goes whole")
	all = all[:len(all)-1]

	m := assembler(20_000)
	for i, pc := range all {
		got := m.assemble("127.0.0.1:4001", pc, false)
		if i < len(all)-1 {
			require.Nil(t, got, "piece %d of %d", i, len(all))
			continue
		}
		require.NotNil(t, got, "the last piece")
		assert.True(t, proto.Equal(st, got), "the whole state")
	}
	assert.Empty(t, m.own.assembling, "nothing left once taken")

	tests := []struct {
		name  string
		order []int // pieces sent, by index into all
	}{
		{"a piece missing", append([]int{0, 2}, rest(3, len(all))...)},
		{"a piece twice", append([]int{0, 1, 1}, rest(2, len(all))...)},
		{"from the middle", rest(1, len(all))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := assembler(20_000)
			for _, i := range tt.order {
				assert.Nil(t, m.assemble("127.0.0.1:4001", all[i], false), "piece %d", i)
			}
		})
	}
	t.Run("another sender's pieces", func(t *testing.T) {
		m := assembler(20_000)
		for i, pc := range all {
			from := "127.0.0.1:4001"
			if i == 3 {
				from = "127.0.0.1:4009"
			}
			assert.Nil(t, m.assemble(from, pc, false), "piece %d", i)
		}
	})
	t.Run("a backup and a hand-off at once", func(t *testing.T) {
		m := assembler(20_000)
		for i, pc := range all {
			if i < len(all)-1 {
				assert.Nil(t, m.assemble("a", pc, true))
				assert.Nil(t, m.assemble("a", pc, false))
			}
		}
		assert.True(t, proto.Equal(st, m.assemble("a", all[len(all)-1], true)))
		assert.True(t, proto.Equal(st, m.assemble("a", all[len(all)-1], false)))
	})
}

// assembler is a member that assembles pieces, whose bounds let a
// partition hold at least entries keys of each kind.
func assembler(entries int) *Member {
	return &Member{cfg: Config{Partitions: 1, MaxEntries: entries, Logger: slog.New(slog.DiscardHandler)}}
}

// TestPiecesBounded: what a member assembles from pieces is bounded by its
// own bounds as each piece arrives: a first piece that says more pieces
// than they allow (2^32-1) is dropped and nothing is kept; pieces whose
// entries of a kind, remembered requests or bytes pass them have the
// assembly dropped at the piece that passes, the later ones dropped too
// (nothing taken, nothing kept); a piece that says another count than the
// first drops the assembly; pieces within them are taken.
func TestPiecesBounded(t *testing.T) {
	const entries = 100 // partEntries 113
	bounds := assembler(entries).cfg.stateBounds()
	require.Equal(t, 113, bounds.entries)
	require.Equal(t, uint32(55), bounds.pieces)
	window := func(i int) *clusterpb.Window {
		return &clusterpb.Window{Id: fmt.Sprint("w", i), PeriodNs: 1e9, Window: 1, Sum: 1}
	}
	record := func(i int) *clusterpb.Record {
		return &clusterpb.Record{Algorithm: uint32(algo.TokenBucket), PeriodNs: 1e9, Id: fmt.Sprint("r", i), State: make([]byte, 400<<10)}
	}
	// piecesOf makes n pieces of one export, piece i filled by fill.
	piecesOf := func(n int, fill func(i int, st *clusterpb.PartState)) []*clusterpb.PartState {
		out := make([]*clusterpb.PartState, n)
		for i := range out {
			out[i] = &clusterpb.PartState{Partition: 0, Piece: uint32(i), Pieces: uint32(n), Version: 9}
			fill(i, out[i])
		}
		return out
	}
	tests := []struct {
		name    string
		pieces  []*clusterpb.PartState
		refused int  // the piece at which the assembly is dropped; -1: taken whole
		counted bool // the drop is counted as a refusal (a bound passed)
	}{
		{"within the bounds", piecesOf(4, func(i int, st *clusterpb.PartState) {
			for j := range 28 {
				st.Windows = append(st.Windows, window(28*i+j))
			}
			st.Records = append(st.Records, record(i))
		}), -1, false},
		{"2^32-1 pieces", piecesOf(1, func(_ int, st *clusterpb.PartState) { st.Pieces = 1<<32 - 1 }), 0, true},
		{"windows over the entries", piecesOf(8, func(i int, st *clusterpb.PartState) {
			for j := range 30 {
				st.Windows = append(st.Windows, window(30*i+j))
			}
		}), 3, true},
		{"remembered over MaxRemembered", piecesOf(8, func(i int, st *clusterpb.PartState) {
			for j := range MaxRemembered / 4 {
				st.Remembered = append(st.Remembered, &clusterpb.Remembered{RequestId: uint64(i*MaxRemembered + j)})
			}
		}), 4, true},
		{"bytes over the bound", piecesOf(int(bounds.pieces), func(i int, st *clusterpb.PartState) {
			st.Records = append(st.Records, record(i)) // 113 such records would be 45 MB
		}), int(bounds.bytes / int64(proto.Size(&clusterpb.PartState{Piece: 9, Pieces: 55, Version: 9, Records: []*clusterpb.Record{record(10)}}))), true},
		{"a count other than the first's", append(piecesOf(2, func(int, *clusterpb.PartState) {})[:1],
			&clusterpb.PartState{Partition: 0, Piece: 1, Pieces: 3, Version: 9}), 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := assembler(entries)
			for i, pc := range tt.pieces {
				got := m.assemble("127.0.0.1:4001", pc, false)
				switch {
				case tt.refused < 0 && i == len(tt.pieces)-1:
					require.NotNil(t, got, "the last piece")
					assert.Len(t, got.GetWindows(), 112)
				case got != nil:
					t.Fatalf("piece %d of %d: a state taken", i, len(tt.pieces))
				case tt.refused >= 0 && i < tt.refused:
					require.Len(t, m.own.assembling, 1, "piece %d: kept", i)
				case tt.refused >= 0:
					require.Empty(t, m.own.assembling, "piece %d: dropped at piece %d", i, tt.refused)
				}
			}
			assert.Empty(t, m.own.assembling, "nothing kept")
			if tt.counted {
				assert.Equal(t, uint64(1), m.counters.refusals.Load(), "refusals")
			} else {
				assert.Zero(t, m.counters.refusals.Load(), "refusals")
			}
		})
	}
}

func rest(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestSyncPartFits: a partition's sync part is cut to one message: its
// resets first, alone when they do not all fit; then totals, then hits.
func TestSyncPartFits(t *testing.T) {
	id := strings.Repeat("i", 1000)
	totals := func(n int) []pending {
		out := make([]pending, n)
		for i := range out {
			out[i] = pending{key: localKey{id: fmt.Sprint(id, i), period: 1e9}, window: 1, hits: 1, epoch: 1}
		}
		return out
	}
	resets := func(n int) []queuedReset {
		out := make([]queuedReset, n)
		for i := range out {
			out[i] = queuedReset{check: algo.Check{ID: fmt.Sprint(id, i), Algorithm: algo.GCRA, Period: 1e9, Limit: 1, N: 1}}
		}
		return out
	}
	tests := []struct {
		name           string
		totals, resets int
		cut            bool // something is left for the next round
		totalsLeft     bool // some totals go, with the resets
	}{
		{"fits", 10, 10, false, true},
		{"too many totals", 2000, 0, true, true},
		{"resets and totals", 1000, 100, true, true},
		{"too many resets", 10, 2000, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &partWork{totals: totals(tt.totals), resets: resets(tt.resets)}
			w.fit()
			n, r := len(w.totals), len(w.resets)
			t.Logf("%d of %d totals, %d of %d resets", n, tt.totals, r, tt.resets)
			assert.Equal(t, tt.cut, n+r < tt.totals+tt.resets, "cut")
			assert.Equal(t, tt.totalsLeft, n > 0, "totals sent")
			assert.Positive(t, r+n)
			if n > 0 {
				assert.Equal(t, tt.resets, r, "every reset goes before a total")
			}
			m := newMember(Config{Partitions: 8, MaxEntries: 8, MaxCopies: 8, Clock: wallClock{}, PartitionKey: defaultPartitionKey("x")}, "n", nil)
			size := proto.Size(m.part(1, w, true))
			assert.LessOrEqual(t, size, pieceBudget)
			if tt.cut {
				assert.Greater(t, size, pieceBudget*9/10, "a cut part is nearly full")
			}
		})
	}
}
