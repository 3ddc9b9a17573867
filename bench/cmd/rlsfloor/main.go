// Command rlsfloor serves Envoy's Rate Limit Service protocol
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) without
// deciding anything: every request gets OK, with one OK status per
// descriptor. It is the floor of the RLS benchmarks (bench/rls): what gRPC
// and the load generator leave of the machine, against which the real
// services are measured.
//
//	rlsfloor -grpc-addr 127.0.0.1:8081
//
// With -codec service it decodes requests and encodes answers with
// actorlimitd's codec (service.Codec: the scan against the bounds, its own
// decoder and encoder, pooled buffers) and builds each answer in one
// allocation: the floor of what actorlimitd's codec leaves of the machine.
//
//	rlsfloor -grpc-addr 127.0.0.1:8081 -codec service
//
// With -grpc-transport direct it serves on actorlimitd's own HTTP/2
// transport (service/unary, as actorlimitd -grpc-transport direct does)
// instead of grpc-go's server: the floor of that transport.
//
// It prints "listening on HOST:PORT" once it accepts connections (with port
// 0 the system picks a free one), and stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof" // the profiles on -debug-addr
	"os"
	"os/signal"
	"runtime"
	"syscall"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/service"
	"github.com/actorlimit/actorlimit/service/unary"
)

func main() {
	addr := flag.String("grpc-addr", "127.0.0.1:0", "address to listen on (port 0: a free port)")
	codec := flag.String("codec", "stock", "the server's codec: stock (grpc-go's proto codec) or service (actorlimitd's)")
	debug := flag.String("debug-addr", "", "address of Go's profiles (/debug/pprof/), to compare the floor's with actorlimitd's; empty: none")
	transport := flag.String("grpc-transport", "grpc", "the server's transport: grpc (grpc-go's server) or direct (actorlimitd's service/unary)")
	flag.Parse()
	if *debug != "" {
		dl, err := net.Listen("tcp", *debug)
		if err != nil {
			log.Fatal("rlsfloor: -debug-addr: ", err)
		}
		go func() { log.Print("rlsfloor: debug listener: ", http.Serve(dl, nil)) }()
	}
	if *codec != "stock" && *codec != "service" {
		log.Fatalf("rlsfloor: -codec %q: want stock or service", *codec)
	}
	if *transport != "grpc" && *transport != "direct" {
		log.Fatalf("rlsfloor: -grpc-transport %q: want grpc or direct", *transport)
	}
	if err := run(*addr, *codec == "service", *transport == "direct"); err != nil {
		log.Fatal("rlsfloor: ", err)
	}
}

func run(addr string, serviceCodec, direct bool) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	// handle answers a request's bytes on the direct transport.
	handle := func(_ context.Context, _ string, wire, dst []byte) ([]byte, error) {
		var req rlspb.RateLimitRequest
		if err := proto.Unmarshal(wire, &req); err != nil {
			return nil, status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
		}
		resp, err := floor{}.ShouldRateLimit(context.Background(), &req)
		if err != nil {
			return nil, err
		}
		return proto.MarshalOptions{}.MarshalAppend(dst, resp)
	}
	if serviceCodec {
		// The codec reads its bounds from a Server, which decides nothing
		// here: its limiter is never asked.
		lim, err := actorlimit.Start()
		if err != nil {
			return err
		}
		defer lim.Close()
		srv, err := service.New(nil, service.Options{Limiter: lim})
		if err != nil {
			return err
		}
		codec := service.NewCodec(srv)
		s = grpc.NewServer(grpc.ForceServerCodecV2(codec), grpc.ChainUnaryInterceptor(codec.Interceptor))
		rlspb.RegisterRateLimitServiceServer(s, leanFloor{})
		handle = func(_ context.Context, _ string, wire, dst []byte) ([]byte, error) {
			req, err := codec.DecodeRequest(wire)
			if err != nil {
				return nil, err
			}
			resp, err := leanFloor{}.ShouldRateLimit(context.Background(), req)
			if err != nil {
				return nil, err
			}
			return codec.AppendResponse(dst, resp)
		}
	} else {
		rlspb.RegisterRateLimitServiceServer(s, floor{})
	}
	fmt.Println("listening on", l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	if direct {
		u, err := unary.New(unary.Config{
			Handlers: map[string]unary.Handler{"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit": handle},
			Fallback: s,
			Workers:  8 * runtime.GOMAXPROCS(0), // as actorlimitd's -grpc-stream-workers
		})
		if err != nil {
			return err
		}
		go func() {
			<-sig
			_ = u.Shutdown(context.Background())
			s.GracefulStop()
		}()
		if err := u.Serve(l); err != nil && !errors.Is(err, unary.ErrServerClosed) {
			return err
		}
		return nil
	}
	go func() {
		<-sig
		s.GracefulStop()
	}()
	if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// floor answers every request OK.
type floor struct {
	rlspb.UnimplementedRateLimitServiceServer
}

// ShouldRateLimit answers OK with one OK status per descriptor, after the
// two checks every service makes (a domain and at least one descriptor).
func (floor) ShouldRateLimit(_ context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	if req.GetDomain() == "" || len(req.GetDescriptors()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "rlsfloor: a request needs a domain and a descriptor")
	}
	st := make([]*rlspb.RateLimitResponse_DescriptorStatus, len(req.GetDescriptors()))
	for i := range st {
		st[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
	}
	return &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK, Statuses: st}, nil
}

// leanFloor answers every request OK as floor does, its answer and
// statuses in one allocation up to 4 descriptors, as actorlimitd builds
// its own.
type leanFloor struct {
	rlspb.UnimplementedRateLimitServiceServer
}

// ShouldRateLimit answers as floor's does.
func (leanFloor) ShouldRateLimit(_ context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	n := len(req.GetDescriptors())
	if req.GetDomain() == "" || n == 0 {
		return nil, status.Error(codes.InvalidArgument, "rlsfloor: a request needs a domain and a descriptor")
	}
	if n > 4 {
		return floor{}.ShouldRateLimit(context.Background(), req)
	}
	a := new(struct {
		resp rlspb.RateLimitResponse
		ptrs [4]*rlspb.RateLimitResponse_DescriptorStatus
		sts  [4]rlspb.RateLimitResponse_DescriptorStatus
	})
	for i := range n {
		a.sts[i].Code = rlspb.RateLimitResponse_OK
		a.ptrs[i] = &a.sts[i]
	}
	a.resp.OverallCode, a.resp.Statuses = rlspb.RateLimitResponse_OK, a.ptrs[:n:n]
	return &a.resp, nil
}
