package cluster_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/actorlimit/actorlimit"
)

// TestLocalFirstDebtBounded: 5 members each admit a whole bucket on their
// own copies before they sync (5 buckets allowed at once, the worst
// inertia); the owner charges all of them, but a bucket holds at most
// twice its capacity: full, and one capacity of debt. So every member
// admits again once capacity+1 hits have drained from the owner's state,
// (capacity+1)·T after the charge (T = Period/Limit), not after the five
// buckets' worth; and so does every other member, whose copy is the
// owner's state.
func TestLocalFirstDebtBounded(t *testing.T) {
	const members = 5
	for _, a := range []actorlimit.Algorithm{actorlimit.GCRA, actorlimit.TokenBucket, actorlimit.LeakyBucket} {
		t.Run(a.String(), func(t *testing.T) {
			p := others()[a] // capacity 30, T = 2 s
			capacity := p.Burst
			if a == actorlimit.LeakyBucket {
				capacity++
			}
			T := p.Period / time.Duration(p.Limit)
			clock := newFakeClock()
			d := newDetached(t, members, clock)
			for i := range members {
				assert.EqualValues(t, capacity, d.hit(t, i, "k", p, int(capacity)), "member %d admits a bucket on its copy", i)
			}
			d.syncAll()
			d.syncAll()
			start := clock.Now()
			waited := time.Duration(-1)
			for step := time.Duration(0); step <= 5*time.Duration(capacity)*T; step += T {
				if d.hit(t, 0, "k", p, 1) == 1 {
					waited = clock.Now().Sub(start)
					break
				}
				clock.Advance(T)
			}
			bound := time.Duration(capacity+1) * T
			t.Logf("%v: %d members admitted %d (limit %d, capacity %d, T %v); member 0 admitted again after %v (bound (capacity+1)·T = %v; without the clamp %v)",
				a, members, members*int(capacity), p.Limit, capacity, T, waited, bound, time.Duration(int64(members)*capacity-capacity+1)*T)
			assert.Positive(t, waited, "admits again")
			assert.LessOrEqual(t, waited, bound, "the debt is at most one capacity")
			assert.Greater(t, waited, time.Duration(capacity)*T, "and it is there: more than a full bucket's wait")
			for i := 1; i < members; i++ {
				assert.Equal(t, 1, d.hit(t, i, "k", p, 1), "member %d admits again too, on its copy of the owner's state", i)
			}
		})
	}
}
