//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// TestOwnerModeRetryAfterHandOff: in Owner mode, the owner's answer to a
// request is lost (the transport drops it on purpose), and before the
// request is sent again its partition moves, by a graceful leave of the
// owner or by a member that joins: the retry reaches the new owner, which
// answers from the first decision (the hand-off carried the requests the
// old owner remembered). The caller gets that decision, allowed under a
// limit of 1, and the hit is counted once.
func TestOwnerModeRetryAfterHandOff(t *testing.T) {
	for _, move := range []string{"leave", "join"} {
		t.Run(move, func(t *testing.T) {
			t.Parallel()
			ports := testkit.FreePorts(t, 4)
			addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
			agent := test.NewInMemAgent()
			cfg := cluster.Config{Name: fmt.Sprintf("retry-%s-%d", move, time.Now().UnixNano()), Clock: newFakeClock(),
				Mode: cluster.Owner, DeadAfter: 2 * time.Second, RequestTimeout: 5 * time.Second,
				// Strict: the caller waits for the owner however loaded the
				// machine, and its request is sent again meanwhile.
				Strict: true}
			start := func(i int) *cluster.Member {
				c := cfg
				c.Provider, c.Port = test.NewTestProvider(agent), ports[i]
				m, err := cluster.Start(c)
				require.NoError(t, err)
				t.Cleanup(func() { _ = m.Close() })
				return m
			}
			ms := make([]*cluster.Member, 3)
			var wg sync.WaitGroup
			for i := range ms {
				wg.Go(func() { ms[i] = start(i) })
			}
			wg.Wait()
			waitMembers(t, ms, 3)
			a, b := ms[0], ms[1]
			three := []string{addr(0), addr(1), addr(2)}
			// id's owner is b; after the move, a member other than a (the
			// retry crosses the network to it).
			next := addr(2)
			after := []string{addr(0), addr(2)}
			if move == "join" {
				next, after = addr(3), append(slices.Clone(three), addr(3))
			}
			id := ""
			for i := 0; id == ""; i++ {
				require.Less(t, i, 100_000)
				k := fmt.Sprintf("k%d", i)
				if a.OwnerAmong(k, three) == addr(1) && a.OwnerAmong(k, after) == next {
					id = k
				}
			}
			require.Eventually(t, func() bool { return a.OwnerOf(id) == b.Address() }, 10*time.Second, 10*time.Millisecond)

			var (
				mu      sync.Mutex
				dropped bool
				newer   *cluster.Member
			)
			a.WrapSend(func(send func(int, any) (any, error)) func(int, any) (any, error) {
				return func(p int, msg any) (any, error) {
					r, ok := msg.(*clusterpb.DecideRequest)
					if !ok || len(r.GetCharges()) > 0 || len(r.GetChecks()) == 0 || r.GetChecks()[0].GetId() != id {
						return send(p, msg)
					}
					// The sendings of the request wait for the first one,
					// and for the move that follows it.
					mu.Lock()
					defer mu.Unlock()
					resp, err := send(p, msg)
					if dropped {
						return resp, err
					}
					dropped = true
					if assert.NoError(t, err) {
						assert.True(t, resp.(*clusterpb.DecideReply).GetDecisions()[0].GetAllowed(), "the first decision")
					}
					if move == "leave" {
						_ = b.Close()
						newer = ms[2]
					} else {
						newer = start(3)
					}
					deadline := time.Now().Add(20 * time.Second)
					for a.OwnerOf(id) != newer.Address() || !newer.Owns(p) {
						if time.Now().After(deadline) {
							t.Errorf("%s does not own %s: %s does, %v", newer.Address(), id, a.OwnerOf(id), newer.Owns(p))
							break
						}
						time.Sleep(5 * time.Millisecond)
					}
					return nil, cluster.ErrDropped
				}
			})
			pol := actorlimit.Policy{Limit: 1, Period: time.Hour}
			res, err := a.Limiter.Hit(context.Background(), id, pol)
			require.NoError(t, err)
			assert.True(t, res.Allowed, "the first decision, not a second one")
			assert.EqualValues(t, 1, res.Count)
			require.True(t, dropped)
			assert.GreaterOrEqual(t, newer.SyncStats().Deduplicated, uint64(1), "the new owner answered from memory")
			peek, err := a.Limiter.Peek(context.Background(), id, pol)
			require.NoError(t, err)
			assert.EqualValues(t, 1, peek.Count, "counted once")
			assert.Zero(t, a.SyncStats().OwnerFallbacks)
		})
	}
}
