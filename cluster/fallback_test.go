package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestLocalFirstOtherAlgorithmsFallBack: in LocalFirst mode a check of an
// algorithm other than FixedWindow goes to the owner; while the owner
// cannot be reached the member decides it alone, with its share of the
// policy (limit and burst over the live members), instead of failing. The
// check that finds the owner gone tries it once; the next ones fall back
// at once, with no request, until a sync reaches the owner again. A reset
// does not fall back: it fails.
func TestLocalFirstOtherAlgorithmsFallBack(t *testing.T) {
	for _, a := range []actorlimit.Algorithm{actorlimit.SlidingWindow, actorlimit.GCRA, actorlimit.TokenBucket, actorlimit.LeakyBucket, actorlimit.SlidingLog} {
		t.Run(a.String(), func(t *testing.T) {
			d := newDetached(t, 3, newFakeClock())
			for _, m := range d.members {
				m.SetLive(3)
			}
			p := actorlimit.Policy{Algorithm: a, Limit: 30, Period: time.Minute, Burst: 30}
			if a == actorlimit.LeakyBucket {
				p.Burst = 29 // one served and 29 waiting: 30 at once
			}
			assert.Equal(t, 3, d.hit(t, 0, "k", p, 3), "the owner decides")
			d.down.Store(true)
			before := d.sends.Load()
			allowed := d.hit(t, 0, "k", p, 15) // no error
			assert.Equal(t, before+1, d.sends.Load(), "one try, then at once")
			assert.Equal(t, 10, allowed, "the share, 30/3")
			require.Error(t, d.members[0].Limiter.Reset(context.Background(), "k", p))
			d.down.Store(false)
			d.members[0].SyncNow() // probes the partition: the owner answers
			res, err := d.members[0].Limiter.Hit(context.Background(), "k", p)
			require.NoError(t, err)
			assert.True(t, res.Allowed)
			assert.EqualValues(t, 4, res.Count, "the owner decides again, with what it had")
		})
	}
}

// TestLocalFirstHungOwner: an owner that never answers holds up the sync,
// not the checks: FixedWindow hits are answered from the member's copy,
// and a check of another algorithm waits no longer than its caller's
// deadline (a member's requests also end at Config.RequestTimeout, after
// which the fallback decides).
func TestLocalFirstHungOwner(t *testing.T) {
	clock := newFakeClock()
	release := make(chan struct{})
	cfg := cluster.Config{Clock: clock, Partitions: 16}
	send := func(int, any) (any, error) {
		<-release
		return nil, errors.New("gave up")
	}
	m, err := cluster.Detached(cfg, "node-0", send)
	require.NoError(t, err)
	t.Cleanup(func() { close(release); _ = m.Close() })
	fixed := actorlimit.Policy{Limit: 5, Period: time.Minute}
	_, err = m.Limiter.Hit(context.Background(), "k", fixed)
	require.NoError(t, err)
	synced := make(chan struct{})
	go func() { m.SyncNow(); close(synced) }() // hangs on the owner
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 10 {
		res, err := m.Limiter.Hit(ctx, "k", fixed)
		require.NoError(t, err, "hit %d", i)
		assert.Equal(t, i < 4, res.Allowed, "hit %d", i)
	}
	select {
	case <-synced:
		t.Fatal("the sync did not wait for the owner")
	default:
	}
	gcra := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 5, Period: time.Minute}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	_, err = m.Limiter.Hit(short, "g", gcra)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline ends the wait")
}
