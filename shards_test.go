package actorlimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

func TestShardsBehaveLikeOneLimiter(t *testing.T) {
	clk := newFakeClock()
	one := start(t, clk)
	four := start(t, clk, actorlimit.WithShards(4))
	ctx := context.Background()
	p := actorlimit.Policy{Limit: 3, Period: time.Second}

	hits := make([]actorlimit.HitRequest, 0, 200)
	for i := range 200 {
		hits = append(hits, actorlimit.HitRequest{ID: fmt.Sprint("id", i%37), Policy: p, N: int64(1 + i%2)})
	}
	want := make([]actorlimit.Result, len(hits))
	got := make([]actorlimit.Result, len(hits))
	require.NoError(t, one.HitMany(ctx, hits, want))
	require.NoError(t, four.HitMany(ctx, hits, got))
	assert.Equal(t, want, got, "HitMany across shards")

	for i := range 37 {
		id := fmt.Sprint("id", i)
		w, err := one.Hit(ctx, id, p)
		require.NoError(t, err)
		g, err := four.Hit(ctx, id, p)
		require.NoError(t, err)
		assert.Equal(t, w, g, id)
	}
	st, err := four.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 37, st.Entries)

	clk.Advance(time.Second)
	n, err := four.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 37, n)

	used := map[string]bool{}
	for i := range 37 {
		used[four.PIDFor(fmt.Sprint("id", i)).Id] = true
	}
	assert.Len(t, used, 4, "ids were not spread over the shards")
	assert.Equal(t, one.PID(), one.PIDFor("anything"))
}

func TestShardsReportTheBadHitsIndex(t *testing.T) {
	lim := start(t, newFakeClock(), actorlimit.WithShards(3))
	p := actorlimit.Policy{Limit: 3, Period: time.Second}
	hits := []actorlimit.HitRequest{{ID: "a", Policy: p}, {ID: "b", Policy: p}, {ID: "c"}, {ID: "d", Policy: p}}
	err := lim.HitMany(context.Background(), hits, make([]actorlimit.Result, len(hits)))
	require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "hits[2]")
	st, err := lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.Entries)
}

// TestShardsReportTheBadHitsIndexConcurrently: many callers at once, each
// with a bad request at a random index of its HitMany on three shards, get
// their own bad index back. HitMany maps the index back through its pooled
// scratch space; reading it after the scratch went back to the pool would
// report another caller's index, or show as a race under -race.
func TestShardsReportTheBadHitsIndexConcurrently(t *testing.T) {
	lim := start(t, newFakeClock(), actorlimit.WithShards(3))
	p := actorlimit.Policy{Limit: 3, Period: time.Second}
	const callers, rounds = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 13))
			for range rounds {
				hits := make([]actorlimit.HitRequest, 2+r.IntN(14))
				for i := range hits {
					hits[i] = actorlimit.HitRequest{ID: fmt.Sprintf("id-%d", r.IntN(1000)), Policy: p}
				}
				bad := r.IntN(len(hits))
				hits[bad].ID = ""
				err := lim.HitMany(context.Background(), hits, make([]actorlimit.Result, len(hits)))
				if want := fmt.Sprintf("hits[%d]:", bad); err == nil || !strings.Contains(err.Error(), want) {
					errs <- fmt.Errorf("caller %d: %v, want an error naming %s", g, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestBadShards(t *testing.T) {
	for _, n := range []int{0, -1, actorlimit.MaxShards + 1} {
		_, err := actorlimit.Start(actorlimit.WithShards(n))
		require.ErrorIs(t, err, actorlimit.ErrInvalidArgument, n)
	}
}
