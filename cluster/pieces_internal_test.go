package cluster

import (
	"fmt"
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

	m := &Member{}
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
			m := &Member{}
			for _, i := range tt.order {
				assert.Nil(t, m.assemble("127.0.0.1:4001", all[i], false), "piece %d", i)
			}
		})
	}
	t.Run("another sender's pieces", func(t *testing.T) {
		m := &Member{}
		for i, pc := range all {
			from := "127.0.0.1:4001"
			if i == 3 {
				from = "127.0.0.1:4009"
			}
			assert.Nil(t, m.assemble(from, pc, false), "piece %d", i)
		}
	})
	t.Run("a backup and a hand-off at once", func(t *testing.T) {
		m := &Member{}
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
