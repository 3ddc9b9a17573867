package cluster_test

import (
	"context"
	"sync"
	"time"

	protocluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/grpc"

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

// grpcConns records the gRPC connections a client makes, through the dial
// options it returns, so that a test closes them: protoactor's etcd
// provider never closes the etcd client it makes, nor a bare remote the
// connections it dialed (the members close theirs: conns.go); left open,
// they outlive the test, retrying, and count against the next test's
// (TestStartCloseCycles).
type grpcConns struct {
	mu     sync.Mutex
	conns  map[*grpc.ClientConn]struct{}
	closed bool
}

// dialOptions returns the interceptors that record each connection on its
// calls.
func (e *grpcConns) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			e.add(cc)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			e.add(cc)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

// add records cc; once closed, it closes cc instead (a client may dial
// again after the test has closed what it recorded).
func (e *grpcConns) add(cc *grpc.ClientConn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		_ = cc.Close()
		return
	}
	if e.conns == nil {
		e.conns = make(map[*grpc.ClientConn]struct{})
	}
	e.conns[cc] = struct{}{}
}

// close closes every connection recorded, and any recorded later.
func (e *grpcConns) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for cc := range e.conns {
		_ = cc.Close()
	}
}
