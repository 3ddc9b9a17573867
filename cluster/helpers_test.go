package cluster_test

import (
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/actorlimit/actorlimit/internal/testkit"
)

// fakeClock is a clock held by one test and moved only by it (testkit's).
// Its tickers tick only when the test says so: tests sync with
// Member.SyncNow, at moments of their choosing, or tick them by hand with
// tick.
type fakeClock struct{ *testkit.Clock }

// epoch is aligned to whole seconds, minutes and hours.
var epoch = time.Unix(1_700_002_800, 0)

func newFakeClock() *fakeClock { return &fakeClock{testkit.NewClock(epoch).HoldTickers()} }

// tick delivers one tick to every live ticker, waiting until each is taken.
func (c *fakeClock) tick() { c.Tick() }

// noProvider is a provider that is never started: Start rejects the
// configs it is given in before.
type noProvider struct{}

func (noProvider) StartMember(*protocluster.Cluster) error { return nil }
func (noProvider) StartClient(*protocluster.Cluster) error { return nil }
func (noProvider) Shutdown(bool) error                     { return nil }
