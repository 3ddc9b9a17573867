package cluster

import (
	"context"
	"sync"

	"google.golang.org/grpc"
)

// endpointQueue is the first size of the engine's queue of messages to
// one member (it grows as needed). The engine's default, a million
// places, takes 16 MB a member this member talks to, at once.
const endpointQueue = 256

// clientConns holds every gRPC connection the member's engine opened to
// the others, so that its stop closes them all. The engine closes a
// connection when it takes the member it leads to for terminated, but not
// one whose stream failed to open (it dials again, up to 5 times, and
// leaves the one before open, retrying), nor one left when the engine's
// endpoint manager stops first: each kept its goroutines, and through the
// dial options the member and its engine's queues, for the life of the
// process (about 55 MB a member started and closed, measured with 3
// members started and closed 40 times in one process).
type clientConns struct {
	mu     sync.Mutex
	conns  map[*grpc.ClientConn]struct{}
	closed bool
}

// dialOptions returns the interceptors that record each connection on its
// first call.
func (cc *clientConns) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, conn *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cc.add(conn)
			return streamer(ctx, desc, conn, method, opts...)
		}),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, conn *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			cc.add(conn)
			return invoker(ctx, method, req, reply, conn, opts...)
		}),
	}
}

// add records conn; once the member has stopped, it closes it instead.
func (cc *clientConns) add(conn *grpc.ClientConn) {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		_ = conn.Close()
		return
	}
	if cc.conns == nil {
		cc.conns = make(map[*grpc.ClientConn]struct{})
	}
	cc.conns[conn] = struct{}{}
	cc.mu.Unlock()
}

// closeAll closes every connection recorded, and any recorded later.
func (cc *clientConns) closeAll() {
	cc.mu.Lock()
	conns := cc.conns
	cc.conns, cc.closed = nil, true
	cc.mu.Unlock()
	for conn := range conns {
		_ = conn.Close()
	}
}
