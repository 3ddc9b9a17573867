package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// load is callers hitting a limiter until stopped, counting answers and
// keeping the first errors.
type load struct {
	stop     atomic.Bool
	answered atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	errs     []error
}

// hammer starts callers goroutines, each hitting ids (in turn) under p.
func hammer(lim *actorlimit.Limiter, callers int, ids []string, p actorlimit.Policy) *load {
	l := &load{}
	for c := range callers {
		l.wg.Go(func() {
			for n := c; !l.stop.Load(); n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := lim.Hit(ctx, ids[n%len(ids)], p)
				cancel()
				if err != nil {
					l.mu.Lock()
					if len(l.errs) < 5 {
						l.errs = append(l.errs, err)
					}
					l.mu.Unlock()
				}
				l.answered.Add(1)
			}
		})
	}
	return l
}

// end stops the callers and returns the errors they got.
func (l *load) end() []error {
	l.stop.Store(true)
	l.wg.Wait()
	return l.errs
}

// waitFor polls cond until it holds, at most within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond) // polling the load, not waiting for a window
	}
}

// more returns a condition that holds once the load has answered n more
// calls than now.
func (l *load) more(n int64) func() bool {
	at := l.answered.Load()
	return func() bool { return l.answered.Load() >= at+n }
}

// clientOpts are the options redisstore advises (see Example_manyServers).
var clientOpts = redis.UniversalOptions{ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1, DialTimeout: 5 * time.Second}

// TestClusterNodeKilled: a store on a Redis Cluster of three nodes (slots
// assigned by redis-cli --cluster create, no replicas), 32 callers on 256
// ids spread over every node. One node killed: no caller gets an error, the
// store's local fallback decides (a round trip that touches the dead node
// fails as a whole, so the store counts an outage and decides on its
// fallback until a probe and a round trip work again; a probe may reach a
// live node, so it goes back and forth while the node is gone). The node
// restarted with its nodes.conf rejoins with its slots, and Redis decides
// every check again. With a key per window (mode=windowkeys, the caller's
// time) a batch's hits are INCRBYs and PEXPIREs that go-redis splits by
// node.
func TestClusterNodeKilled(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { clusterNodeKilled(t, m) })
	}
}

func clusterNodeKilled(t *testing.T, m mode) {
	nodes := redistest.StartClusterOf(t, 3)
	o := clientOpts
	o.Addrs = []string{nodes[0].Addr, nodes[1].Addr}
	client := redis.NewClusterClient(o.Cluster())
	defer client.Close()
	opts := []redisstore.Option{redisstore.WithPrefix("kill:"), redisstore.WithTimeout(2 * time.Second),
		redisstore.WithProbeInterval(50 * time.Millisecond)}
	if m.win {
		opts = withMode(m, append(opts, redisstore.WithCallerTime())...)
	}
	store, err := redisstore.New(client, opts...)
	require.NoError(t, err)
	lim, err := actorlimit.Start(actorlimit.WithStore(store), actorlimit.WithShards(4))
	require.NoError(t, err)
	defer lim.Close()

	ids := make([]string, 256)
	for i := range ids {
		ids[i] = "id" + strconv.Itoa(i)
	}
	p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 1_000_000_000, Period: time.Hour}
	l := hammer(lim, 32, ids, p)
	waitFor(t, 30*time.Second, "load on the cluster", l.more(500))
	require.Zero(t, store.Stats().Fallbacks, "every node up: Redis decides")

	nodes[2].Kill()
	waitFor(t, 30*time.Second, "the fallback deciding", func() bool { return store.Stats().Fallbacks > 200 })
	waitFor(t, 30*time.Second, "load with a node gone", l.more(1000))
	nodes[2].Restart()
	// Back: a stretch of 500 answers without one fallback.
	waitFor(t, 20*time.Second, "Redis deciding again", func() bool {
		before, more := store.Stats().Fallbacks, l.more(500)
		for !more() {
			time.Sleep(5 * time.Millisecond) // polling the load
		}
		return store.Stats().Fallbacks == before
	})
	errs := l.end()
	assert.Empty(t, errs)
	st := store.Stats()
	assert.NotZero(t, st.Outages)
	t.Logf("%d calls, %d decided on the fallback, %d outages, %d probes", l.answered.Load(), st.Fallbacks, st.Outages, st.Probes)
}

// TestSentinelFailover: a store on a primary watched by three sentinels, 32
// callers on one key. The primary killed: no caller gets an error (the
// fallback decides meanwhile), the sentinels promote the replica, the store
// follows it, and the window's count on the new primary starts from what
// the replica had when the primary died: nothing Redis had replicated is
// lost, and no hit is counted twice.
func TestSentinelFailover(t *testing.T) {
	ss := redistest.StartSentinels(t, redistest.SentinelsConfig{})
	o := clientOpts
	o.Addrs, o.MasterName = ss.Addrs, ss.Master
	client := redis.NewFailoverClient(o.Failover())
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("failover:"), redisstore.WithTimeout(2*time.Second),
		redisstore.WithProbeInterval(50*time.Millisecond))
	require.NoError(t, err)
	lim, err := actorlimit.Start(actorlimit.WithStore(store), actorlimit.WithShards(2))
	require.NoError(t, err)
	defer lim.Close()

	p := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 1_000_000_000, Period: time.Hour}
	l := hammer(lim, 32, []string{"hot"}, p)
	waitFor(t, 30*time.Second, "load on the primary", l.more(1000))
	require.Zero(t, store.Stats().Fallbacks)

	replica := ss.Replica.Client()
	count := func(c *redis.Client) int64 {
		keys, err := c.Keys(context.Background(), "failover:*").Result()
		require.NoError(t, err)
		require.Len(t, keys, 1, "one key, one window")
		n, err := c.HGet(context.Background(), keys[0], "c").Int64()
		require.NoError(t, err)
		return n
	}
	ss.Primary.Kill()
	had := count(replica) // the replica no longer follows anyone: this is all it will have
	require.Positive(t, had)
	killed := time.Now()
	ss.WaitPromoted(ss.Replica.Addr)
	promoted := time.Since(killed)
	// The store follows the new primary: its count grows again.
	waitFor(t, 20*time.Second, "the store on the new primary", func() bool { return count(replica) > had+500 })
	followed := time.Since(killed)
	errs := l.end()
	assert.Empty(t, errs)
	t.Logf("promoted %v after the kill, the store on it %v after", promoted, followed)

	st := store.Stats()
	final := count(replica)
	total := l.answered.Load()
	assert.GreaterOrEqual(t, final, had, "the count kept what the replica had")
	// A hit the primary ran and passed to the replica just before it died,
	// whose answer was lost with it, is in the replica's count and was
	// decided on the fallback too: at most one a caller (32), in flight at
	// the kill. More would be hits counted twice (a round trip sent again).
	assert.LessOrEqual(t, final, total-int64(st.Fallbacks)+32, "no hit counted twice")
	assert.NotZero(t, st.Fallbacks, "the fallback decided while no primary answered")
	t.Logf("%d calls: the replica had %d when the primary died, %d on the fallback, %d on the new primary at the end",
		total, had, st.Fallbacks, final)
}

// TestSplit: a Split store sends one-second checks to one redis-server and
// the others to another; with the per-second one killed, only its checks
// are decided on its fallback, the others still on their Redis; a mixed
// batch is decided whole, each side's decisions in their places.
func TestSplit(t *testing.T) {
	secSrv, restSrv := redistest.Start(t), redistest.Start(t)
	newStore := func(s *redistest.Server) *redisstore.Store {
		o := clientOpts
		o.Addrs = []string{s.Addr}
		c := redis.NewClient(o.Simple())
		t.Cleanup(func() { c.Close() })
		st, err := redisstore.New(c, redisstore.WithPrefix("split:"), patient)
		require.NoError(t, err)
		return st
	}
	sec, rest := newStore(secSrv), newStore(restSrv)
	_, err := redisstore.NewSplit(sec, sec)
	assert.ErrorIs(t, err, redisstore.ErrInvalid)
	_, err = redisstore.NewSplit(nil, rest)
	assert.ErrorIs(t, err, redisstore.ErrInvalid)
	split, err := redisstore.NewSplit(sec, rest)
	require.NoError(t, err)
	lim, err := actorlimit.Start(actorlimit.WithStore(split), actorlimit.WithShards(2))
	require.NoError(t, err)
	defer lim.Close()

	perSecond := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 1000, Period: time.Second}
	perMinute := actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 3, Period: time.Minute}
	keys := func(s *redistest.Server) []string {
		k, err := s.Client().Keys(context.Background(), "split:*").Result()
		require.NoError(t, err)
		return k
	}
	ctx := context.Background()
	for i := range 4 {
		r, err := lim.Hit(ctx, "a", perMinute)
		require.NoError(t, err)
		assert.Equal(t, i < 3, r.Allowed, "hit %d", i)
		_, err = lim.Hit(ctx, "a", perSecond)
		require.NoError(t, err)
	}
	assert.Len(t, keys(secSrv), 1, "the one-second window's key")
	assert.Len(t, keys(restSrv), 1, "the minute's key")
	assert.Contains(t, keys(restSrv)[0], fmt.Sprint(int64(time.Minute)))

	// A mixed batch, 32 callers on both policies: no error.
	var wg sync.WaitGroup
	var failed atomic.Int64
	for c := range 32 {
		wg.Go(func() {
			for n := range 50 {
				p := []actorlimit.Policy{perSecond, perMinute}[(c+n)%2]
				if _, err := lim.Hit(ctx, "m"+strconv.Itoa(c), p); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, failed.Load())
	assert.Zero(t, split.Stats().Fallbacks)

	secSrv.Kill()
	for i := range 3 {
		_, err := lim.Hit(ctx, "b", perSecond)
		require.NoError(t, err, "hit %d", i)
		r, err := lim.Hit(ctx, "a", perMinute)
		require.NoError(t, err)
		assert.False(t, r.Allowed, "the minute's Redis still holds a's count")
	}
	assert.Equal(t, uint64(3), sec.Stats().Fallbacks, "the per-second checks on their fallback")
	assert.Zero(t, rest.Stats().Fallbacks, "the others on their Redis")
	assert.Equal(t, uint64(3), split.Stats().Fallbacks)
}

// TestSplitFailError: in FailError mode, an outage of one side fails only
// that side's checks, as an algo.CheckErrors naming them in order; the
// other side's decisions are in their places.
func TestSplitFailError(t *testing.T) {
	live := redistest.Start(t)
	o := clientOpts
	o.Addrs = []string{"127.0.0.1:1"} // nothing listens there
	dead := redis.NewClient(o.Simple())
	defer dead.Close()
	o.Addrs = []string{live.Addr}
	up := redis.NewClient(o.Simple())
	defer up.Close()
	sec, err := redisstore.New(dead, redisstore.WithOutage(redisstore.FailError), redisstore.WithPrefix("fe:"))
	require.NoError(t, err)
	rest, err := redisstore.New(up, redisstore.WithOutage(redisstore.FailError), redisstore.WithPrefix("fe:"), patient)
	require.NoError(t, err)
	split, err := redisstore.NewSplit(sec, rest)
	require.NoError(t, err)

	second := algo.Check{Algorithm: algo.FixedWindow, ID: "s", Period: time.Second, Limit: 5, N: 1}
	minute := algo.Check{Algorithm: algo.FixedWindow, ID: "m", Period: time.Minute, Limit: 1000, N: 1}
	cases := []struct {
		name   string
		checks []algo.Check
		failed []int // nil: no error
	}{
		{"rest only", []algo.Check{minute, minute}, nil},
		{"second only", []algo.Check{second}, []int{-1}}, // the side's own error, whole
		{"mixed", []algo.Check{second, minute, second, minute}, []int{0, 2}},
		{"mixed, rest first", []algo.Check{minute, second, minute, minute, second}, []int{1, 4}},
	}
	for _, c := range cases {
		out := make([]algo.Decision, len(c.checks))
		err := split.Decide(context.Background(), time.Now().UnixNano(), c.checks, out)
		switch {
		case c.failed == nil:
			assert.NoError(t, err, c.name)
		case c.failed[0] < 0:
			assert.ErrorIs(t, err, redisstore.ErrUnavailable, c.name)
		default:
			var ce *algo.CheckErrors
			require.ErrorAs(t, err, &ce, c.name)
			assert.Equal(t, c.failed, ce.Index, c.name)
			for _, e := range ce.Errs {
				assert.ErrorIs(t, e, redisstore.ErrUnavailable, c.name)
			}
			for i := range c.checks {
				if c.checks[i].Period == time.Minute {
					assert.True(t, out[i].Allowed, "%s: check %d decided by the live side", c.name, i)
					assert.Positive(t, out[i].Count, "%s: check %d", c.name, i)
				}
			}
		}
	}
}

// TestSplitDeniedCache: each side keeps its own over-limit cache; Answer
// asks the side of the check's Period, and Answering reports either side's.
func TestSplitDeniedCache(t *testing.T) {
	one, two := redistest.Start(t), redistest.Start(t)
	newStore := func(s *redistest.Server, cache bool) *redisstore.Store {
		o := clientOpts
		o.Addrs = []string{s.Addr}
		c := redis.NewClient(o.Simple())
		t.Cleanup(func() { c.Close() })
		opts := []redisstore.Option{redisstore.WithPrefix("dc:"), redisstore.WithCallerTime(), patient}
		if cache {
			opts = append(opts, redisstore.WithDeniedCache(time.Minute))
		}
		st, err := redisstore.New(c, opts...)
		require.NoError(t, err)
		return st
	}
	sec, rest := newStore(one, true), newStore(two, true)
	split, err := redisstore.NewSplit(sec, rest)
	require.NoError(t, err)
	assert.True(t, split.Answering())
	plain, err := redisstore.NewSplit(newStore(one, false), newStore(two, false))
	require.NoError(t, err)
	assert.False(t, plain.Answering())

	now := time.Date(2030, 1, 1, 0, 0, 0, 100_000_000, time.UTC).UnixNano()
	second := algo.Check{Algorithm: algo.FixedWindow, ID: "x", Period: time.Second, Limit: 1, N: 1}
	minute := algo.Check{Algorithm: algo.FixedWindow, ID: "x", Period: time.Minute, Limit: 1, N: 1}
	out := make([]algo.Decision, 2)
	for range 2 {
		require.NoError(t, split.Decide(context.Background(), now, []algo.Check{second, minute}, out))
	}
	assert.False(t, out[0].Allowed)
	assert.False(t, out[1].Allowed)
	for _, c := range []algo.Check{second, minute} {
		d, ok := split.Answer(now, &c)
		assert.True(t, ok, "%v", c.Period)
		assert.False(t, d.Allowed)
	}
	assert.Equal(t, uint64(1), sec.Stats().Cached, "the second's denial from its own side's cache")
	assert.Equal(t, uint64(1), rest.Stats().Cached)
	other := algo.Check{Algorithm: algo.FixedWindow, ID: "y", Period: time.Second, Limit: 1, N: 1}
	_, ok := split.Answer(now, &other)
	assert.False(t, ok, "a key never denied")
}
