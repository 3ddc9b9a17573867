//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// recordingDivider grants each demand its wants summed plus its leaving
// shares, and records on which member it divided which key, for whom.
type recordingDivider struct {
	self string
	mu   sync.Mutex
	seen map[string]string // key -> the sender
	n    int
}

func (d *recordingDivider) Divide(from string, ds []cluster.QuotaDemand, out []cluster.QuotaGrant) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, q := range ds {
		d.seen[q.Key] = from
		d.n++
		share := q.Leaving
		for _, w := range q.Wants {
			share += w.Rate * float64(w.Envoys)
		}
		out[i] = cluster.QuotaGrant{Share: share, OK: true}
	}
}

func (d *recordingDivider) calls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// TestQuotaPath: a member's DivideQuotas sends each bucket's demand to the
// member that owns the bucket's key, whose Divider answers it, and
// returns the grants in order; the owner is told who sent it.
func TestQuotaPath(t *testing.T) {
	members, _ := startMembersWith(t, 3, cluster.Config{Partitions: 64})
	divs := map[string]*recordingDivider{}
	for _, m := range members {
		d := &recordingDivider{self: m.Address(), seen: map[string]string{}}
		divs[m.Address()] = d
		m.SetDivider(d)
	}
	ctx := context.Background()
	for _, m := range members {
		var ds []cluster.QuotaDemand
		for i := range 30 {
			ds = append(ds, cluster.QuotaDemand{Key: fmt.Sprintf("%d:edge|4:name%d:b%03d", 4, 3, i), Limit: 100, TTL: 3 * time.Second,
				Wants: []cluster.QuotaWant{{Rate: float64(i), Envoys: 2}}, Leaving: 1})
		}
		var grants []cluster.QuotaGrant
		require.Eventually(t, func() bool {
			grants = m.DivideQuotas(ctx, ds)
			for _, g := range grants {
				if !g.OK {
					return false // a partition not settled yet
				}
			}
			return true
		}, 20*time.Second, 50*time.Millisecond)
		for i, g := range grants {
			assert.InDelta(t, float64(2*i+1), g.Share, 1e-9, "bucket %d's grant, in order", i)
			owner := m.OwnerOf(ds[i].Key)
			divs[owner].mu.Lock()
			from := divs[owner].seen[ds[i].Key]
			divs[owner].mu.Unlock()
			assert.Equal(t, m.Address(), from, "bucket %d divided by its owner %s for its sender", i, owner)
		}
	}
	owners := 0
	for _, d := range divs {
		if d.calls() > 0 {
			owners++
		}
	}
	assert.Equal(t, 3, owners, "the buckets spread over the members")
}

// TestQuotaHostile: a member (authenticated, in the view) sends another
// quota requests that break a bound; each is rejected whole, counted,
// and never reaches the Divider; one from a name not in the view is
// refused.
func TestQuotaHostile(t *testing.T) {
	members, _ := startMembersWith(t, 2, cluster.Config{Partitions: 16})
	victim, hostile := members[0], members[1]
	div := &recordingDivider{seen: map[string]string{}}
	victim.SetDivider(div)
	good := func() *clusterpb.QuotaDemand {
		return &clusterpb.QuotaDemand{Key: "k", Limit: 10, TtlNs: int64(time.Second), Wants: []*clusterpb.QuotaWant{{Rate: 1, Envoys: 1}}}
	}
	with := func(f func(d *clusterpb.QuotaDemand)) *clusterpb.QuotaRequest {
		d := good()
		f(d)
		return &clusterpb.QuotaRequest{Node: hostile.Address(), Demands: []*clusterpb.QuotaDemand{d}}
	}
	many := &clusterpb.QuotaRequest{Node: hostile.Address()}
	for range cluster.MaxQuotaDemands + 1 {
		many.Demands = append(many.Demands, good())
	}
	for _, tc := range []struct {
		name     string
		msg      *clusterpb.QuotaRequest
		rejected bool // else refused by the view
	}{
		{"too many demands", many, true},
		{"an empty key", with(func(d *clusterpb.QuotaDemand) { d.Key = "" }), true},
		{"a key too long", with(func(d *clusterpb.QuotaDemand) { d.Key = strings.Repeat("k", cluster.MaxQuotaKeyLength+1) }), true},
		{"a limit of 0", with(func(d *clusterpb.QuotaDemand) { d.Limit = 0 }), true},
		{"a limit of NaN", with(func(d *clusterpb.QuotaDemand) { d.Limit = math.NaN() }), true},
		{"an endless limit", with(func(d *clusterpb.QuotaDemand) { d.Limit = math.Inf(1) }), true},
		{"a TTL of 0", with(func(d *clusterpb.QuotaDemand) { d.TtlNs = 0 }), true},
		{"a TTL of a year", with(func(d *clusterpb.QuotaDemand) { d.TtlNs = int64(365 * 24 * time.Hour) }), true},
		{"too many wants", with(func(d *clusterpb.QuotaDemand) {
			for range cluster.MaxQuotaWants {
				d.Wants = append(d.Wants, &clusterpb.QuotaWant{Rate: 1, Envoys: 1})
			}
		}), true},
		{"a negative want", with(func(d *clusterpb.QuotaDemand) { d.Wants[0].Rate = -1 }), true},
		{"a want of no Envoy", with(func(d *clusterpb.QuotaDemand) { d.Wants[0].Envoys = 0 }), true},
		{"negative leaving shares", with(func(d *clusterpb.QuotaDemand) { d.Leaving = -5 }), true},
		{"an endless share in force", with(func(d *clusterpb.QuotaDemand) { d.InForce = math.Inf(1) }), true},
		{"an endless member name", &clusterpb.QuotaRequest{Node: strings.Repeat("n", 1<<16), Demands: []*clusterpb.QuotaDemand{good()}}, true},
		{"a name not in the view", &clusterpb.QuotaRequest{Node: "10.9.9.9:1", Demands: []*clusterpb.QuotaDemand{good()}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stats := victim.SyncStats()
			resp, err := hostile.Send(victim.Address(), tc.msg, 5*time.Second)
			require.NoError(t, err, "the victim answers")
			reply, ok := resp.(*clusterpb.QuotaReply)
			require.True(t, ok, "%T", resp)
			assert.Empty(t, reply.GetGrants(), "no grant")
			after := victim.SyncStats()
			if tc.rejected {
				assert.Equal(t, stats.Rejected+1, after.Rejected, "rejected")
			} else {
				assert.Equal(t, stats.Refusals+1, after.Refusals, "refused")
			}
			assert.Zero(t, div.calls(), "the Divider saw nothing")
		})
	}
}
