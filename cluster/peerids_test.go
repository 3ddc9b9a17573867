package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/internal/logtest"
)

// TestPeerIDsChecked: a total from a peer is rejected whole when its id is
// empty, longer than actorlimit.MaxIDLength or of another partition than the
// one the message names, each in a partition the receiver owns; an id of
// MaxIDLength bytes in its partition is taken.
func TestPeerIDsChecked(t *testing.T) {
	clock := newFakeClock()
	probe := ownerOfPartition(t, clock, &logtest.Recorder{}, 0)
	long := func(n int) func(p int) string {
		return func(p int) string {
			for i := range 100_000 {
				if id := fmt.Sprintf("%s%06d", strings.Repeat("x", n-6), i); probe.PartitionOf(id) == p {
					return id
				}
			}
			t.Fatalf("no id of %d bytes in partition %d", n, p)
			return ""
		}
	}
	tests := []struct {
		name  string
		p     int
		id    func(p int) string
		taken bool
	}{
		{"empty", probe.PartitionOf(""), func(int) string { return "" }, false},
		{"one byte past MaxIDLength", 7, long(actorlimit.MaxIDLength + 1), false},
		{"of another partition", 7, func(p int) string { return keyIn(t, probe, p+1) }, false},
		{"MaxIDLength bytes", 7, long(actorlimit.MaxIDLength), true},
		{"an ordinary id", 7, func(p int) string { return keyIn(t, probe, p) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ownerOfPartition(t, clock, &logtest.Recorder{}, tt.p)
			id := tt.id(tt.p)
			if tt.taken {
				assert.Equal(t, tt.p, m.PartitionOf(id), "the test's id is of its partition")
			}
			window := clock.Now().UnixNano() / int64(time.Minute)
			req := &clusterpb.SyncRequest{Node: "peer", Parts: []*clusterpb.PartSync{{Partition: uint32(tt.p),
				Totals: []*clusterpb.Total{{Id: id, PeriodNs: int64(time.Minute), Window: window, Hits: 1, Epoch: 1}}}}}
			reply := m.HandleSync(req).(*clusterpb.SyncReply)
			if tt.taken {
				assert.Len(t, reply.GetParts(), 1)
				assert.Equal(t, uint64(0), m.SyncStats().Rejected)
			} else {
				assert.Empty(t, reply.GetParts(), "a rejected sync is answered with no parts")
				assert.Equal(t, uint64(1), m.SyncStats().Rejected)
			}
		})
	}
}
