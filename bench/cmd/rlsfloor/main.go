// Command rlsfloor serves Envoy's Rate Limit Service protocol
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) without
// deciding anything: every request gets OK, with one OK status per
// descriptor. It is the floor of the RLS benchmarks (bench/rls): what gRPC
// and the load generator leave of the machine, against which the real
// services are measured.
//
//	rlsfloor -grpc-addr 127.0.0.1:8081
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
	"os"
	"os/signal"
	"syscall"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func main() {
	addr := flag.String("grpc-addr", "127.0.0.1:0", "address to listen on (port 0: a free port)")
	flag.Parse()
	if err := run(*addr); err != nil {
		log.Fatal("rlsfloor: ", err)
	}
}

func run(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(s, floor{})
	fmt.Println("listening on", l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
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
