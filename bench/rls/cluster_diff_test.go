package rls

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/actorlimit/actorlimit/bench/internal/promtext"
)

// startActorlimitdCluster starts n actorlimitd processes as one cluster in
// Owner mode on loopback (members found through -cluster-peers) and returns
// their gRPC addresses once each of them counts n members.
func startActorlimitdCluster(tb testing.TB, cfg configDir, n int, extra ...string) []string {
	tb.Helper()
	bin := actorlimitdBinary(tb)
	memberPorts, peerPorts := make([]int, n), make([]int, n)
	var peers []string
	for i := range n {
		memberPorts[i], peerPorts[i] = freePort(tb), freePort(tb)
		peers = append(peers, addr(peerPorts[i]))
	}
	name := "diff" + strconv.Itoa(freePort(tb))
	var grpcAddrs, debugAddrs []string
	for i := range n {
		grpcPort, httpPort, debugPort := freePort(tb), freePort(tb), freePort(tb)
		args := append([]string{"-config", cfg.Files, "-grpc-addr", addr(grpcPort), "-http-addr", addr(httpPort), "-debug-addr", addr(debugPort), "-secret-descriptor-keys", "",
			"-cluster-mode", "owner", "-cluster-name", name, "-cluster-port", strconv.Itoa(memberPorts[i]),
			"-cluster-peers", strings.Join(peers, ","), "-cluster-peer-port", strconv.Itoa(peerPorts[i])}, extra...)
		start(tb, fmt.Sprintf("actorlimitd member %d", i), bin, args, nil, httpOK("http://"+addr(httpPort)+"/healthcheck"))
		grpcAddrs, debugAddrs = append(grpcAddrs, addr(grpcPort)), append(debugAddrs, addr(debugPort))
	}
	// Ownership moves while the members find each other: the stream starts
	// once every member counts all of them (bounded as a start is).
	c := &http.Client{Timeout: time.Second}
	for i, h := range debugAddrs {
		deadline := time.Now().Add(60 * time.Second)
		for promtext.Value(c, h, "actorlimitd_cluster_members") != float64(n) {
			if time.Now().After(deadline) {
				tb.Fatalf("actorlimitd member %d does not count %d members within 60 s", i, n)
			}
			time.Sleep(50 * time.Millisecond) // polling a process
		}
	}
	return grpcAddrs
}

// rlsClients returns a client of each of addrs.
func rlsClients(tb testing.TB, addrs []string) []rlspb.RateLimitServiceClient {
	var out []rlspb.RateLimitServiceClient
	for _, a := range addrs {
		out = append(out, rlsClient(tb, a))
	}
	return out
}

// dealt is a RateLimitServiceClient that deals the requests round its
// clients, one each in turn.
type dealt struct {
	clients []rlspb.RateLimitServiceClient
	next    atomic.Uint64
}

func roundRobin(clients []rlspb.RateLimitServiceClient) rlspb.RateLimitServiceClient {
	return &dealt{clients: clients}
}

func (d *dealt) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest, opts ...grpc.CallOption) (*rlspb.RateLimitResponse, error) {
	i := d.next.Add(1) - 1
	return d.clients[i%uint64(len(d.clients))].ShouldRateLimit(ctx, req, opts...)
}
