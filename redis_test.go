package actorlimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// patientRedis is the round-trip timeout of the stores of tests that are
// not about outages (later options override it): on a loaded machine a
// round trip can pass the default 250ms, and the store would then decide
// in its outage mode.
var patientRedis = redisstore.WithTimeout(10 * time.Second)

// startOnRedis starts a Limiter whose store is a redisstore on srv, with the
// given store options, and closes it at the test's end.
func startOnRedis(t *testing.T, srv *redistest.Server, sopts []redisstore.Option, opts ...actorlimit.Option) (*actorlimit.Limiter, *redisstore.Store) {
	t.Helper()
	s, err := redisstore.New(srv.Client(func(o *redis.Options) {
		// As redisstore's doc advises: a dead Redis costs one refused dial,
		// and reads stop at the store's timeout.
		o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled = -1, 1, true
	}), append([]redisstore.Option{patientRedis}, sopts...)...)
	require.NoError(t, err)
	lim, err := actorlimit.Start(append([]actorlimit.Option{actorlimit.WithStore(s)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close() })
	return lim, s
}

// TestRedisStoreThroughTheAPI runs the same calls through a Limiter on Redis
// and a Limiter on its embedded table, on one fake clock, for every
// algorithm: Hit, HitN, HitMany, Peek and Reset must answer alike.
func TestRedisStoreThroughTheAPI(t *testing.T) {
	srv := redistest.Start(t)
	clk := newFakeClock()
	onRedis, _ := startOnRedis(t, srv, []redisstore.Option{redisstore.WithCallerTime()}, actorlimit.WithClock(clk))
	local := start(t, clk)
	ctx := context.Background()
	algorithms := []actorlimit.Algorithm{actorlimit.FixedWindow, actorlimit.SlidingWindow, actorlimit.GCRA,
		actorlimit.TokenBucket, actorlimit.LeakyBucket, actorlimit.SlidingLog}
	steps := []struct {
		name string
		do   func(l *actorlimit.Limiter, id string, p actorlimit.Policy) (any, error)
	}{
		{"hit", func(l *actorlimit.Limiter, id string, p actorlimit.Policy) (any, error) { return l.Hit(ctx, id, p) }},
		{"hit 2", func(l *actorlimit.Limiter, id string, p actorlimit.Policy) (any, error) { return l.HitN(ctx, id, p, 2) }},
		{"peek", func(l *actorlimit.Limiter, id string, p actorlimit.Policy) (any, error) { return l.Peek(ctx, id, p) }},
		{"many", func(l *actorlimit.Limiter, id string, p actorlimit.Policy) (any, error) {
			out := make([]actorlimit.Result, 3)
			err := l.HitMany(ctx, []actorlimit.HitRequest{{ID: id, Policy: p}, {ID: id + "-b", Policy: p, N: 3}, {ID: id, Policy: p}}, out)
			return out, err
		}},
		{"hit", func(l *actorlimit.Limiter, id string, p actorlimit.Policy) (any, error) { return l.Hit(ctx, id, p) }},
		{"reset", func(l *actorlimit.Limiter, id string, p actorlimit.Policy) (any, error) {
			return nil, l.Reset(ctx, id, p)
		}},
		{"hit after reset", func(l *actorlimit.Limiter, id string, p actorlimit.Policy) (any, error) { return l.Hit(ctx, id, p) }},
	}
	for _, al := range algorithms {
		p := actorlimit.Policy{Algorithm: al, Limit: 4, Period: 30 * time.Second}
		id := fmt.Sprintf("api-%v", al)
		for i, st := range steps {
			want, wantErr := st.do(local, id, p)
			got, err := st.do(onRedis, id, p)
			require.NoError(t, wantErr)
			require.NoError(t, err, "%v step %d (%s)", al, i, st.name)
			assert.Equal(t, want, got, "%v step %d (%s)", al, i, st.name)
			clk.Advance(3 * time.Second)
		}
	}
}

// TestRedisTwoAppServersExact: two Limiters ("two app servers"), each with
// its own client, share one Redis under concurrent load; exactly Limit hits
// are allowed between them, and the mailbox sends fewer batches than there
// are calls.
func TestRedisTwoAppServersExact(t *testing.T) {
	srv := redistest.Start(t)
	clk := newFakeClock() // frozen: no window may end during the test
	const limit, callersEach, hitsEach = 300, 16, 40
	p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: limit, Period: time.Minute}
	g := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: limit, Period: time.Minute}
	var servers [2]*actorlimit.Limiter
	var stores [2]*redisstore.Store
	for i := range servers {
		servers[i], stores[i] = startOnRedis(t, srv, []redisstore.Option{redisstore.WithCallerTime()}, actorlimit.WithClock(clk))
	}
	var allowed, allowedGCRA [2]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2*callersEach)
	for s := range servers {
		for range callersEach {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range hitsEach {
					out := make([]actorlimit.Result, 2)
					err := servers[s].HitMany(context.Background(), []actorlimit.HitRequest{{ID: "shared", Policy: p}, {ID: "shared", Policy: g}}, out)
					if err != nil {
						errs <- err
						return
					}
					if out[0].Allowed {
						allowed[s].Add(1)
					}
					if out[1].Allowed {
						allowedGCRA[s].Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	assert.Equal(t, int64(limit), allowed[0].Load()+allowed[1].Load(), "fixed window: allowed by server 0 and 1: %d, %d", allowed[0].Load(), allowed[1].Load())
	assert.Equal(t, int64(limit), allowedGCRA[0].Load()+allowedGCRA[1].Load(), "GCRA: allowed by server 0 and 1: %d, %d", allowedGCRA[0].Load(), allowedGCRA[1].Load())
	for i, s := range servers {
		res, err := s.Peek(context.Background(), "shared", p)
		require.NoError(t, err)
		assert.Equal(t, int64(2*callersEach*hitsEach), res.Count, "server %d sees every hit, denied ones included", i)
		st := stores[i].Stats()
		assert.Less(t, st.Batches, uint64(callersEach*hitsEach), "server %d: one Decide per call, none gathered", i)
		assert.Zero(t, st.Errors)
		t.Logf("server %d: %d calls in %d store batches", i, callersEach*hitsEach, st.Batches)
	}
}

// TestRedisTwoAppServersThroughMiddleware: the HTTP middleware of two app
// servers on one Redis counts one client's requests together, at Redis's
// time.
func TestRedisTwoAppServersThroughMiddleware(t *testing.T) {
	srv := redistest.Start(t)
	rules := []httpadapter.Rule{{
		Name:    "api",
		GroupBy: []string{"ip"},
		Policy:  actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 5, Period: time.Hour},
	}}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	var handlers [2]http.Handler
	for i := range handlers {
		lim, _ := startOnRedis(t, srv, nil)
		mw, err := httpadapter.New(lim, httpadapter.Config{Rules: rules})
		require.NoError(t, err)
		handlers[i] = mw.Handler(ok)
	}
	var codes []int
	for i := range 8 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.RemoteAddr = "192.0.2.7:1234"
		handlers[i%2].ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	assert.Equal(t, []int{200, 200, 200, 200, 200, 429, 429, 429}, codes)
}

// TestRedisKilledUnderLoad kills Redis while callers hit a Limiter on it,
// for each outage mode: no call hangs, the mode decides as documented, and
// once Redis is back the Limiter uses it again.
func TestRedisKilledUnderLoad(t *testing.T) {
	modes := []redisstore.Outage{redisstore.Fallback, redisstore.FailOpen, redisstore.FailClosed, redisstore.FailError}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			srv := redistest.Start(t)
			sopts := []redisstore.Option{redisstore.WithOutage(mode),
				redisstore.WithTimeout(200 * time.Millisecond), redisstore.WithProbeInterval(50 * time.Millisecond)}
			lim, store := startOnRedis(t, srv, sopts)
			witness, _ := startOnRedis(t, srv, nil) // a second app server, to see what Redis holds
			p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 1 << 40, Period: time.Hour}

			var stop atomic.Bool
			var calls, slow, wrong atomic.Int64
			var firstErr atomic.Value
			var wg sync.WaitGroup
			for c := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						t0 := time.Now()
						res, err := lim.Hit(ctx, fmt.Sprintf("load-%d", c), p)
						cancel()
						calls.Add(1)
						if time.Since(t0) > 2*time.Second {
							slow.Add(1)
						}
						switch {
						case err != nil && mode == redisstore.FailError && errors.Is(err, redisstore.ErrUnavailable):
						case err != nil:
							firstErr.CompareAndSwap(nil, err)
							wrong.Add(1)
						case mode == redisstore.FailClosed && !res.Allowed && res.Count == 0:
						case !res.Allowed:
							wrong.Add(1)
						}
					}
				}()
			}
			waitCalls := func(n int64) {
				deadline := time.Now().Add(time.Minute)
				for target := calls.Load() + n; calls.Load() < target; {
					require.True(t, time.Now().Before(deadline), "callers stopped making progress")
					time.Sleep(time.Millisecond)
				}
			}
			waitCalls(200)
			srv.Kill()
			waitCalls(200) // served during the outage
			outage := store.Stats()
			srv.Restart()
			// Recovery: a hit through lim lands in Redis, as the witness sees.
			deadline := time.Now().Add(time.Minute)
			for n := 1; ; n++ {
				_, err := lim.Hit(context.Background(), "after", p)
				if err == nil {
					res, werr := witness.Peek(context.Background(), "after", p)
					if werr == nil && res.Count > 0 {
						break
					}
				}
				require.True(t, time.Now().Before(deadline), "never recovered: %v", err)
				time.Sleep(10 * time.Millisecond) // the probe interval is on the wall clock
			}
			waitCalls(200)
			stop.Store(true)
			wg.Wait()

			assert.Zero(t, slow.Load(), "calls outlasted the store's timeout by far")
			assert.Zero(t, wrong.Load(), "decisions the mode does not allow; first error %v", firstErr.Load())
			assert.GreaterOrEqual(t, outage.Outages, uint64(1))
			switch mode {
			case redisstore.Fallback:
				assert.Positive(t, outage.Fallbacks)
			case redisstore.FailOpen:
				assert.Positive(t, outage.FailedOpen)
			case redisstore.FailClosed:
				assert.Positive(t, outage.FailedClosed)
			}
		})
	}
}

// TestRedisUnsupportedCheckFailsAlone: a check the Redis store cannot decide
// exactly fails its own caller with ErrUnsupported, never the callers whose
// checks the limiter gathers into the same batch. How often the bad call
// lands in a gathered batch depends on scheduling (the actor's
// TestGatherScreensEachCall forces it); here it must hold under load.
func TestRedisUnsupportedCheckFailsAlone(t *testing.T) {
	srv := redistest.Start(t)
	lim, _ := startOnRedis(t, srv, nil)
	ok := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1 << 40, Period: time.Second}
	bad := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1 << 53, Period: time.Second} // valid, beyond the scripts' exact range
	var wg sync.WaitGroup
	var badDone atomic.Bool
	errs := make(chan error, 17)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 200 || !badDone.Load(); n++ {
				if _, err := lim.Hit(context.Background(), fmt.Sprintf("ok-%d", g), ok); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer badDone.Store(true)
		for range 500 {
			if _, err := lim.Hit(context.Background(), "bad", bad); !errors.Is(err, redisstore.ErrUnsupported) {
				errs <- fmt.Errorf("bad check: %v, want ErrUnsupported", err)
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestRedisRefusedRuleDoesNotDisableOthers is issue 8's fault 4 on a Redis
// store: a valid rule whose checks the store refuses (a GCRA Limit beyond
// its scripts' exact range) matches every /upload request beside a
// 2-per-hour IP rule. The refusal wraps ErrInvalidArgument, so the
// middleware asks again rule by rule: the IP rule still blocks the 3rd
// upload, and only the refused rule counts errors.
func TestRedisRefusedRuleDoesNotDisableOthers(t *testing.T) {
	srv := redistest.Start(t)
	lim, _ := startOnRedis(t, srv, nil)
	huge := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 1 << 53, Period: time.Second}
	_, err := lim.Hit(context.Background(), "direct", huge)
	require.ErrorIs(t, err, redisstore.ErrUnsupported)
	assert.ErrorIs(t, err, actorlimit.ErrInvalidArgument, "a refused check counts nothing, like bad input")

	mw, err := httpadapter.New(lim, httpadapter.Config{Rules: []httpadapter.Rule{
		{Name: "huge", When: []httpadapter.Condition{httpadapter.PathPrefix("/upload")}, Policy: huge},
		{Name: "per-ip", When: []httpadapter.Condition{httpadapter.PathExact("/upload")}, GroupBy: []string{"ip"},
			Policy: actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 2, Period: time.Hour}},
	}})
	require.NoError(t, err, "the rule is valid: only the store refuses it")
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	var codes []int
	for range 5 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/upload", nil)
		r.RemoteAddr = "192.0.2.7:1234"
		h.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	assert.Equal(t, []int{200, 200, 429, 429, 429}, codes)
	s := mw.Stats()
	assert.Zero(t, s.LimiterErrors, "the limiter did not fail: the store refused one rule")
	assert.Equal(t, []httpadapter.RuleStats{
		{Rule: "huge", Matched: 5, Errors: 5},
		{Rule: "per-ip", Matched: 5, Allowed: 2, Blocked: 3},
	}, s.Rules)
}
