package main

import (
	"errors"
	"flag"
	"fmt"

	"google.golang.org/grpc"
)

// transportFlags are the gRPC server's HTTP/2 transport settings beyond
// grpc-go's defaults.
type transportFlags struct {
	// kind is -grpc-transport: transportGRPC or transportDirect.
	kind string
	// windowBytes is each stream's and each connection's flow-control
	// window, fixed; 0 leaves grpc-go's estimate of the bandwidth-delay
	// product on (a PING to the client as data arrives, the windows grown
	// up to 16 MiB when a client sends in bulk).
	windowBytes int
}

// Bounds of -grpc-window-bytes.
const (
	// minWindowBytes is HTTP/2's initial window and one: grpc-go ignores
	// a smaller window.
	minWindowBytes = 64 << 10
	maxWindowBytes = 1<<31 - 1
)

// The values of -grpc-transport.
const (
	// transportGRPC serves every call with grpc-go's server.
	transportGRPC = "grpc"
	// transportDirect serves a connection whose first call is the
	// RateLimitService's or the health service's Check with
	// service/unary, and hands every other connection to grpc-go's server.
	transportDirect = "direct"
)

// register adds the transport's flags to fs.
func (t *transportFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.kind, "grpc-transport", transportGRPC, "gRPC's server transport: grpc (grpc-go's) or direct (a connection whose first call is ShouldRateLimit or the health service's Check is served by actorlimitd's own HTTP/2 transport, cheaper per call; other calls on that connection, RLQS streams among them, are proxied in process to grpc-go's server; any other connection goes to grpc-go's server; not with -tracing or -grpc-window-bytes)")
	fs.IntVar(&t.windowBytes, "grpc-window-bytes", 0, "gRPC: each stream's and each connection's HTTP/2 flow-control window, fixed, 65536 to 2147483647 (no PINGs to estimate it; a connection's unread requests bounded by the window times -max-concurrent-streams); 0: grpc-go's estimate of the bandwidth-delay product, a PING to the client as requests arrive, windows grown up to 16 MiB")
}

// check refuses settings that cannot work.
func (t transportFlags) check(tracing bool) error {
	switch {
	case t.kind != transportGRPC && t.kind != transportDirect:
		return fmt.Errorf("-grpc-transport %q: want %s or %s", t.kind, transportGRPC, transportDirect)
	case t.kind == transportDirect && tracing:
		return errors.New("-grpc-transport direct does not trace its calls (tracing is grpc-go's stats handler): use -grpc-transport grpc with -tracing")
	case t.kind == transportDirect && t.windowBytes != 0:
		return errors.New("-grpc-transport direct has windows of its own (64 KiB a stream, 1 MiB a connection): -grpc-window-bytes goes with -grpc-transport grpc")
	}
	if t.windowBytes != 0 && (t.windowBytes < minWindowBytes || t.windowBytes > maxWindowBytes) {
		return fmt.Errorf("-grpc-window-bytes %d: want 0 (estimated) or %d to %d", t.windowBytes, minWindowBytes, maxWindowBytes)
	}
	return nil
}

// serverOptions are the gRPC server's options for t.
func (t transportFlags) serverOptions() []grpc.ServerOption {
	if t.windowBytes == 0 {
		return nil
	}
	return []grpc.ServerOption{grpc.StaticStreamWindowSize(int32(t.windowBytes)), grpc.StaticConnWindowSize(int32(t.windowBytes))}
}
