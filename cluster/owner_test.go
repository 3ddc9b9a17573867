//go:build !race

// These tests run real members of one cluster in one process. They are left
// out of -race builds: the engine's remote.Start sets grpc's process-wide
// logger without a lock (grpclog.SetLoggerV2), which the race detector
// reports as soon as a second member starts while the first one's grpc
// server logs. .ci/run runs them without -race; the sync protocol is tested
// under -race with detached members (localfirst_test.go).

package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestOwnerModeExactAcrossMembers: 3 members, callers on all of them, a
// few ids whose partitions the members share: each id allows exactly its
// limit, however the hits are spread.
func TestOwnerModeExactAcrossMembers(t *testing.T) {
	clock := newFakeClock()
	members := startMembers(t, 3, clock, cluster.Owner)
	const (
		ids        = 8
		limit      = 50
		perCaller  = 40
		callersPer = 4 // per member
	)
	p := actorlimit.Policy{Limit: limit, Period: time.Minute}
	var allowed [ids]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(members)*callersPer)
	for _, m := range members {
		for c := range callersPer {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perCaller {
					id := (c + i) % ids
					res, err := m.Limiter.Hit(context.Background(), fmt.Sprintf("user:%d", id), p)
					if err != nil {
						errs <- err
						return
					}
					if res.Allowed {
						allowed[id].Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	offered := len(members) * callersPer * perCaller / ids // each id's hits
	require.Greater(t, offered, limit, "the test must offer more than the limit")
	for id := range ids {
		assert.EqualValues(t, limit, allowed[id].Load(), "user:%d", id)
	}
	// Every member sees the same count, with nothing allowed now.
	for _, m := range members {
		res, err := m.Limiter.Peek(context.Background(), "user:0", p)
		require.NoError(t, err)
		assert.False(t, res.Allowed, m.Address())
		assert.EqualValues(t, offered, res.Count, m.Address())
	}
}

// TestOwnerModeAlgorithms: every algorithm is decided by the owner, and a
// reset there is seen from every member.
func TestOwnerModeAlgorithms(t *testing.T) {
	clock := newFakeClock()
	members := startMembers(t, 3, clock, cluster.Owner)
	ctx := context.Background()
	for _, a := range []actorlimit.Algorithm{actorlimit.FixedWindow, actorlimit.SlidingWindow, actorlimit.GCRA, actorlimit.TokenBucket, actorlimit.LeakyBucket, actorlimit.SlidingLog} {
		t.Run(a.String(), func(t *testing.T) {
			p := actorlimit.Policy{Algorithm: a, Limit: 3, Period: time.Minute, Burst: 3}
			if a == actorlimit.LeakyBucket {
				p.Burst = 2 // one served and two waiting: three at once
			}
			id := "algo:" + a.String()
			for i, m := range members {
				res, err := m.Limiter.Hit(ctx, id, p)
				require.NoError(t, err)
				assert.True(t, res.Allowed, "hit %d", i)
			}
			res, err := members[0].Limiter.Hit(ctx, id, p)
			require.NoError(t, err)
			assert.False(t, res.Allowed, "the fourth hit")
			require.NoError(t, members[1].Limiter.Reset(ctx, id, p))
			res, err = members[2].Limiter.Hit(ctx, id, p)
			require.NoError(t, err)
			assert.True(t, res.Allowed, "after a reset")
		})
	}
}

// startMembers starts n members of one cluster on loopback with the
// engine's in-memory test provider and waits until each sees all n. In
// Owner mode they are Strict: the tests assert exact counts, and three
// members and their callers in one process on a loaded machine may not
// run for longer than OwnerWait, which would have a member decide on its
// share (ownerwait_test.go and TestOwnerModeFrozenOwnerAsProcesses test
// that).
func startMembers(t *testing.T, n int, clock *fakeClock, mode cluster.Mode) []*cluster.Member {
	t.Helper()
	members, _ := startMembersWith(t, n, cluster.Config{Clock: clock, Mode: mode, Strict: mode == cluster.Owner})
	return members
}

// startMembersWith is startMembers with more of the config given.
func startMembersWith(t testing.TB, n int, base cluster.Config) ([]*cluster.Member, *test.InMemAgent) {
	t.Helper()
	agent := test.NewInMemAgent()
	members := make([]*cluster.Member, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := base
			cfg.Name = "test-" + t.Name()
			cfg.Provider = test.NewTestProvider(agent)
			members[i], errs[i] = cluster.Start(cfg)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "member %d", i)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Add(1)
			go func() { defer wg.Done(); _ = m.Close() }()
		}
		wg.Wait()
	})
	waitMembers(t, members, n)
	return members, agent
}

// waitMembers waits until every member sees want members.
func waitMembers(t testing.TB, members []*cluster.Member, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, m := range members {
		for len(m.Members()) != want {
			select {
			case <-ctx.Done():
				t.Fatalf("member %s sees %v, want %d members", m.Address(), m.Members(), want)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}
