package actorlimit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

const ms = time.Millisecond

// start runs a limiter on clk with no janitor, closed when the test ends.
func start(t *testing.T, clk *fakeClock, opts ...actorlimit.Option) *actorlimit.Limiter {
	t.Helper()
	opts = append([]actorlimit.Option{actorlimit.WithClock(clk), actorlimit.WithJanitor(0, 0)}, opts...)
	lim, err := actorlimit.Start(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, lim.Close()) })
	return lim
}

// step is one call in a stateful sequence.
type step struct {
	at     time.Duration // clock, from epoch
	op     string        // hit, peek, reset
	id     string
	policy actorlimit.Policy
	n      int64
	want   actorlimit.Result
}

// runSteps runs steps in order on lim, setting clk before each.
func runSteps(t *testing.T, lim *actorlimit.Limiter, clk *fakeClock, steps []step) {
	t.Helper()
	ctx := context.Background()
	for i, s := range steps {
		clk.Set(epoch.Add(s.at))
		var got actorlimit.Result
		var err error
		switch s.op {
		case "hit":
			n := s.n
			if n == 0 {
				n = 1
			}
			got, err = lim.HitN(ctx, s.id, s.policy, n)
		case "peek":
			got, err = lim.Peek(ctx, s.id, s.policy)
		case "reset":
			err = lim.Reset(ctx, s.id, s.policy)
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
		require.NoError(t, err, "step %d (%s %s at %v)", i, s.op, s.id, s.at)
		assert.Equal(t, s.want, got, "step %d (%s %s at %v)", i, s.op, s.id, s.at)
	}
}

func TestFixedWindowSemantics(t *testing.T) {
	p := actorlimit.Policy{Limit: 2, Period: 30 * time.Second}
	res := func(allowed bool, count, remaining int64, retry, reset time.Duration) actorlimit.Result {
		return actorlimit.Result{Allowed: allowed, Limit: 2, Count: count, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"window edge at 29 999 and 30 000 ms", []step{
			{at: 0, op: "hit", id: "a", policy: p, want: res(true, 1, 1, 0, 30*time.Second)},
			{at: 29_999 * ms, op: "hit", id: "a", policy: p, want: res(true, 2, 0, 0, ms)},
			{at: 29_999 * ms, op: "hit", id: "a", policy: p, want: res(false, 3, 0, ms, ms)},
			{at: 30_000 * ms, op: "hit", id: "a", policy: p, want: res(true, 1, 1, 0, 30*time.Second)},
		}},
		{"denied hits are counted too", []step{
			{at: 10 * time.Second, op: "hit", id: "a", policy: p, n: 2, want: res(true, 2, 0, 0, 20*time.Second)},
			{at: 11 * time.Second, op: "hit", id: "a", policy: p, want: res(false, 3, 0, 19*time.Second, 19*time.Second)},
			{at: 12 * time.Second, op: "hit", id: "a", policy: p, want: res(false, 4, 0, 18*time.Second, 18*time.Second)},
			{at: 12 * time.Second, op: "peek", id: "a", policy: p, want: res(false, 4, 0, 18*time.Second, 18*time.Second)},
		}},
		{"peek counts nothing", []step{
			{at: 0, op: "peek", id: "a", policy: p, want: res(true, 0, 2, 0, 0)},
			{at: 0, op: "hit", id: "a", policy: p, want: res(true, 1, 1, 0, 30*time.Second)},
			{at: 5 * time.Second, op: "peek", id: "a", policy: p, want: res(true, 1, 1, 0, 25*time.Second)},
			{at: 5 * time.Second, op: "peek", id: "a", policy: p, want: res(true, 1, 1, 0, 25*time.Second)},
			{at: 5 * time.Second, op: "hit", id: "a", policy: p, want: res(true, 2, 0, 0, 25*time.Second)},
			{at: 6 * time.Second, op: "peek", id: "a", policy: p, want: res(false, 2, 0, 24*time.Second, 24*time.Second)},
			{at: 30 * time.Second, op: "peek", id: "a", policy: p, want: res(true, 0, 2, 0, 0)},
		}},
		{"reset forgets", []step{
			{at: 0, op: "hit", id: "a", policy: p, n: 5, want: res(false, 5, 0, actorlimit.Never, 30*time.Second)},
			{at: ms, op: "reset", id: "a", policy: p},
			{at: ms, op: "hit", id: "a", policy: p, want: res(true, 1, 1, 0, 30*time.Second-ms)},
		}},
		{"ids are counted apart", []step{
			{at: 0, op: "hit", id: "a", policy: p, n: 2, want: res(true, 2, 0, 0, 30*time.Second)},
			{at: 0, op: "hit", id: "b", policy: p, want: res(true, 1, 1, 0, 30*time.Second)},
			{at: 0, op: "reset", id: "b", policy: p},
			{at: 0, op: "peek", id: "a", policy: p, want: res(false, 2, 0, 30*time.Second, 30*time.Second)},
		}},
		{"scales are counted apart", []step{
			{at: 0, op: "hit", id: "a", policy: p, n: 2, want: res(true, 2, 0, 0, 30*time.Second)},
			{at: 0, op: "hit", id: "a", policy: actorlimit.Policy{Limit: 2, Period: time.Second}, want: res(true, 1, 1, 0, time.Second)},
			{at: 0, op: "peek", id: "a", policy: p, want: res(false, 2, 0, 30*time.Second, 30*time.Second)},
		}},
		{"limit 0 always denies", []step{
			{at: 0, op: "peek", id: "z", policy: actorlimit.Policy{Period: time.Second}, want: actorlimit.Result{RetryAfter: actorlimit.Never}},
			{at: 0, op: "hit", id: "z", policy: actorlimit.Policy{Period: time.Second}, want: actorlimit.Result{Count: 1, RetryAfter: actorlimit.Never, ResetAfter: time.Second}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			runSteps(t, start(t, clk), clk, tt.steps)
		})
	}
}

func TestCheckRateIsHit(t *testing.T) {
	clk := newFakeClock()
	lim := start(t, clk)
	p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 500, Period: 30000 * ms}
	for i := 1; i <= 502; i++ {
		var res actorlimit.Result
		var err error
		if i%2 == 0 {
			res, err = lim.CheckRate("10.0.0.1", 30000, 500)
		} else {
			res, err = lim.Hit(context.Background(), "10.0.0.1", p)
		}
		require.NoError(t, err)
		assert.Equal(t, int64(i), res.Count)
		assert.Equal(t, i <= 500, res.Allowed, "hit %d", i)
	}
}

// TestCheckRateEqualsHit: CheckRate, which builds its check without
// Policy.Validate (its policy is valid by construction), gives the very
// Result of Hit with the same policy, field by field, on a twin limiter
// and clock, as windows pass, for limits 0, 1, 3 and the largest, and an
// id of the longest length.
func TestCheckRateEqualsHit(t *testing.T) {
	tests := []struct {
		name           string
		id             string
		scaleMs, limit int64
	}{
		{"limit 0", "a", 1000, 0},
		{"limit 1", "b", 1, 1},
		{"limit 3", "c", 250, 3},
		{"largest limit", "d", 60_000, math.MaxInt64},
		{"longest id", strings.Repeat("x", actorlimit.MaxIDLength), 1000, 2},
		{"longest scale", "e", math.MaxInt64 / int64(time.Millisecond), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clkA, clkB := newFakeClock(), newFakeClock()
			a, b := start(t, clkA), start(t, clkB)
			p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: tt.limit, Period: time.Duration(tt.scaleMs) * ms}
			for i := range 12 {
				got, err := a.CheckRate(tt.id, tt.scaleMs, tt.limit)
				require.NoError(t, err)
				want, err := b.Hit(context.Background(), tt.id, p)
				require.NoError(t, err)
				require.Equal(t, want, got, "hit %d", i)
				step := time.Duration(i%3) * 100 * ms
				clkA.Advance(step)
				clkB.Advance(step)
			}
		})
	}
}

func TestBadInputIsRejectedAndCountsNothing(t *testing.T) {
	ok := actorlimit.Policy{Limit: 1, Period: time.Second}
	tests := []struct {
		name   string
		call   func(*actorlimit.Limiter) error
		reason string
	}{
		{"empty id", hit("", ok, 1), "id is empty"},
		{"id too long", hit(strings.Repeat("x", actorlimit.MaxIDLength+1), ok, 1), "longer than 4096"},
		{"negative limit", hit("a", actorlimit.Policy{Limit: -1, Period: time.Second}, 1), "Limit is -1"},
		{"negative burst", hit("a", actorlimit.Policy{Limit: 1, Burst: -1, Period: time.Second}, 1), "Burst is -1"},
		{"zero period", hit("a", actorlimit.Policy{Limit: 1}, 1), "Period is 0s"},
		{"negative period", hit("a", actorlimit.Policy{Limit: 1, Period: -time.Second}, 1), "not positive"},
		{"period not whole ms", hit("a", actorlimit.Policy{Limit: 1, Period: 1500 * time.Microsecond}, 1), "whole number of milliseconds"},
		{"n zero", hit("a", ok, 0), "n is 0"},
		{"n negative", hit("a", ok, -3), "n is -3"},
		{"unknown algorithm", hit("a", actorlimit.Policy{Algorithm: 99, Limit: 1, Period: time.Second}, 1), "Algorithm(99)"},
		{"scaleMs zero", func(l *actorlimit.Limiter) error { _, err := l.CheckRate("a", 0, 1); return err }, "scaleMs 0"},
		{"scaleMs overflows", func(l *actorlimit.Limiter) error { _, err := l.CheckRate("a", 1<<62, 1); return err }, "scaleMs"},
		{"CheckRate empty id", func(l *actorlimit.Limiter) error { _, err := l.CheckRate("", 1000, 1); return err }, "id is empty"},
		{"CheckRate id too long", func(l *actorlimit.Limiter) error {
			_, err := l.CheckRate(strings.Repeat("x", actorlimit.MaxIDLength+1), 1000, 1)
			return err
		}, "longer than 4096"},
		{"CheckRate negative limit", func(l *actorlimit.Limiter) error { _, err := l.CheckRate("a", 1000, -1); return err }, "Limit is -1"},
		{"peek empty id", func(l *actorlimit.Limiter) error { _, err := l.Peek(context.Background(), "", ok); return err }, "id is empty"},
		{"reset bad policy", func(l *actorlimit.Limiter) error {
			return l.Reset(context.Background(), "a", actorlimit.Policy{Limit: 1})
		}, "Period"},
		{"batch with a bad hit", func(l *actorlimit.Limiter) error {
			hits := []actorlimit.HitRequest{{ID: "a", Policy: ok}, {ID: "", Policy: ok}}
			return l.HitMany(context.Background(), hits, make([]actorlimit.Result, 2))
		}, "hits[1]"},
		{"batch results too short", func(l *actorlimit.Limiter) error {
			return l.HitMany(context.Background(), []actorlimit.HitRequest{{ID: "a", Policy: ok}}, nil)
		}, "0 results for 1 hits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := start(t, newFakeClock())
			err := tt.call(lim)
			require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tt.reason)
			st, err := lim.Stats(context.Background())
			require.NoError(t, err)
			assert.Zero(t, st.Entries, "bad input counted something")
		})
	}
}

func hit(id string, p actorlimit.Policy, n int64) func(*actorlimit.Limiter) error {
	return func(l *actorlimit.Limiter) error {
		_, err := l.HitN(context.Background(), id, p, n)
		return err
	}
}

func TestBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  actorlimit.Option
	}{
		{"nil clock", actorlimit.WithClock(nil)},
		{"negative janitor interval", actorlimit.WithJanitor(-time.Second, 0)},
		{"negative janitor timeout", actorlimit.WithJanitor(time.Second, -1)},
		{"zero max entries", actorlimit.WithMaxEntries(0)},
		{"nil logger", actorlimit.WithLogger(nil)},
		{"zero restarts", actorlimit.WithRestarts(0, time.Second)},
		{"zero max batch", actorlimit.WithMaxBatch(0)},
		{"max batch too large", actorlimit.WithMaxBatch(actorlimit.MaxBatchLimit + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim, err := actorlimit.Start(tt.opt)
			require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
			assert.Nil(t, lim)
		})
	}
}

func TestHitManyMatchesSequentialHits(t *testing.T) {
	clk := newFakeClock()
	batched, single := start(t, clk), start(t, clk)
	p := actorlimit.Policy{Limit: 3, Period: time.Second}
	hits := []actorlimit.HitRequest{
		{ID: "a", Policy: p}, {ID: "b", Policy: p, N: 2}, {ID: "a", Policy: p, N: 2},
		{ID: "a", Policy: p}, {ID: "b", Policy: actorlimit.Policy{Limit: 1, Period: 2 * time.Second}},
	}
	got := make([]actorlimit.Result, len(hits))
	require.NoError(t, batched.HitMany(context.Background(), hits, got))
	for i, h := range hits {
		n := max(h.N, 1)
		want, err := single.HitN(context.Background(), h.ID, h.Policy, n)
		require.NoError(t, err)
		assert.Equal(t, want, got[i], "hit %d", i)
	}
	require.NoError(t, batched.HitMany(context.Background(), nil, nil))
}

func TestConcurrentHitsOnOneIDAreExact(t *testing.T) {
	lim := start(t, newFakeClock())
	p := actorlimit.Policy{Limit: 1000, Period: time.Minute}
	const goroutines, each = 50, 60
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var res actorlimit.Result
				var err error
				if (g+i)%3 == 0 {
					results := make([]actorlimit.Result, 1)
					err = lim.HitMany(context.Background(), []actorlimit.HitRequest{{ID: "one", Policy: p}}, results)
					res = results[0]
				} else {
					res, err = lim.Hit(context.Background(), "one", p)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(1000), allowed.Load())
	res, err := lim.Peek(context.Background(), "one", p)
	require.NoError(t, err)
	assert.Equal(t, int64(goroutines*each), res.Count)
}

// TestConcurrentHitsOnALargeTableAreExact: on a table large enough that a
// caller prefetches its key's index slot before its turn, and whose index
// splits its parts as the keys come, many callers at once, each on keys of
// its own with ids built at the call, allow exactly each key's limit, and
// the table holds each key once.
func TestConcurrentHitsOnALargeTableAreExact(t *testing.T) {
	lim := start(t, newFakeClock())
	p := actorlimit.Policy{Limit: 3, Period: time.Minute}
	const goroutines, keys, hits = 8, 6_000, 4 // 48 000 keys: the prefetch's depth
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for k := range keys {
				allowed := 0
				for range hits {
					res, err := lim.Hit(context.Background(), fmt.Sprintf("g%d-key-%d", g, k), p)
					if err != nil {
						t.Error(err)
						return
					}
					if res.Allowed {
						allowed++
					}
				}
				if allowed != 3 {
					t.Errorf("g%d-key-%d: %d of %d hits allowed, limit 3", g, k, allowed, hits)
					return
				}
			}
		})
	}
	wg.Wait()
	st, err := lim.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, goroutines*keys, st.Entries)
}

func TestContextErrors(t *testing.T) {
	lim := start(t, newFakeClock())
	p := actorlimit.Policy{Limit: 1, Period: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := lim.Hit(ctx, "a", p)
	require.ErrorIs(t, err, context.Canceled)
	_, err = lim.Sweep(ctx)
	require.ErrorIs(t, err, context.Canceled)
	res, err := lim.Peek(context.Background(), "a", p)
	require.NoError(t, err)
	assert.Zero(t, res.Count, "a cancelled call was counted")
}

func TestCloseIsIdempotentAndFailsFast(t *testing.T) {
	lim, err := actorlimit.Start(actorlimit.WithClock(newFakeClock()))
	require.NoError(t, err)
	p := actorlimit.Policy{Limit: 1, Period: time.Second}
	_, err = lim.Hit(context.Background(), "a", p)
	require.NoError(t, err)
	require.NoError(t, lim.Close())
	require.NoError(t, lim.Close())
	calls := map[string]func() error{
		"Hit":       func() error { _, err := lim.Hit(context.Background(), "a", p); return err },
		"CheckRate": func() error { _, err := lim.CheckRate("a", 1000, 1); return err },
		"Peek":      func() error { _, err := lim.Peek(context.Background(), "a", p); return err },
		"Reset":     func() error { return lim.Reset(context.Background(), "a", p) },
		"HitMany": func() error {
			return lim.HitMany(context.Background(), []actorlimit.HitRequest{{ID: "a", Policy: p}}, make([]actorlimit.Result, 1))
		},
		"Sweep": func() error { _, err := lim.Sweep(context.Background()); return err },
		"Stats": func() error { _, err := lim.Stats(context.Background()); return err },
	}
	for name, call := range calls {
		assert.ErrorIs(t, call(), actorlimit.ErrClosed, name)
	}
}

func TestCloseWhileCallsAreInFlight(t *testing.T) {
	lim, err := actorlimit.Start(actorlimit.WithClock(newFakeClock()))
	require.NoError(t, err)
	p := actorlimit.Policy{Limit: 1 << 40, Period: time.Second}
	var wg sync.WaitGroup
	var answered, closed atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				_, err := lim.Hit(context.Background(), fmt.Sprint(g, "-", i%10), p)
				switch {
				case err == nil:
					answered.Add(1)
				case errors.Is(err, actorlimit.ErrClosed):
					closed.Add(1)
					return
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	for answered.Load() < 1000 {
		// let the callers get going; they stop by themselves once closed
		runtimeGosched()
	}
	require.NoError(t, lim.Close())
	wg.Wait() // every caller was answered or told ErrClosed: none hangs
	assert.Equal(t, int64(16), closed.Load())
}

// TestCheckAllocatesNothing proves that a check on the embedded table, by
// each way of calling it, allocates nothing once its key exists: a heap
// allocation a check (the check escaping in Client.Do) went unseen by the
// benchmarks' readers once.
func TestCheckAllocatesNothing(t *testing.T) {
	if testing.CoverMode() != "" || raceOn {
		t.Skip("coverage and the race detector change what is allocated")
	}
	lim := start(t, newFakeClock())
	ctx := context.Background()
	p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1e9, Period: time.Second}
	for name, f := range map[string]func(){
		"CheckRate": func() { _, _ = lim.CheckRate("a", 1000, 1e9) },
		"Hit":       func() { _, _ = lim.Hit(ctx, "a", p) },
		"Peek":      func() { _, _ = lim.Peek(ctx, "a", p) },
	} {
		f() // the key exists
		assert.Zero(t, testing.AllocsPerRun(200, f), name)
	}
}
