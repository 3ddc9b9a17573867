package cluster_test

import (
	"sync"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/actorlimit/actorlimit"
)

// fakeClock is a clock held by one test and moved only by it. Its tickers
// never tick: tests sync with Member.SyncNow, at moments of their choosing,
// or tick them by hand with tick.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
}

type fakeTicker struct{ c chan time.Time }

func (t *fakeTicker) C() <-chan time.Time { return t.c }
func (t *fakeTicker) Stop()               {}

// epoch is aligned to whole seconds, minutes and hours.
var epoch = time.Unix(1_700_002_800, 0)

func newFakeClock() *fakeClock { return &fakeClock{now: epoch} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTicker(time.Duration) actorlimit.Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTicker{c: make(chan time.Time)}
	c.tickers = append(c.tickers, t)
	return t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// tick delivers one tick to every ticker, waiting until each is taken.
func (c *fakeClock) tick() {
	c.mu.Lock()
	ts := append([]*fakeTicker(nil), c.tickers...)
	now := c.now
	c.mu.Unlock()
	for _, t := range ts {
		t.c <- now
	}
}

// noProvider is a provider that is never started: Start rejects the
// configs it is given in before.
type noProvider struct{}

func (noProvider) StartMember(*protocluster.Cluster) error { return nil }
func (noProvider) StartClient(*protocluster.Cluster) error { return nil }
func (noProvider) Shutdown(bool) error                     { return nil }
