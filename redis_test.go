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
	"github.com/actorlimit/actorlimit/redisstore/busypoll"
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
	return startOnClient(t, redisClient(srv), sopts, opts...)
}

// redisClient returns a client of srv with the options redisstore's doc
// advises: a dead Redis costs one refused dial, reads stop at the store's
// timeout, and RESP2 lets the store keep a connection of its own.
func redisClient(srv *redistest.Server) *redis.Client {
	return srv.Client(func(o *redis.Options) {
		o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled, o.Protocol = -1, 1, true, 2
	})
}

// startOnClient is startOnRedis with a client of the test's own.
func startOnClient(t *testing.T, client redis.UniversalClient, sopts []redisstore.Option, opts ...actorlimit.Option) (*actorlimit.Limiter, *redisstore.Store) {
	t.Helper()
	s, err := redisstore.New(client, append([]redisstore.Option{patientRedis}, sopts...)...)
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

// TestRedisThreeAppServersExact: three Limiters ("three app servers"),
// each with its own client, share one Redis under concurrent load on every
// algorithm at once; between them they allow exactly what one embedded table
// allows for the same hits, and each server's mailbox batches are one round
// trip to Redis each, fewer than the calls.
func TestRedisThreeAppServersExact(t *testing.T) {
	srv := redistest.Start(t)
	clk := newFakeClock() // frozen: no window may end, no bucket drain during the test
	const servers, callersEach, hitsEach, limit = 3, 16, 40, 300
	ctx := context.Background()
	hits := make([]actorlimit.HitRequest, len(allAlgorithms))
	for i, a := range allAlgorithms {
		hits[i] = actorlimit.HitRequest{ID: "shared", Policy: actorlimit.Policy{Algorithm: a, Limit: limit, Period: time.Minute}}
	}
	lims := make([]*actorlimit.Limiter, servers)
	stores := make([]*redisstore.Store, servers)
	trips := make([]*redistest.RoundTrips, servers)
	for i := range lims {
		client := redisClient(srv)
		trips[i] = &redistest.RoundTrips{}
		client.AddHook(trips[i])
		lims[i], stores[i] = startOnClient(t, client, []redisstore.Option{redisstore.WithCallerTime()}, actorlimit.WithClock(clk))
		// Load the scripts and dial, on a key of its own, before counting.
		warm := make([]actorlimit.HitRequest, len(hits))
		for j := range hits {
			warm[j] = hits[j]
			warm[j].ID = "warm"
		}
		require.NoError(t, lims[i].HitMany(ctx, warm, make([]actorlimit.Result, len(warm))))
	}
	var batches0, trips0 [servers]uint64
	for i := range lims {
		batches0[i], trips0[i] = stores[i].Stats().Batches, uint64(trips[i].N())
	}
	allowed := make([][servers]atomic.Int64, len(hits))
	var wg sync.WaitGroup
	errs := make(chan error, servers*callersEach)
	for s := range lims {
		for range callersEach {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := make([]actorlimit.Result, len(hits))
				for range hitsEach {
					if err := lims[s].HitMany(ctx, hits, out); err != nil {
						errs <- err
						return
					}
					for j := range out {
						if out[j].Allowed {
							allowed[j][s].Add(1)
						}
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
	// The truth: the same hits, one at a time, on an embedded table.
	local := start(t, clk)
	for j, h := range hits {
		want := countAllowed(t, local, "shared", h.Policy, servers*callersEach*hitsEach)
		got := allowed[j][0].Load() + allowed[j][1].Load() + allowed[j][2].Load()
		assert.Equal(t, int64(want), got, "%v: allowed by servers 0, 1, 2: %d, %d, %d", h.Policy.Algorithm,
			allowed[j][0].Load(), allowed[j][1].Load(), allowed[j][2].Load())
	}
	for i, s := range lims {
		res, err := s.Peek(ctx, "shared", hits[0].Policy)
		require.NoError(t, err)
		assert.Equal(t, int64(servers*callersEach*hitsEach), res.Count, "server %d sees every fixed-window hit, denied ones included", i)
		st := stores[i].Stats()
		batches, rts := st.Batches-batches0[i], uint64(trips[i].N())-trips0[i]
		assert.Less(t, batches, uint64(callersEach*hitsEach), "server %d: one Decide per call, none gathered", i)
		assert.Equal(t, batches, rts, "server %d: one round trip per batch", i)
		assert.Zero(t, st.Errors)
		t.Logf("server %d: %d calls in %d store batches, %d round trips", i, callersEach*hitsEach, batches, rts)
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
		mw, err := httpadapter.New(lim, httpadapter.Config{Rules: rules, SecretKey: []byte("0123456789abcdef")})
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
// for each outage mode, with the fixed window's script and with a key per
// window (redisstore.WithWindowKeys): no call hangs, the mode decides as
// documented, and once Redis is back the Limiter uses it again.
func TestRedisKilledUnderLoad(t *testing.T) {
	modes := []redisstore.Outage{redisstore.Fallback, redisstore.FailOpen, redisstore.FailClosed, redisstore.FailError}
	for _, keep := range []string{"script", "windowkeys", "busypoll"} {
		for _, mode := range modes {
			t.Run(keep+"/"+mode.String(), func(t *testing.T) {
				srv := redistest.Start(t)
				var kopts []redisstore.Option
				if keep == "windowkeys" {
					kopts = []redisstore.Option{redisstore.WithWindowKeys(), redisstore.WithCallerTime()}
				}
				sopts := append([]redisstore.Option{redisstore.WithOutage(mode),
					redisstore.WithTimeout(200 * time.Millisecond), redisstore.WithProbeInterval(50 * time.Millisecond)}, kopts...)
				client := redisClient(srv)
				var poller *busypoll.Poller
				if keep == "busypoll" {
					// The client's reads poll for the reply: one actor has
					// one round trip in flight, whose read polls.
					var err error
					poller, err = busypoll.New(busypoll.Config{Spin: time.Millisecond})
					require.NoError(t, err)
					client = srv.Client(func(o *redis.Options) {
						o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled, o.Protocol, o.Dialer = -1, 1, true, 2, poller.Dial
					})
				}
				lim, store := startOnClient(t, client, sopts)
				witness, _ := startOnRedis(t, srv, kopts) // a second app server, to see what Redis holds
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

				if poller != nil {
					assert.Positive(t, poller.Stats().Polled, "no reply came while a read polled")
				}
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

// TestRedisBadKeyFailsAlone: a key that Redis answers with an error (here
// one of another type) fails only the checks on it, under concurrent load
// through the limiter, which gathers them with the others into one
// pipeline: every other check is decided by Redis, Redis is never taken for
// down, and only the bad checks go to the outage mode (the default,
// Fallback).
func TestRedisBadKeyFailsAlone(t *testing.T) {
	srv := redistest.Start(t)
	clk := newFakeClock() // frozen: every fixed-window hit lands in one window
	lim, store := startOnRedis(t, srv, []redisstore.Option{redisstore.WithCallerTime()}, actorlimit.WithClock(clk))
	witness, _ := startOnRedis(t, srv, []redisstore.Option{redisstore.WithCallerTime()}, actorlimit.WithClock(clk))
	p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 1 << 40, Period: time.Hour}
	// The key of ("bad", p), as redisstore's doc gives its layout, holding a
	// string where the fixed window keeps a hash.
	require.NoError(t, srv.Client().Set(context.Background(), "actorlimit:v4:{bad}:FixedWindow:3600000000000", "x", 0).Err())
	const callers, hits = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, callers+1)
	for c := range callers + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("good-%d", c)
			if c == callers {
				id = "bad"
			}
			for range hits {
				if _, err := lim.Hit(context.Background(), id, p); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for c := range callers {
		res, err := witness.Peek(context.Background(), fmt.Sprintf("good-%d", c), p)
		require.NoError(t, err)
		assert.Equal(t, int64(hits), res.Count, "caller %d's hits are all in Redis", c)
	}
	st := store.Stats()
	assert.Equal(t, uint64(hits), st.CheckErrors)
	assert.Equal(t, uint64(hits), st.Fallbacks, "only the bad key's checks fell back")
	assert.Zero(t, st.Outages)
	assert.Zero(t, st.Errors)
	t.Logf("%d calls in %d store batches", (callers+1)*hits, st.Batches)
}

// TestRedisHungWithDefaultClientOptions: a Redis that accepts connections
// and never answers, reached by a client with go-redis's default options
// (which ignore a context's deadline on reads), holds no caller of the
// limiter longer than about the store's timeout: the batch goes to the
// outage mode (the default, Fallback) at WithTimeout.
func TestRedisHungWithDefaultClientOptions(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: redistest.Hung(t)})
	t.Cleanup(func() { _ = client.Close() })
	const timeout = 150 * time.Millisecond
	lim, store := startOnClient(t, client, []redisstore.Option{redisstore.WithTimeout(timeout)})
	p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 100, Period: time.Second}
	var wg sync.WaitGroup
	var slow, denied atomic.Int64
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				start := time.Now()
				res, err := lim.Hit(context.Background(), fmt.Sprintf("hung-%d", c), p)
				if err != nil || !res.Allowed {
					denied.Add(1)
				}
				if time.Since(start) > time.Second {
					slow.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, slow.Load(), "calls held past the store's timeout")
	assert.Zero(t, denied.Load(), "the fallback table allows")
	st := store.Stats()
	assert.Equal(t, uint64(1), st.Outages)
	assert.Equal(t, uint64(40), st.Fallbacks)
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

	mw, err := httpadapter.New(lim, httpadapter.Config{SecretKey: []byte("0123456789abcdef"), Rules: []httpadapter.Rule{
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

// TestRedisStoreShared: one redisstore.Store given to two limiters, and to
// a limiter of four shards (four actors, each with its own round trips in
// flight), under concurrent load on every algorithm (run it with -race):
// together they allow exactly what one embedded table allows, every hit is
// counted once in Redis, and no check is decided by the fallback table
// while Redis answers.
func TestRedisStoreShared(t *testing.T) {
	srv := redistest.Start(t)
	clk := newFakeClock() // frozen: no window may end, no bucket drain during the test
	ctx := context.Background()
	s, err := redisstore.New(redisClient(srv), redisstore.WithCallerTime(), patientRedis)
	require.NoError(t, err)
	var lims []*actorlimit.Limiter
	for _, opts := range [][]actorlimit.Option{nil, nil, {actorlimit.WithShards(4)}} {
		lim, err := actorlimit.Start(append([]actorlimit.Option{actorlimit.WithStore(s), actorlimit.WithClock(clk)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lim.Close() })
		lims = append(lims, lim)
	}
	const callers, hitsEach, limit = 8, 60, 500
	var wg sync.WaitGroup
	allowed := make([]atomic.Int64, len(allAlgorithms))
	errs := make(chan error, len(lims)*callers)
	for _, lim := range lims {
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range hitsEach {
					j := (c + i) % len(allAlgorithms)
					p := actorlimit.Policy{Algorithm: allAlgorithms[j], Limit: limit, Period: time.Minute}
					res, err := lim.Hit(ctx, fmt.Sprintf("shared-%d", i%5), p)
					if err != nil {
						errs <- err
						return
					}
					if res.Allowed {
						allowed[j].Add(1)
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
	// The same hits, one at a time, on an embedded table.
	local := start(t, clk)
	perAlg := make([]int, len(allAlgorithms))
	for range lims {
		for c := range callers {
			for i := range hitsEach {
				perAlg[(c+i)%len(allAlgorithms)]++
			}
		}
	}
	for j, a := range allAlgorithms {
		p := actorlimit.Policy{Algorithm: a, Limit: limit, Period: time.Minute}
		want := 0
		for k := range 5 { // the hits of algorithm j spread over the five ids
			n := 0
			for range lims {
				for c := range callers {
					for i := range hitsEach {
						if (c+i)%len(allAlgorithms) == j && i%5 == k {
							n++
						}
					}
				}
			}
			want += countAllowed(t, local, fmt.Sprintf("shared-%d", k), p, n)
		}
		assert.Equal(t, int64(want), allowed[j].Load(), "%v", a)
		if a == actorlimit.FixedWindow {
			total := int64(0)
			for k := range 5 {
				res, err := lims[0].Peek(ctx, fmt.Sprintf("shared-%d", k), p)
				require.NoError(t, err)
				total += res.Count
			}
			assert.Equal(t, int64(perAlg[j]), total, "every fixed-window hit counted once in Redis")
		}
	}
	st := s.Stats()
	assert.Zero(t, st.Fallbacks+st.FailedOpen+st.FailedClosed+st.Errors+st.Outages, "%+v", st)
	stats, err := lims[2].Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, actorlimit.EntriesUnknown, stats.Entries, "Redis's keys are not counted, over four shards too")
}

// TestRedisFailErrorFailsOnlyTheBadCheck: in FailError mode a key that
// Redis answers with an error fails the calls that hold a check on it, and
// only those: the callers gathered into the same batches get their
// decisions, each of their hits counted once (none retried).
func TestRedisFailErrorFailsOnlyTheBadCheck(t *testing.T) {
	srv := redistest.Start(t)
	clk := newFakeClock()
	lim, store := startOnRedis(t, srv, []redisstore.Option{redisstore.WithCallerTime(), redisstore.WithOutage(redisstore.FailError)},
		actorlimit.WithClock(clk))
	p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 1 << 40, Period: time.Hour}
	require.NoError(t, srv.Client().Set(context.Background(), "actorlimit:v4:{bad}:FixedWindow:3600000000000", "x", 0).Err())
	const callers, hits = 8, 50
	var wg sync.WaitGroup
	var goodErrs, badErrs atomic.Int64
	for c := range callers + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("good-%d", c)
			if c == callers {
				id = "bad"
			}
			for range hits {
				_, err := lim.Hit(context.Background(), id, p)
				switch {
				case err == nil:
				case id == "bad" && errors.Is(err, redisstore.ErrCheckFailed):
					badErrs.Add(1)
				default:
					t.Errorf("%s: %v", id, err)
					goodErrs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(hits), badErrs.Load(), "every bad check fails")
	assert.Zero(t, goodErrs.Load(), "no good check fails")
	for c := range callers {
		res, err := lim.Peek(context.Background(), fmt.Sprintf("good-%d", c), p)
		require.NoError(t, err)
		assert.Equal(t, int64(hits), res.Count, "caller %d's hits, each counted once", c)
	}
	st := store.Stats()
	assert.Equal(t, uint64(hits), st.CheckErrors)
	assert.Less(t, st.Batches, uint64((callers+1)*hits), "calls were gathered into shared batches")
}

// TestRedisDeniedCacheThroughTheLimiter: with redisstore.WithDeniedCache,
// once Redis has denied a key's hit, the limiter answers that key's hits
// denied on the caller's goroutine, with the denial's RetryAfter less the
// time since: no store batch, no round trip, counted in the store's
// Cached; the clock past the denial, Redis decides again.
func TestRedisDeniedCacheThroughTheLimiter(t *testing.T) {
	srv := redistest.Start(t)
	clk := newFakeClock()
	lim, store := startOnRedis(t, srv, []redisstore.Option{redisstore.WithCallerTime(), redisstore.WithDeniedCache(time.Minute)},
		actorlimit.WithClock(clk))
	ctx := context.Background()
	p := actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 2, Period: 10 * time.Second}
	for range 2 {
		res, err := lim.Hit(ctx, "flood", p)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	first, err := lim.Hit(ctx, "flood", p)
	require.NoError(t, err)
	require.False(t, first.Allowed)
	require.False(t, first.Cached, "Redis's own denial")
	batches := store.Stats().Batches
	clk.Advance(time.Second)
	for range 100 {
		res, err := lim.Hit(ctx, "flood", p)
		require.NoError(t, err)
		assert.False(t, res.Allowed)
		assert.True(t, res.Cached, "the cache's denial")
		assert.Equal(t, first.RetryAfter-time.Second, res.RetryAfter)
	}
	assert.Equal(t, batches, store.Stats().Batches, "no store batch")
	assert.Equal(t, uint64(100), store.Stats().Cached)
	clk.Advance(first.RetryAfter - time.Second)
	res, err := lim.Hit(ctx, "flood", p)
	require.NoError(t, err)
	assert.True(t, res.Allowed, "past the denial, Redis decides")
	assert.False(t, res.Cached)
	assert.Equal(t, batches+1, store.Stats().Batches)
}
