package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// BenchmarkPeerCheckSync: the checks of a sync of 100 fixed-window totals
// of 20-byte ids, one partition (check), and the whole of handleSync on it,
// the checks included (handle: the totals sent again, as a retried sync's).
func BenchmarkPeerCheckSync(b *testing.B) {
	b.Run("part=check", func(b *testing.B) { benchSync(b, false) })
	b.Run("part=handle", func(b *testing.B) { benchSync(b, true) })
}

func benchSync(b *testing.B, handle bool) {
	m := fuzzMember(b)
	now := fuzzNow.UnixNano()
	minute := int64(time.Minute)
	part := &clusterpb.PartSync{Partition: 0}
	for i := 0; len(part.Totals) < 100; i++ {
		if id := fmt.Sprintf("user:%015d", i); m.partition(id) == 0 {
			part.Totals = append(part.Totals, &clusterpb.Total{Id: id, PeriodNs: minute, Window: now / minute, Hits: 3, Epoch: 1, Last: now})
		}
	}
	req := &clusterpb.SyncRequest{Node: "peer:1", Parts: []*clusterpb.PartSync{part}, KeyPrint: m.hash.print}
	b.ReportAllocs()
	for b.Loop() {
		if handle {
			if len(m.handleSync(req).GetParts()) != 1 {
				b.Fatal("rejected")
			}
		} else if err := m.peerCheck().checkSync(req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/total")
}
