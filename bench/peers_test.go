package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"

	"github.com/actorlimit/actorlimit"
)

// The work every peer does: a window (or the nearest thing the peer has) of
// one hour that allows perHour hits, far more than any run makes, so no hit
// is ever denied. Every implementation reads the wall clock, as it would in
// production: the peers that cannot take a clock pay for time.Now, so the
// others do too.
const (
	period         = time.Hour
	periodMs       = int64(period / time.Millisecond)
	perHour        = 1 << 40
	batchSize      = 64 // hits per HitMany call of impl=actorlimit-batch
	hourlyInterval = period / perHour
)

// hitter counts hits for one goroutine. hit counts one hit for id and
// reports whether every hit it sent so far was allowed; flush sends whatever
// it still holds. Single-call implementations hit at once and flush nothing.
type hitter interface {
	hit(id string) (bool, error)
	flush() (bool, error)
}

// single is a hitter made of a checkFunc, safe for concurrent use.
type single checkFunc

func (f single) hit(id string) (bool, error) { return f(id) }
func (single) flush() (bool, error)          { return true, nil }

// instance is one implementation's state, built for one run.
type instance struct {
	// newHitter returns a hitter for one goroutine.
	newHitter func() hitter
	// close releases the state; the instance must not be used after it.
	close func()
}

// peer is one implementation under test.
type peer struct {
	name string
	open func() (instance, error)
}

// singleInstance wraps a checkFunc that is safe for concurrent use.
func singleInstance(check checkFunc, close func()) instance {
	return instance{newHitter: func() hitter { return single(check) }, close: close}
}

var peers = []peer{
	{"actorlimit", openActorlimit},
	{"actorlimit-batch", openActorlimitBatch},
	{"x-time-rate", openXTimeRate},
	{"mutex-map", func() (instance, error) {
		l := newMutexMap(wallNanos)
		return singleInstance(func(id string) (bool, error) { return l.CheckRate(id, periodMs, perHour), nil }, func() {}), nil
	}},
	{"go-limiter", openGoLimiter},
	{"ulule-limiter", openUlule},
	{"mutex-btree", func() (instance, error) {
		l := newMutexBTree(wallNanos)
		return singleInstance(func(id string) (bool, error) { return l.CheckRate(id, periodMs, perHour), nil }, func() {}), nil
	}},
	{"throttled", openThrottled},
}

// isPeer reports whether name is one of the implementations actorlimit is
// compared against.
func isPeer(name string) bool { return name != "actorlimit" && name != "actorlimit-batch" }

func wallNanos() int64 { return time.Now().UnixNano() }

func startActorlimit() (*actorlimit.Limiter, error) {
	// The janitor runs as configured by default; with one-hour windows it
	// finds nothing to delete during a run.
	return actorlimit.Start()
}

func openActorlimit() (instance, error) {
	lim, err := startActorlimit()
	if err != nil {
		return instance{}, err
	}
	check := func(id string) (bool, error) {
		r, err := lim.CheckRate(id, periodMs, perHour)
		return r.Allowed, err
	}
	return singleInstance(check, func() { _ = lim.Close() }), nil
}

// batcher is impl=actorlimit-batch's hitter: it queues hits and sends them
// batchSize at a time in one HitMany call.
type batcher struct {
	lim     *actorlimit.Limiter
	hits    []actorlimit.HitRequest
	results []actorlimit.Result
}

var hourly = actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: perHour, Period: period}

func (b *batcher) hit(id string) (bool, error) {
	b.hits = append(b.hits, actorlimit.HitRequest{ID: id, Policy: hourly})
	if len(b.hits) < batchSize {
		return true, nil
	}
	return b.flush()
}

func (b *batcher) flush() (bool, error) {
	if len(b.hits) == 0 {
		return true, nil
	}
	res := b.results[:len(b.hits)]
	err := b.lim.HitMany(context.Background(), b.hits, res)
	b.hits = b.hits[:0]
	if err != nil {
		return false, err
	}
	for i := range res {
		if !res[i].Allowed {
			return false, nil
		}
	}
	return true, nil
}

func openActorlimitBatch() (instance, error) {
	lim, err := startActorlimit()
	if err != nil {
		return instance{}, err
	}
	return instance{
		newHitter: func() hitter {
			return &batcher{
				lim:     lim,
				hits:    make([]actorlimit.HitRequest, 0, batchSize),
				results: make([]actorlimit.Result, batchSize),
			}
		},
		close: func() { _ = lim.Close() },
	}, nil
}

// openXTimeRate keeps one token bucket per key in a sync.Map: the bucket
// holds an hour's hits and refills at perHour an hour.
func openXTimeRate() (instance, error) {
	var m sync.Map
	check := func(id string) (bool, error) {
		v, ok := m.Load(id)
		if !ok {
			v, _ = m.LoadOrStore(id, rate.NewLimiter(rate.Every(hourlyInterval), perHour))
		}
		return v.(*rate.Limiter).Allow(), nil
	}
	return singleInstance(check, func() {}), nil
}

// openGoLimiter uses go-limiter's memorystore: per key, perHour tokens per
// one-hour interval, its fixed-window-like bucket.
func openGoLimiter() (instance, error) {
	st, err := memorystore.New(&memorystore.Config{Tokens: perHour, Interval: period})
	if err != nil {
		return instance{}, err
	}
	ctx := context.Background()
	check := func(id string) (bool, error) {
		_, _, _, ok, err := st.Take(ctx, id)
		return ok, err
	}
	return singleInstance(check, func() { _ = st.Close(ctx) }), nil
}

// openUlule uses ulule/limiter's memory store with its defaults: a fixed
// window of one hour per key.
func openUlule() (instance, error) {
	l := ulule.New(ululememory.NewStore(), ulule.Rate{Period: period, Limit: perHour})
	ctx := context.Background()
	check := func(id string) (bool, error) {
		c, err := l.Get(ctx, id)
		return !c.Reached, err
	}
	return singleInstance(check, func() {}), nil
}

// openThrottled uses throttled's GCRA over its memstore without a key bound
// (maxKeys 0: a plain map, its cheapest form): perHour an hour with a burst
// of an hour's hits.
func openThrottled() (instance, error) {
	st, err := memstore.NewCtx(0)
	if err != nil {
		return instance{}, err
	}
	q := throttled.RateQuota{MaxRate: throttled.PerDuration(perHour, period), MaxBurst: perHour}
	l, err := throttled.NewGCRARateLimiterCtx(st, q)
	if err != nil {
		return instance{}, err
	}
	ctx := context.Background()
	check := func(id string) (bool, error) {
		limited, _, err := l.RateLimitCtx(ctx, id, 1)
		return !limited, err
	}
	return singleInstance(check, func() {}), nil
}

// fill hits every key once through h, so that the run starts in steady
// state, and fails if a hit is denied.
func fill(tb testing.TB, h hitter, keys []string) {
	tb.Helper()
	if len(keys) == 0 {
		tb.Fatal("empty key set")
	}
	for _, k := range keys {
		if ok, err := h.hit(k); !ok || err != nil {
			tb.Fatalf("hit %q: allowed %v, error %v", k, ok, err)
		}
	}
	if ok, err := h.flush(); !ok || err != nil {
		tb.Fatalf("flush: allowed %v, error %v", ok, err)
	}
}

// TestPeers checks that every implementation allows repeated hits on a
// small key set from several goroutines, so the benchmarks measure what
// they claim.
func TestPeers(t *testing.T) {
	keys := keySet(100)
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			inst, err := p.open()
			if err != nil {
				t.Fatal(err)
			}
			defer inst.close()
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					h := inst.newHitter()
					for i := range 3 * batchSize {
						if ok, err := h.hit(keys[(g*31+i)%len(keys)]); !ok || err != nil {
							t.Error("denied or failed:", err)
							return
						}
					}
					if ok, err := h.flush(); !ok || err != nil {
						t.Error("flush denied or failed:", err)
					}
				})
			}
			wg.Wait()
		})
	}
}
