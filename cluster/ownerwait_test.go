package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// ownerWait is the tests' Config.OwnerWait: short, for quick tests.
const ownerWait = 40 * time.Millisecond

// freezer stands between detached members and their owners: while frozen,
// a request waits (the owner's process does not run, its connection stays
// open), and is handled when thawed, as a stopped process handles what
// waits in its socket once it runs again.
type freezer struct {
	mu     sync.Mutex
	frozen bool
	thawed chan struct{}
	held   atomic.Int64 // requests waiting now
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		f.frozen, f.thawed = true, make(chan struct{})
	}
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		f.frozen = false
		close(f.thawed)
	}
}

// wrap returns send, frozen when f is.
func (f *freezer) wrap(send func(int, any) (any, error)) func(int, any) (any, error) {
	return func(p int, msg any) (any, error) {
		f.mu.Lock()
		frozen, thawed := f.frozen, f.thawed
		f.mu.Unlock()
		if frozen {
			f.held.Add(1)
			<-thawed
			f.held.Add(-1)
		}
		return send(p, msg)
	}
}

// ownerDetached is n Owner-mode detached members whose requests go,
// through fz, to the in-memory owners of d.
func ownerDetached(t *testing.T, n int, cfg cluster.Config, fz *freezer) *detachedCluster {
	t.Helper()
	cfg.Partitions, cfg.Mode = 16, cluster.Owner
	if cfg.OwnerWait == 0 {
		cfg.OwnerWait = ownerWait
	}
	d := &detachedCluster{owners: cluster.NewOwners(cfg)}
	for i := range n {
		m, err := cluster.Detached(cfg, fmt.Sprintf("node-%d", i), fz.wrap(d.send(t)))
		require.NoError(t, err)
		m.SetLive(n)
		t.Cleanup(func() { _ = m.Close() })
		d.members = append(d.members, m)
	}
	t.Cleanup(fz.thaw) // the members' requests must end for Close
	return d
}

// timedHits makes n hits on id at member i, each in its own goroutine at
// once, and returns how many were allowed and the slowest call; no call
// may fail.
func timedHits(t *testing.T, m *cluster.Member, id string, p actorlimit.Policy, n int) (int, time.Duration) {
	t.Helper()
	var (
		allowed, slowest atomic.Int64
		wg               sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			start := time.Now()
			res, err := m.Limiter.Hit(context.Background(), id, p)
			d := int64(time.Since(start))
			for s := slowest.Load(); d > s && !slowest.CompareAndSwap(s, d); s = slowest.Load() {
			}
			assert.NoError(t, err)
			if err == nil && res.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	return int(allowed.Load()), time.Duration(slowest.Load())
}

// lateness measures, until the returned func is called, how late this
// process runs a goroutine whose 1 ms sleep ends: the machine's scheduling
// delay, at its worst; the func returns it.
func lateness() func() time.Duration {
	var worst atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			time.Sleep(time.Millisecond)
			worst.Store(max(worst.Load(), int64(time.Since(start)-time.Millisecond)))
		}
	}()
	return func() time.Duration {
		close(stop)
		<-done
		return time.Duration(worst.Load())
	}
}

// ownerPeek is the owner's answer to a peek of id through member i: a
// strict one, never answered on the member's share, however loaded the
// machine.
func (d *detachedCluster) ownerPeek(t *testing.T, i int, id string, p actorlimit.Policy) actorlimit.Result {
	t.Helper()
	res, err := d.members[i].Limiter.Peek(cluster.WithStrict(context.Background()), id, p)
	require.NoError(t, err)
	return res
}

// ownerCount is the owner's count of id, read by a strict peek through
// member i.
func (d *detachedCluster) ownerCount(t *testing.T, i int, id string, p actorlimit.Policy) int64 {
	t.Helper()
	return d.ownerPeek(t, i, id, p).Count
}

// TestOwnerModeFrozenOwnerFallsBack: in Owner mode, while the owner does
// not answer (its requests wait, as with a stopped process), every check
// is decided within OwnerWait (plus this machine's scheduling delay and
// the cost of the calls, which the test measures) on the member's share of the policy,
// limit/3 here, without error; each is counted (OwnerFallbacks). When the
// owner runs again, with its clock past the requests' lateness, it decides
// none of the requests that waited (late); the next sync charges it the
// hits each member allowed, once: its count is the 3 shares, and the full
// policy applies again. Every algorithm.
func TestOwnerModeFrozenOwnerFallsBack(t *testing.T) {
	for a, p := range others() {
		t.Run(a.String(), func(t *testing.T) { testFrozenOwner(t, p) })
	}
	t.Run("FixedWindow", func(t *testing.T) { testFrozenOwner(t, actorlimit.Policy{Limit: 30, Period: time.Minute}) })
}

func testFrozenOwner(t *testing.T, p actorlimit.Policy) {
	clock := newFakeClock()
	fz := &freezer{}
	d := ownerDetached(t, 3, cluster.Config{Clock: clock}, fz)
	// The same 20 calls at once, answered by the owner: what starting and
	// running them costs here (the race detector, the machine's load).
	_, base := timedHits(t, d.members[0], "warm", p, 20)
	before := make([]cluster.SyncStats, len(d.members)) // the warm calls may fall back too, on a loaded machine
	for i, m := range d.members {
		before[i] = m.SyncStats()
	}
	fz.freeze()
	for i, m := range d.members {
		// A call that falls back waits OwnerWait on a timer, which this
		// process may run late (measured meanwhile, L), then decides at
		// once; the bound allows 2 L, the answered calls' slowest, and
		// 100 ms for what L does not see (a GC pause, a thread descheduled
		// between the timer and the decision: 5 ms failed at load 17-19).
		// It stays far under RequestTimeout (1 s), what a call that did
		// not fall back would wait.
		late := lateness()
		allowed, slowest := timedHits(t, m, "k", p, 20)
		l := late()
		assert.Equal(t, 10, allowed, "member %d: its share, 30/3", i)
		assert.Less(t, slowest, ownerWait+2*l+base+100*time.Millisecond, "member %d: no call waits longer than OwnerWait and the scheduling (L = %v, answered calls %v)", i, l, base)
		assert.EqualValues(t, 20, m.SyncStats().OwnerFallbacks-before[i].OwnerFallbacks, "member %d", i)
	}
	clock.Advance(100 * time.Millisecond) // the waiting requests are late now (2 × OwnerWait)
	fz.thaw()
	require.Eventually(t, func() bool { return fz.held.Load() == 0 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		for _, m := range d.members {
			m.SyncNow()
		}
		for _, m := range d.members {
			if s := m.SyncStats(); m.PendingCharges() != 0 || s.Charged < s.OwnerFallbacks {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "every charge reaches the owner")
	for i, m := range d.members {
		s := m.SyncStats()
		assert.Equal(t, s.OwnerFallbacks, s.Charged, "member %d: %+v", i, s)
	}
	res := d.ownerPeek(t, 0, "k", p)
	assert.EqualValues(t, 30, res.Count, "the owner has each member's 10 allowed, once")
	assert.False(t, res.Allowed)
	hit, err := d.members[1].Limiter.Hit(cluster.WithStrict(context.Background()), "k", p)
	require.NoError(t, err)
	assert.False(t, hit.Allowed, "the owner decides again: the policy is used up")
}

// TestOwnerModeThawedOwnerDecidesOnce: an owner that answers again before
// the requests that waited are late decides them (the callers had their
// share's answer already), and the charges of the same requests that
// follow count nothing: every hit is counted once.
func TestOwnerModeThawedOwnerDecidesOnce(t *testing.T) {
	fz := &freezer{}
	d := ownerDetached(t, 2, cluster.Config{Clock: newFakeClock()}, fz)
	p := actorlimit.Policy{Limit: 100, Period: time.Minute}
	fz.freeze()
	allowed, _ := timedHits(t, d.members[0], "k", p, 30)
	assert.Equal(t, 30, allowed, "the share, 100/2, allows them")
	fz.thaw() // the fake clock stands: no request is late
	require.Eventually(t, func() bool {
		d.members[0].SyncNow()
		return d.members[0].PendingCharges() == 0 && d.members[0].SyncStats().Charged == 30
	}, 5*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, 30, d.ownerCount(t, 1, "k", p), "each hit once")
}

// TestOwnerModeLostReplyCountedOnce: the transport drops the owner's answer
// to the first sending of every request (the owner decided it): the member
// sends the request again, under its id, after OwnerWait/2, and the owner
// answers from its first decision. No caller sees an error, and every hit
// is counted once: the owner's count is 15 of 15 hits. A call falls back
// only when the answer to the request sent again took the rest of
// OwnerWait: the test bounds the fallbacks by the calls it measured that
// long (none on a quiet machine), not by a guess of the machine's speed;
// without a fallback the limit allows exactly 10 of 15.
func TestOwnerModeLostReplyCountedOnce(t *testing.T) {
	const wait = 300 * time.Millisecond
	d := ownerDetached(t, 2, cluster.Config{Clock: newFakeClock(), OwnerWait: wait}, &freezer{})
	seen := sync.Map{}
	for _, m := range d.members {
		m.DropReplies(func(msg any) bool {
			r, ok := msg.(*clusterpb.DecideRequest)
			if !ok || len(r.GetCharges()) > 0 {
				return false
			}
			_, again := seen.LoadOrStore(r.GetRequestId(), true)
			return !again
		})
	}
	p := actorlimit.Policy{Limit: 10, Period: time.Minute}
	allowed, slow := 0, 0
	for i := range 15 {
		start := time.Now()
		res, err := d.members[i%2].Limiter.Hit(context.Background(), "k", p)
		took := time.Since(start)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, took, wait/2, "hit %d: answered by the request sent again, after OwnerWait/2", i)
		if took >= wait {
			slow++
		}
		if res.Allowed {
			allowed++
		}
	}
	var retries, fallbacks uint64
	for _, m := range d.members {
		s := m.SyncStats()
		fallbacks += s.OwnerFallbacks
		retries += s.Retries
	}
	t.Logf("%d calls took OwnerWait or more; %d fell back", slow, fallbacks)
	assert.LessOrEqual(t, fallbacks, uint64(slow), "only a call whose answer took OwnerWait falls back")
	if fallbacks == 0 {
		assert.Equal(t, 10, allowed)
	} else {
		assert.LessOrEqual(t, allowed, 10+int(fallbacks))
	}
	assert.GreaterOrEqual(t, retries, uint64(15), "each request sent again")
	require.Eventually(t, func() bool {
		for _, m := range d.members {
			m.SyncNow()
		}
		return d.members[0].PendingCharges() == 0 && d.members[1].PendingCharges() == 0
	}, 5*time.Second, 10*time.Millisecond, "the fallbacks' charges reach the owner")
	assert.EqualValues(t, 15, d.ownerCount(t, 0, "k", p), "15 hits, counted once each (a fixed window counts the denied ones)")
}

// TestOwnerModeStrict: with Config.Strict, or a context from WithStrict, a
// check whose owner does not answer waits RequestTimeout and fails, as
// before OwnerWait; nothing is decided on the member's share.
func TestOwnerModeStrict(t *testing.T) {
	p := actorlimit.Policy{Limit: 10, Period: time.Minute}
	for _, tc := range []struct {
		name string
		cfg  cluster.Config
		ctx  context.Context
	}{
		{"config", cluster.Config{Strict: true}, context.Background()},
		{"call", cluster.Config{}, cluster.WithStrict(context.Background())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fz := &freezer{}
			tc.cfg.Clock, tc.cfg.RequestTimeout = newFakeClock(), 150*time.Millisecond
			d := ownerDetached(t, 2, tc.cfg, fz)
			fz.freeze()
			start := time.Now()
			_, err := d.members[0].Limiter.Hit(tc.ctx, "k", p)
			require.Error(t, err)
			assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
			assert.Zero(t, d.members[0].SyncStats().OwnerFallbacks)
			fz.thaw()
			_, err = d.members[0].Limiter.Hit(tc.ctx, "k", p)
			require.NoError(t, err)
		})
	}
}

// TestOwnerModeClocksApart: an owner whose clock is far ahead of the
// member's takes every request for late; the member, still waiting, asks
// again without the lateness check and gets the owner's decision: clocks
// apart cost a round trip, not an inexact answer.
func TestOwnerModeClocksApart(t *testing.T) {
	clock := newFakeClock()
	d := ownerDetached(t, 1, cluster.Config{Clock: clock, OwnerWait: 200 * time.Millisecond}, &freezer{})
	ahead := newFakeClock()
	ahead.Advance(time.Minute)
	d.owners.SetOwnersClock(ahead)
	p := actorlimit.Policy{Limit: 3, Period: time.Hour}
	assert.Equal(t, 3, d.hit(t, 0, "k", p, 5))
	s := d.members[0].SyncStats()
	assert.Zero(t, s.OwnerFallbacks)
	assert.GreaterOrEqual(t, s.Retries, uint64(5), "each asked again (a loaded machine may send one more at OwnerWait/2)")
}

// TestOwnerModeChargesReachNewOwner: hits decided on the members' shares
// while the owner does not answer reach the partition's next owner, which
// starts empty (the old one died, with no backup): its count is theirs.
func TestOwnerModeChargesReachNewOwner(t *testing.T) {
	fz := &freezer{}
	clock := newFakeClock()
	d := ownerDetached(t, 2, cluster.Config{Clock: clock}, fz)
	p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 20, Period: time.Minute, Burst: 20}
	fz.freeze()
	allowed, _ := timedHits(t, d.members[0], "k", p, 15)
	assert.Equal(t, 10, allowed, "the share, 20/2")
	d.owners.Drop(cluster.Partition("k", 16)) // the owner dies; its waiting requests reach the next one, late
	d.members[0].SyncNow()                    // a charge waits for the last attempt: none is sent yet
	clock.Advance(time.Second)
	fz.thaw()
	require.Eventually(t, func() bool {
		d.members[0].SyncNow()
		return d.members[0].PendingCharges() == 0 && d.members[0].SyncStats().Charged == 15
	}, 5*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, 10, d.ownerCount(t, 1, "k", p), "the next owner has the 10 allowed")
}

// TestOwnerModeBadCheckFails: a check the owner finds invalid is an error
// at once, never a fallback.
func TestOwnerModeBadCheckFails(t *testing.T) {
	d := ownerDetached(t, 1, cluster.Config{Clock: newFakeClock()}, &freezer{})
	_, err := d.members[0].Limiter.Hit(context.Background(), "", actorlimit.Policy{Limit: 1, Period: time.Minute})
	require.Error(t, err)
	assert.True(t, errors.Is(err, actorlimit.ErrInvalidArgument), err.Error())
	assert.Zero(t, d.members[0].SyncStats().OwnerFallbacks)
}
