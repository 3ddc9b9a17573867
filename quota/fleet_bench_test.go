package quota_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/quota"
)

// BenchmarkOwnerDivide: an owner answers one server's exchange, the
// demands of 100 buckets, each with two groups of wants, while servers
// servers report on every bucket. One op is one exchange (100 buckets).
func BenchmarkOwnerDivide(b *testing.B) {
	for _, servers := range []int{3, 30} {
		b.Run(fmt.Sprintf("servers=%d/buckets=100", servers), func(b *testing.B) {
			clock := testkit.NewClock(time.Unix(1_000_000, 0))
			o := quota.NewOwner(clock.Now, 1000)
			demands := make([][]quota.Demand, servers)
			names := make([]string, servers)
			for s := range servers {
				names[s] = fmt.Sprintf("10.0.0.%d:6000", s)
				for k := range 100 {
					demands[s] = append(demands[s], quota.Demand{Key: fmt.Sprintf("edge|name=b%d", k), Limit: 1000, TTL: 3 * time.Second,
						Wants: []quota.Want{{Rate: float64(10 + s), Envoys: 3}, {Rate: 200, Envoys: 1}}, InForce: 1000 / float64(servers)})
				}
			}
			out := make([]quota.Grant, 100)
			for s := range servers { // every server known
				o.Divide(names[s], demands[s], out)
			}
			if o.Len() != 100 {
				b.Fatalf("%d buckets", o.Len())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				s := i % servers
				o.Divide(names[s], demands[s], out)
				if !out[0].OK {
					b.Fatal("not answered")
				}
			}
		})
	}
}
