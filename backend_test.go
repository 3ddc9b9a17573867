package actorlimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/actor"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// fakeBackend records the checks it gets and answers each with Count = N.
type fakeBackend struct {
	mu     sync.Mutex
	checks []algo.Check
	closed bool
}

func (f *fakeBackend) Do(_ context.Context, c algo.Check) (algo.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks = append(f.checks, c)
	return algo.Decision{Allowed: true, Count: c.N}, nil
}

func (f *fakeBackend) DoMany(ctx context.Context, cs []algo.Check, out []algo.Decision) error {
	for i := range cs {
		out[i], _ = f.Do(ctx, cs[i])
	}
	return nil
}

func (f *fakeBackend) Sweep(context.Context) (int, error) { return 3, nil }
func (f *fakeBackend) Stats(context.Context) (actor.Stats, error) {
	return actor.Stats{Entries: 2}, nil
}
func (f *fakeBackend) PID() *protoactor.PID { return nil }
func (f *fakeBackend) Close() error         { f.closed = true; return nil }
func (f *fakeBackend) seen() []algo.Check   { f.mu.Lock(); defer f.mu.Unlock(); return f.checks }

// The Limiter's own work, checked without any actor: validation at the
// edge, the check it builds, sharding of batches, results, sums and Close.
func TestLimiterOnFakeBackends(t *testing.T) {
	a, b := &fakeBackend{}, &fakeBackend{}
	lim := actorlimit.NewOnBackends(a, b)
	p := actorlimit.Policy{Algorithm: actorlimit.LeakyBucket, Limit: 4, Period: time.Second}

	_, err := lim.HitN(context.Background(), "", p, 1)
	require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
	assert.Empty(t, append(a.seen(), b.seen()...), "bad input reached a backend")

	res, err := lim.HitN(context.Background(), "x", p, 3)
	require.NoError(t, err)
	assert.Equal(t, actorlimit.Result{Allowed: true, Limit: 4, Count: 3}, res)
	got := append(a.seen(), b.seen()...)
	require.Len(t, got, 1)
	assert.Equal(t, algo.Check{Op: algo.OpHit, Algorithm: algo.LeakyBucket, ID: "x", Period: time.Second, Limit: 4, Burst: 4, N: 3}, got[0])

	hits := make([]actorlimit.HitRequest, 50)
	for i := range hits {
		hits[i] = actorlimit.HitRequest{ID: string(rune('A' + i)), Policy: p, N: int64(i + 1)}
	}
	results := make([]actorlimit.Result, len(hits))
	require.NoError(t, lim.HitMany(context.Background(), hits, results))
	for i, r := range results {
		assert.Equal(t, int64(i+1), r.Count, "result %d is not its own", i)
	}
	assert.NotEmpty(t, a.seen(), "no id hashed onto the first shard")
	assert.NotEmpty(t, b.seen(), "no id hashed onto the second shard")

	n, err := lim.Sweep(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	st, err := lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4, st.Entries)
	require.NoError(t, lim.Close())
	assert.True(t, a.closed && b.closed)
}

// countingStore is the embedded table, counting the batches it decides.
type countingStore struct {
	*table.Table
	mu      sync.Mutex
	batches int
	fail    error
}

func (s *countingStore) Decide(ctx context.Context, now int64, cs []algo.Check, out []algo.Decision) error {
	s.mu.Lock()
	s.batches++
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return fail
	}
	return s.Table.Decide(ctx, now, cs, out)
}

func TestWithStore(t *testing.T) {
	store := &countingStore{Table: table.New(0)}
	lim := start(t, newFakeClock(), actorlimit.WithStore(store))
	p := actorlimit.Policy{Limit: 2, Period: time.Minute}
	for want := int64(1); want <= 3; want++ {
		res, err := lim.Hit(context.Background(), "a", p)
		require.NoError(t, err)
		assert.Equal(t, want, res.Count)
	}
	store.mu.Lock()
	assert.Equal(t, 3, store.batches, "the limiter did not decide through the given store")
	down := errors.New("store is down")
	store.fail = down
	store.mu.Unlock()
	_, err := lim.Hit(context.Background(), "a", p)
	require.ErrorIs(t, err, down, "a store's error does not reach the caller")
	err = lim.HitMany(context.Background(), []actorlimit.HitRequest{{ID: "b", Policy: p}}, make([]actorlimit.Result, 1))
	require.ErrorIs(t, err, down)

	_, err = actorlimit.Start(actorlimit.WithStore(nil))
	require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
	_, err = actorlimit.Start(actorlimit.WithStore(table.New(0)), actorlimit.WithShards(2))
	require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
}
