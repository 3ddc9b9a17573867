package cluster_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// others are the algorithms whose state is not a count, each with a policy
// of 30 at once per minute.
func others() map[actorlimit.Algorithm]actorlimit.Policy {
	out := make(map[actorlimit.Algorithm]actorlimit.Policy)
	for _, a := range []actorlimit.Algorithm{actorlimit.SlidingWindow, actorlimit.GCRA, actorlimit.TokenBucket, actorlimit.LeakyBucket, actorlimit.SlidingLog} {
		p := actorlimit.Policy{Algorithm: a, Limit: 30, Period: time.Minute, Burst: 30}
		if a == actorlimit.LeakyBucket {
			p.Burst = 29 // one served and 29 waiting: 30 at once
		}
		out[a] = p
	}
	return out
}

// peekCount returns member i's count of id, as its copy says.
func (d *detachedCluster) peekCount(t *testing.T, i int, id string, p actorlimit.Policy) int64 {
	t.Helper()
	res, err := d.members[i].Limiter.Peek(context.Background(), id, p)
	require.NoError(t, err)
	return res.Count
}

// TestLocalFirstEveryAlgorithm: in LocalFirst mode every algorithm is
// answered from the member's copy, with no request; each sync carries the
// hits a member allowed to the owner, which charges them all (they
// happened, even past the limit), and its state becomes every member's
// copy. A burst is over-admitted by what the members allow between two
// syncs, and then every member denies, a bucket until its debt drains.
func TestLocalFirstEveryAlgorithm(t *testing.T) {
	for a, p := range others() {
		t.Run(a.String(), func(t *testing.T) {
			clock := newFakeClock()
			d := newDetached(t, 3, clock)
			before := d.sends.Load()
			assert.Equal(t, 20, d.hit(t, 0, "k", p, 20))
			assert.Equal(t, 20, d.hit(t, 1, "k", p, 20), "member 1 knows nothing of member 0's hits yet: the inertia")
			assert.Equal(t, before, d.sends.Load(), "no check sent a request")
			d.syncAll()
			d.syncAll()
			assert.EqualValues(t, 40, d.peekCount(t, 0, "k", p), "the owner charged both members' hits")
			assert.EqualValues(t, 40, d.peekCount(t, 1, "k", p))
			assert.Equal(t, 0, d.hit(t, 0, "k", p, 5))
			assert.Equal(t, 0, d.hit(t, 1, "k", p, 5))
			assert.Equal(t, 1, d.hit(t, 2, "k", p, 1), "member 2 had no copy: its first hit is the inertia")
			d.syncAll()
			assert.Equal(t, 0, d.hit(t, 2, "k", p, 1), "and it learns")
			if !a.Windowed() {
				// Member 0's copy holds 40 hits at 30/min (member 2's came
				// after its sync): room for one more when 11 have drained,
				// 22 s later.
				clock.Advance(21 * time.Second)
				assert.Equal(t, 0, d.hit(t, 0, "k", p, 1), "the debt is not drained yet")
				clock.Advance(time.Second)
				assert.Equal(t, 1, d.hit(t, 0, "k", p, 1), "the debt drained")
			}
		})
	}
}

// TestLocalFirstOwnerUnreachable: while a partition's owner cannot be
// reached (a sync to it failed), every algorithm keeps answering from the
// member's copy, at once and without error, within the member's share of
// the policy (30 over 3 members); a reset succeeds and waits for the next
// sync; when the owner answers again it applies the reset first, then the
// hits allowed meanwhile: none is lost.
func TestLocalFirstOwnerUnreachable(t *testing.T) {
	for a, p := range others() {
		t.Run(a.String(), func(t *testing.T) {
			d := newDetached(t, 3, newFakeClock())
			for _, m := range d.members {
				m.SetLive(3)
			}
			ctx := context.Background()
			assert.Equal(t, 3, d.hit(t, 0, "k", p, 3))
			assert.Equal(t, 3, d.hit(t, 0, "r", p, 3))
			d.syncAll()
			d.down.Store(true)
			d.members[0].SyncNow() // fails: the partitions are cut off
			sends := d.sends.Load()
			assert.Equal(t, 10, d.hit(t, 0, "k", p, 15), "the share, 30/3, without error")
			assert.Equal(t, 10, d.hit(t, 0, "r", p, 15))
			require.NoError(t, d.members[0].Limiter.Reset(ctx, "r", p), "a reset is kept for the owner")
			assert.Equal(t, sends, d.sends.Load(), "no check, and no reset, sent a request")
			assert.Equal(t, 2, d.hit(t, 0, "r", p, 2), "after the reset")
			st := d.members[0].SyncStats()
			assert.EqualValues(t, 32, st.Fallbacks)
			assert.EqualValues(t, 1, st.QueuedResets)
			assert.EqualValues(t, 1, st.Outages)

			d.down.Store(false)
			d.members[0].SyncNow()
			assert.EqualValues(t, 1, d.members[0].SyncStats().Recoveries)
			assert.Equal(t, 1, d.hit(t, 1, "k", p, 1))
			assert.Equal(t, 1, d.hit(t, 1, "r", p, 1))
			d.members[1].SyncNow()
			assert.EqualValues(t, 3+10+1, d.peekCount(t, 1, "k", p), "the owner has the hits allowed while it was unreachable")
			assert.EqualValues(t, 2+1, d.peekCount(t, 1, "r", p), "the reset came first, then the hits after it")
		})
	}
}

// TestLocalFirstHungOwner: an owner that never answers holds up the sync,
// not the checks: while a sync is blocked in the hung owner (the send
// signals when it is entered, and returns only when the test ends), hits
// of every algorithm are answered from the member's copies; a reset waits
// no longer than its caller's deadline.
func TestLocalFirstHungOwner(t *testing.T) {
	clock := newFakeClock()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var inside atomic.Int32 // sends entered and not returned
	cfg := cluster.Config{Clock: clock, Partitions: 16}
	send := func(int, any) (any, error) {
		inside.Add(1)
		defer inside.Add(-1)
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return nil, errors.New("gave up")
	}
	m, err := cluster.Detached(cfg, "node-0", send)
	require.NoError(t, err)
	t.Cleanup(func() { close(release); _ = m.Close() })
	fixed := actorlimit.Policy{Limit: 5, Period: time.Minute}
	gcra := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 5, Period: time.Minute}
	_, err = m.Limiter.Hit(context.Background(), "k", fixed)
	require.NoError(t, err)
	_, err = m.Limiter.Hit(context.Background(), "g", gcra)
	require.NoError(t, err)
	synced := make(chan struct{})
	go func() { m.SyncNow(); close(synced) }() // hangs on the owner
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the sync never reached the owner")
	}
	// The hits run apart, so that one blocked behind the sync fails the
	// test at the deadline instead of hanging it.
	type hit struct {
		i       int
		a       actorlimit.Algorithm
		allowed bool
		err     error
	}
	hits := make(chan hit, 20)
	go func() {
		defer close(hits)
		for i := range 10 {
			for _, p := range []actorlimit.Policy{fixed, gcra} {
				res, err := m.Limiter.Hit(context.Background(), map[bool]string{true: "k", false: "g"}[p == fixed], p)
				hits <- hit{i, p.Algorithm, res.Allowed, err}
			}
		}
	}()
	deadline := time.After(30 * time.Second)
	for n := 0; n < 20; n++ {
		select {
		case h := <-hits:
			require.NoError(t, h.err, "hit %d of %v, with a sync blocked in the owner", h.i, h.a)
			assert.Equal(t, h.i < 4, h.allowed, "hit %d of %v", h.i, h.a)
		case <-deadline:
			t.Fatalf("%d of 20 hits answered in 30 s while a sync was blocked in the owner", n)
		}
	}
	require.Positive(t, inside.Load(), "the sync is still in the owner after the hits")
	select {
	case <-synced:
		t.Fatal("the sync did not wait for the owner")
	default:
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	err = m.Limiter.Reset(short, "g", gcra)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline ends the wait")
}
