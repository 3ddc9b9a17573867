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

// everyAlgorithm is the six algorithms, in order, each with a policy of 30
// at once per minute.
func everyAlgorithm() []actorlimit.Policy {
	out := []actorlimit.Policy{{Algorithm: actorlimit.FixedWindow, Limit: 30, Period: time.Minute}}
	ps := others()
	for _, a := range []actorlimit.Algorithm{actorlimit.SlidingWindow, actorlimit.SlidingLog, actorlimit.GCRA, actorlimit.TokenBucket, actorlimit.LeakyBucket} {
		out = append(out, ps[a])
	}
	return out
}

// ownedBy makes member i (-1: none, the in-memory owners) the owner of
// id's partition.
func (d *detachedCluster) ownedBy(i int, id string) {
	if i >= 0 {
		d.own(i, cluster.Partition(id, 16))
	}
}

// peek returns member i's answer to a peek of id.
func (d *detachedCluster) peek(t *testing.T, i int, id string, p actorlimit.Policy) actorlimit.Result {
	t.Helper()
	return peekCount(t, d.members[i], id, p)
}

// sawReset reports whether every member's peek of id answers as after a
// reset with no hit since: a count of 0, allowed, the whole limit left.
func (d *detachedCluster) sawReset(t *testing.T, id string, p actorlimit.Policy) bool {
	t.Helper()
	for i := range d.members {
		if res := d.peek(t, i, id, p); res.Count != 0 || !res.Allowed || res.Remaining != p.Limit {
			return false
		}
	}
	return true
}

var owners = []struct {
	name  string
	owner int // the member that owns the key's partition; -1: another process
}{{"apart", -1}, {"A", 0}, {"B", 1}}

// TestLocalFirstResetReachesEveryMember: member B goes over the limit, C
// hits too, every member's copy (A's made by a peek) denies; a reset on A
// is seen by every member's Peek within two sync intervals (one round of
// every member's sync each), whether the copies are still syncing (active)
// or stopped (idle), whichever member owns the key, for every algorithm.
// The next hit on each member is allowed, and those hits count.
func TestLocalFirstResetReachesEveryMember(t *testing.T) {
	const a, b, c = 0, 1, 2
	ctx := context.Background()
	for _, p := range everyAlgorithm() {
		for _, o := range owners {
			for _, idle := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/owner=%s/idle=%v", p.Algorithm, o.name, idle), func(t *testing.T) {
					clock := newFakeClock()
					d := newDetached(t, 3, clock)
					d.ownedBy(o.owner, "k")
					d.hit(t, b, "k", p, 35)
					d.hit(t, c, "k", p, 5)
					d.syncAll()
					d.syncAll()
					for i := range d.members {
						require.False(t, d.peek(t, i, "k", p).Allowed, "member %d before the reset", i)
					}
					if idle {
						for range 4 {
							d.syncAll() // past lingerSyncs: the copies stop syncing
						}
					}
					clock.Advance(time.Second)
					require.NoError(t, d.members[a].Limiter.Reset(ctx, "k", p))
					rounds := -1
					for r := range 3 {
						if r > 0 {
							d.syncAll()
						}
						if d.sawReset(t, "k", p) {
							rounds = r
							break
						}
					}
					t.Logf("%v owner=%s idle=%v: every member saw the reset after %d sync rounds", p.Algorithm, o.name, idle, rounds)
					require.GreaterOrEqual(t, rounds, 0, "every member saw the reset within two sync intervals")
					for i := range d.members {
						assert.Equal(t, 1, d.hit(t, i, "k", p, 1), "member %d's next hit", i)
					}
					d.syncAll()
					d.syncAll()
					for i := range d.members {
						assert.EqualValues(t, 3, d.peek(t, i, "k", p).Count, "member %d: the hits after the reset count", i)
					}
				})
			}
		}
	}
}

// TestLocalFirstResetNotUndoneByOldSyncs: syncs made before a reset cannot
// bring the old count back, whether they come late (C's hits, sent after
// the reset), are sent again (B's, whose answer was lost), or are
// replayed whole afterwards, twice; the hits after the reset count.
func TestLocalFirstResetNotUndoneByOldSyncs(t *testing.T) {
	const a, b, c = 0, 1, 2
	ctx := context.Background()
	for _, p := range everyAlgorithm() {
		for _, o := range owners {
			t.Run(fmt.Sprintf("%v/owner=%s", p.Algorithm, o.name), func(t *testing.T) {
				clock := newFakeClock()
				d := newDetached(t, 3, clock)
				d.ownedBy(o.owner, "k")
				d.record.Store(true)
				d.hit(t, c, "k", p, 5)
				d.members[c].SyncNow()
				d.hit(t, b, "k", p, 35)
				d.lose.Store(true)
				d.members[b].SyncNow() // the owner has B's hits; B does not know
				d.lose.Store(false)
				d.record.Store(false)
				d.hit(t, c, "k", p, 4) // late: sent after the reset
				clock.Advance(time.Second)
				require.NoError(t, d.members[a].Limiter.Reset(ctx, "k", p))
				clock.Advance(time.Millisecond)
				assert.Equal(t, 2, d.hit(t, a, "k", p, 2))
				for range 2 {
					d.replay(t)
					d.syncAll()
					d.syncAll()
					for i := range d.members {
						res := d.peek(t, i, "k", p)
						assert.EqualValues(t, 2, res.Count, "member %d: only the hits after the reset", i)
						assert.True(t, res.Allowed, "member %d", i)
					}
				}
			})
		}
	}
}

// replay sends every request recorded again, to the partition's owner now,
// and drops the answers.
func (d *detachedCluster) replay(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	sent := append([]sentRequest(nil), d.recorded...)
	d.mu.Unlock()
	require.NotEmpty(t, sent)
	for _, s := range sent {
		if h := d.handler(s.p); h != nil {
			h(wire(t, s.msg))
		} else {
			d.owners.Handle(s.p, wire(t, s.msg))
		}
	}
}

// TestLocalFirstResetAppliedOnce: a reset kept while the owner could not be
// reached reaches it, and is sent again because the answer was lost; the
// owner applies it once: the hits made after it, counted meanwhile, stay.
func TestLocalFirstResetAppliedOnce(t *testing.T) {
	const a, b = 0, 1
	ctx := context.Background()
	for _, p := range everyAlgorithm() {
		for _, o := range owners[:2] { // B must reach the owner while A cannot
			t.Run(fmt.Sprintf("%v/owner=%s", p.Algorithm, o.name), func(t *testing.T) {
				clock := newFakeClock()
				d := newDetached(t, 2, clock)
				d.ownedBy(o.owner, "k")
				d.hit(t, b, "k", p, 10)
				d.syncAll()
				if o.owner != a {
					d.down.Store(true)
					d.members[a].SyncNow() // fails: A keeps its reset for the owner
				}
				clock.Advance(time.Second)
				require.NoError(t, d.members[a].Limiter.Reset(ctx, "k", p))
				d.down.Store(false)
				d.lose.Store(true)
				d.members[a].SyncNow() // the owner applies it; A does not know
				d.lose.Store(false)
				clock.Advance(time.Second)
				assert.Equal(t, 3, d.hit(t, b, "k", p, 3))
				d.members[b].SyncNow()
				d.members[a].SyncNow() // sends the reset again
				d.syncAll()
				d.syncAll()
				for i := range d.members {
					assert.EqualValues(t, 3, d.peek(t, i, "k", p).Count, "member %d", i)
				}
			})
		}
	}
}

// TestLocalFirstPeekAsksOwner: a member that never saw an id asks its
// owner once on its first peek, and answers as the owner would: over the
// limit when it is over elsewhere, for every algorithm; its next peeks
// answer on the copy that made, without a request. An id nobody hit is at
// 0; while the owner cannot be reached the peek answers on what the member
// has, without error.
func TestLocalFirstPeekAsksOwner(t *testing.T) {
	const a, b, c = 0, 1, 2
	for _, p := range everyAlgorithm() {
		for _, o := range []int{-1, b} {
			t.Run(fmt.Sprintf("%v/owner=%d", p.Algorithm, o), func(t *testing.T) {
				d := newDetached(t, 3, newFakeClock())
				d.ownedBy(o, "k")
				d.hit(t, b, "k", p, 35)
				d.members[b].SyncNow()
				want := d.peek(t, b, "k", p)
				require.False(t, want.Allowed)
				got := d.peek(t, c, "k", p)
				assert.Equal(t, want, got, "C's first peek answers as the owner")
				assert.EqualValues(t, 1, d.members[c].SyncStats().Seeds)
				sends := d.sends.Load()
				assert.Equal(t, got, d.peek(t, c, "k", p), "and so does its next")
				assert.Equal(t, sends, d.sends.Load(), "without a request")
				assert.Equal(t, 0, d.hit(t, c, "k", p, 1), "C denies")

				fresh := d.peek(t, a, "fresh", p)
				assert.True(t, fresh.Allowed)
				assert.EqualValues(t, 0, fresh.Count)

				d.hit(t, b, "j", p, 35)
				d.members[b].SyncNow()
				d.down.Store(true)
				d.members[a].SyncNow()
				res, err := d.members[a].Limiter.Peek(context.Background(), "j", p)
				require.NoError(t, err, "an unreachable owner")
				assert.True(t, res.Allowed, "A knows nothing of j")
			})
		}
	}
}

// TestLocalFirstQueuedResetReachesEveryMember: a reset made while its
// owner cannot be reached reaches the owner with the resetting member's
// next sync, and the other members at theirs after that: within two sync
// intervals when the others sync just before the resetting member (the
// order "C,B,A"), one when they sync after it, for every algorithm.
func TestLocalFirstQueuedResetReachesEveryMember(t *testing.T) {
	const a, b, c = 0, 1, 2
	ctx := context.Background()
	for _, p := range everyAlgorithm() {
		for _, order := range [][]int{{a, b, c}, {c, b, a}} {
			t.Run(fmt.Sprintf("%v/order=%v", p.Algorithm, order), func(t *testing.T) {
				clock := newFakeClock()
				d := newDetached(t, 3, clock)
				d.hit(t, b, "k", p, 35)
				d.hit(t, c, "k", p, 5)
				d.syncAll()
				d.syncAll()
				require.False(t, d.peek(t, a, "k", p).Allowed)
				d.down.Store(true)
				d.members[a].SyncNow() // fails: the owner is cut off
				clock.Advance(time.Second)
				require.NoError(t, d.members[a].Limiter.Reset(ctx, "k", p))
				d.down.Store(false)
				rounds := -1
				for r := 1; r <= 3; r++ {
					for _, i := range order {
						d.members[i].SyncNow()
					}
					if d.sawReset(t, "k", p) {
						rounds = r
						break
					}
				}
				t.Logf("%v order %v: every member saw the queued reset after %d sync rounds", p.Algorithm, order, rounds)
				require.Positive(t, rounds)
				assert.LessOrEqual(t, rounds, 2, "within two sync intervals")
			})
		}
	}
}
