package cluster

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// checkingDivider fails the test for a demand out of the quota bounds: a
// message that reaches the Divider must have passed every check.
type checkingDivider struct {
	t     *testing.T
	calls int
}

func (d *checkingDivider) Divide(_ string, ds []QuotaDemand, out []QuotaGrant) {
	d.calls++
	finite := func(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }
	for i, q := range ds {
		ok := q.Key != "" && len(q.Key) <= MaxQuotaKeyLength && q.Limit > 0 && finite(q.Limit) &&
			q.TTL > 0 && q.TTL <= maxQuotaTTL && len(q.Wants) <= MaxQuotaWants && finite(q.Leaving) && finite(q.InForce)
		for _, w := range q.Wants {
			ok = ok && finite(w.Rate) && w.Envoys > 0
		}
		if !ok {
			d.t.Fatalf("the Divider got a demand out of bounds: %+v", q)
		}
		out[i] = QuotaGrant{Share: q.Limit, OK: true}
	}
}

// FuzzHandleQuota: a quota request's receive path, over its protobuf
// bytes, to a member that owns every partition. No panic, an answer of
// no grant or one per demand, and the Divider sees only demands within
// the bounds; a rejected request reaches no Divider.
func FuzzHandleQuota(f *testing.F) {
	good := &clusterpb.QuotaRequest{Node: "peer:1", Demands: []*clusterpb.QuotaDemand{{Key: "4:edge|4:name3:api", Limit: 100,
		TtlNs: int64(3 * time.Second), Wants: []*clusterpb.QuotaWant{{Rate: 10, Envoys: 3}}, Leaving: 1, InForce: 30}}}
	bad := &clusterpb.QuotaRequest{Node: "peer:1", Demands: []*clusterpb.QuotaDemand{{Key: "k", Limit: math.NaN(),
		TtlNs: -1, Wants: []*clusterpb.QuotaWant{{Rate: math.Inf(1)}}, Leaving: -1}}}
	for _, s := range []*clusterpb.QuotaRequest{good, bad} {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	m := fuzzMember(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var req clusterpb.QuotaRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		d := &checkingDivider{t: t}
		m.SetDivider(d)
		rejected := m.SyncStats().Rejected
		reply := m.handleQuota(&req)
		if n := len(reply.GetGrants()); n != 0 && n != len(req.GetDemands()) {
			t.Fatalf("%d grants for %d demands", n, len(req.GetDemands()))
		}
		if m.SyncStats().Rejected != rejected && d.calls > 0 {
			t.Fatal("a rejected request reached the Divider")
		}
	})
}
