//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestResetOnMembers is TestLocalFirstResetReachesEveryMember on 3 real
// members in one process, their messages through the cluster engine: B
// over the limit, C counting too, every algorithm, copies active and idle;
// A's reset is seen by every member's Peek within two sync rounds, and the
// hits after it count.
func TestResetOnMembers(t *testing.T) {
	const a, b, c = 0, 1, 2
	clock := newFakeClock()
	members, _ := startMembersWith(t, 3, cluster.Config{Clock: clock, RequestTimeout: 2 * time.Second})
	ctx := context.Background()
	syncAll := func() {
		for _, m := range members {
			m.SyncNow()
		}
	}
	hit := func(i int, id string, p actorlimit.Policy, n int) int {
		allowed := 0
		for range n {
			res, err := members[i].Limiter.Hit(ctx, id, p)
			require.NoError(t, err)
			if res.Allowed {
				allowed++
			}
		}
		return allowed
	}
	peek := func(i int, id string, p actorlimit.Policy) actorlimit.Result {
		res, err := members[i].Limiter.Peek(ctx, id, p)
		require.NoError(t, err)
		return res
	}
	type key struct {
		id string
		p  actorlimit.Policy
	}
	var keys []key
	for _, p := range everyAlgorithm() {
		for _, idle := range []bool{false, true} {
			keys = append(keys, key{fmt.Sprintf("%v/idle=%v", p.Algorithm, idle), p})
		}
	}
	for _, k := range keys {
		hit(b, k.id, k.p, 35)
		hit(c, k.id, k.p, 5)
	}
	syncAll()
	syncAll()
	for range 4 {
		syncAll() // past lingerSyncs: every copy is idle
	}
	for _, k := range keys {
		for i := range members {
			require.False(t, peek(i, k.id, k.p).Allowed, "%s: member %d before the reset", k.id, i)
		}
	}
	for i := 0; i < len(keys); i += 2 { // idle=false
		hit(b, keys[i].id, keys[i].p, 1) // denied, but the copy syncs again: active
	}
	clock.Advance(time.Second)
	for _, k := range keys {
		require.NoError(t, members[a].Limiter.Reset(ctx, k.id, k.p))
	}
	seen := make(map[string]int)
	for r := range 3 {
		if r > 0 {
			syncAll()
		}
		for _, k := range keys {
			if _, ok := seen[k.id]; ok {
				continue
			}
			all := true
			for i := range members {
				res := peek(i, k.id, k.p)
				all = all && res.Count == 0 && res.Allowed && res.Remaining == k.p.Limit
			}
			if all {
				seen[k.id] = r
			}
		}
	}
	name := map[string]string{members[a].Address(): "A", members[b].Address(): "B", members[c].Address(): "C"}
	for _, k := range keys {
		r, ok := seen[k.id]
		t.Logf("%s (owner %s): every member saw the reset after %d sync rounds", k.id, name[members[a].OwnerOf(k.id)], r)
		assert.True(t, ok && r <= 2, "%s: every member saw the reset within two sync intervals", k.id)
		for i := range members {
			assert.Equal(t, 1, hit(i, k.id, k.p, 1), "%s: member %d's next hit", k.id, i)
		}
	}
	syncAll()
	syncAll()
	for _, k := range keys {
		for i := range members {
			assert.EqualValues(t, 3, peek(i, k.id, k.p).Count, "%s: member %d: the hits after the reset count", k.id, i)
		}
	}
}
