//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// startKeyed starts one member for each of keys, in one cluster (over the
// engine's gRPC transport, with mutual TLS), each with its partition key,
// and waits until each sees them all.
func startKeyed(t *testing.T, base cluster.Config, keys ...string) []*cluster.Member {
	t.Helper()
	ca := newTestCA(t, t.TempDir(), "members")
	agent := test.NewInMemAgent()
	members := make([]*cluster.Member, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		s := ca.issue(t, fmt.Sprint("m", i))
		wg.Go(func() {
			cfg := base
			cfg.Name = "test-" + t.Name()
			cfg.PartitionKey = []byte(key)
			cfg.Provider = test.NewTestProvider(agent)
			cfg.TLS = s
			members[i], errs[i] = cluster.Start(cfg)
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "member %d", i)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Go(func() { _ = m.Close() })
		}
		wg.Wait()
	})
	waitMembers(t, members, len(members))
	return members
}

// TestPartitionKeysDifferOverTheWire: two members of one cluster whose
// partition keys differ, over the real transport, refuse each other's
// requests (docs/cluster.md, Partition key): in Owner mode a check whose
// owner is the other member fails naming the key, is counted at the
// owner in KeyMismatches, and counts nothing there; in LocalFirst mode
// the syncs fail and the owner counts nothing of the other's hits. Two
// members with the same key share counts (the control).
func TestPartitionKeysDifferOverTheWire(t *testing.T) {
	const (
		keyA = "the cluster's key, 32 bytes long"
		keyB = "another key, also 32 bytes long."
	)
	policy := actorlimit.Policy{Limit: 100, Period: time.Hour}
	ctx := context.Background()
	// remote returns ids that m places at the other member.
	remote := func(m *cluster.Member, n int) []string {
		var out []string
		for i := 0; len(out) < n; i++ {
			if id := fmt.Sprint("id-", i); m.OwnerOf(id) != m.Address() {
				out = append(out, id)
			}
		}
		return out
	}
	t.Run("owner mode", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			keyB string
		}{{"keys differ", keyB}, {"same key", keyA}} {
			t.Run(tt.name, func(t *testing.T) {
				ms := startKeyed(t, cluster.Config{Clock: newFakeClock(), Mode: cluster.Owner, Partitions: 16, Strict: true}, keyA, tt.keyB)
				a, b := ms[0], ms[1]
				ids := remote(a, 8)
				for _, id := range ids {
					_, err := a.Limiter.Hit(ctx, id, policy)
					if tt.keyB != keyA {
						require.Error(t, err, id)
						assert.ErrorContains(t, err, "PartitionKey")
					} else {
						require.NoError(t, err, id)
					}
				}
				counted := 0
				for _, id := range ids {
					d, err := b.Limiter.Peek(ctx, id, policy)
					if err == nil && d.Count > 0 {
						counted++
					}
				}
				if tt.keyB != keyA {
					assert.Zero(t, counted, "the member with another key counted nothing")
					assert.GreaterOrEqual(t, b.SyncStats().KeyMismatches, uint64(len(ids)), "each refused, counted")
				} else {
					assert.Equal(t, len(ids), counted, "the owner counted each")
					assert.Zero(t, b.SyncStats().KeyMismatches)
				}
			})
		}
	})
	t.Run("local-first", func(t *testing.T) {
		clock := newFakeClock()
		ms := startKeyed(t, cluster.Config{Clock: clock, Partitions: 16}, keyA, keyB)
		a, b := ms[0], ms[1]
		ids := remote(a, 8)
		for _, id := range ids {
			d, err := a.Limiter.Hit(ctx, id, policy)
			require.NoError(t, err, "answered from the member's copy")
			require.True(t, d.Allowed)
		}
		before := a.SyncStats().Failures
		require.Eventually(t, func() bool {
			clock.tick()
			return a.SyncStats().Failures > before && b.SyncStats().KeyMismatches > 0
		}, 10*time.Second, 10*time.Millisecond, "the syncs refused")
		for _, id := range ids {
			d, err := b.Limiter.Peek(ctx, id, policy)
			require.NoError(t, err)
			assert.Zero(t, d.Count, "%s: the member with another key counted nothing", id)
		}
	})
}
