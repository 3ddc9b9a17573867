package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// xdsNode is the node id the tests' actorlimitd gives its xDS server.
const xdsNode = "rls-test"

// xdsServer is a real xDS server, go-control-plane's, on a loopback port,
// publishing RateLimitConfig snapshots; it records what the client
// answers.
type xdsServer struct {
	t     *testing.T
	addr  string
	cache cachev3.SnapshotCache
	gs    *grpc.Server

	mu      sync.Mutex
	reqs    []*discoveryv3.DiscoveryRequest
	headers []metadata.MD // each stream's
}

// startXDSServer starts an xDS server on addr ("127.0.0.1:0": any free
// port), with a new, empty snapshot cache.
func startXDSServer(t *testing.T, addr string, opts ...grpc.ServerOption) *xdsServer {
	t.Helper()
	x := &xdsServer{t: t, cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)}
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	x.addr = l.Addr().String()
	cb := serverv3.CallbackFuncs{StreamOpenFunc: func(ctx context.Context, _ int64, _ string) error {
		md, _ := metadata.FromIncomingContext(ctx)
		x.mu.Lock()
		x.headers = append(x.headers, md)
		x.mu.Unlock()
		return nil
	}, StreamRequestFunc: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
		x.mu.Lock()
		x.reqs = append(x.reqs, req)
		x.mu.Unlock()
		return nil
	}}
	x.gs = grpc.NewServer(opts...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(x.gs, serverv3.NewServer(context.Background(), x.cache, cb))
	go func() { _ = x.gs.Serve(l) }()
	t.Cleanup(x.gs.Stop)
	return x
}

// publish makes cfgs the node's configuration, as version.
func (x *xdsServer) publish(version string, cfgs ...*rlconfv3.RateLimitConfig) {
	x.t.Helper()
	rs := make([]types.Resource, len(cfgs))
	for i, c := range cfgs {
		rs[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: rs})
	require.NoError(x.t, err)
	require.NoError(x.t, x.cache.SetSnapshot(context.Background(), xdsNode, snap))
}

// answered returns the first request from the client that answers a
// response (has a nonce) and matches f, if any yet.
func (x *xdsServer) answered(f func(*discoveryv3.DiscoveryRequest) bool) *discoveryv3.DiscoveryRequest {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.reqs {
		if r.GetResponseNonce() != "" && f(r) {
			return r
		}
	}
	return nil
}

// acked reports whether the client accepted version.
func (x *xdsServer) acked(version string) bool {
	return x.answered(func(r *discoveryv3.DiscoveryRequest) bool {
		return r.GetErrorDetail() == nil && r.GetVersionInfo() == version
	}) != nil
}

// requested reports whether a client has asked for RateLimitConfigs.
func (x *xdsServer) requested() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range x.reqs {
		if r.GetTypeUrl() == resource.RateLimitConfigType && r.GetNode().GetId() == xdsNode {
			return true
		}
	}
	return false
}

// xdsLimit is domain "r" whose rule for key k allows n a year, as an xDS
// resource.
func xdsLimit(n uint32) *rlconfv3.RateLimitConfig {
	return &rlconfv3.RateLimitConfig{Name: "r", Domain: "r", Descriptors: []*rlconfv3.RateLimitDescriptor{{
		Key: "k", RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_YEAR, RequestsPerUnit: n},
	}}}
}

// xdsArgs are the flags of an actorlimitd on the xDS server at addr, with
// short waits between attempts.
func xdsArgs(addr string, more ...string) []string {
	return append([]string{"-config-type", "GRPC_XDS_SOTW", "-xds-server", addr, "-xds-node-id", xdsNode,
		"-xds-retry-interval", "100ms", "-xds-backoff-initial", "50ms", "-xds-backoff-max", "200ms"}, more...)
}

func TestXDS(t *testing.T) {
	x := startXDSServer(t, "127.0.0.1:0")
	x.publish("1", xdsLimit(2))
	d := startDaemon(t, xdsArgs(x.addr)...)

	// The pushed configuration is in force: the third hit of two a year
	// is denied.
	var codes []rlsv3.RateLimitResponse_Code
	for range 3 {
		resp, err := d.ask(request("r", desc("k", "a")))
		require.NoError(t, err)
		codes = append(codes, resp.OverallCode)
	}
	require.Equal(t, []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}, codes)
	eventually(t, 5*time.Second, "version 1 acknowledged", func() bool { return x.acked("1") })
	status, body := d.get("/healthcheck")
	require.Equal(t, http.StatusOK, status, body)
	_, body = d.getDebug("/rlconfig")
	assert.Contains(t, body, "xds:r")

	// A changed configuration is in force within a second.
	x.publish("2", xdsLimit(20))
	took := eventually(t, time.Second, "version 2 in force", func() bool { return limitOf(d) == 20 })
	t.Logf("version 2 in force after %v", took)
	eventually(t, 5*time.Second, "version 2 acknowledged", func() bool { return x.acked("2") })

	// A configuration that does not load is refused: the client answers
	// with the version in force and the reason, and decides as before.
	bad := xdsLimit(5)
	bad.Descriptors[0].RateLimit.Unit = rlconfv3.RateLimitUnit_UNKNOWN
	x.publish("3", bad)
	var nack *discoveryv3.DiscoveryRequest
	eventually(t, 5*time.Second, "version 3 refused", func() bool {
		nack = x.answered(func(r *discoveryv3.DiscoveryRequest) bool { return r.GetErrorDetail() != nil })
		return nack != nil
	})
	assert.Equal(t, "2", nack.GetVersionInfo(), "a NACK names the version in force")
	assert.Contains(t, nack.GetErrorDetail().GetMessage(), "invalid rate limit unit")
	assert.False(t, x.acked("3"))
	assert.Equal(t, uint32(20), limitOf(d), "the configuration in force stays")

	// The server goes away: the configuration in force stays while the
	// client retries; a restarted server's configuration is taken.
	x.gs.Stop()
	eventually(t, 5*time.Second, "the client sees the stream end", func() bool {
		return strings.Contains(d.logs.String(), "xDS stream ended")
	})
	assert.Equal(t, uint32(20), limitOf(d), "the configuration in force stays while the server is away")
	status, _ = d.get("/healthcheck")
	assert.Equal(t, http.StatusOK, status)
	y := startXDSServer(t, x.addr)
	y.publish("4", xdsLimit(30))
	eventually(t, 10*time.Second, "version 4 from the restarted server in force", func() bool { return limitOf(d) == 30 })
	eventually(t, 5*time.Second, "version 4 acknowledged", func() bool { return y.acked("4") })
}

func TestXDSFirstConfig(t *testing.T) {
	t.Run("waits for it", func(t *testing.T) {
		x := startXDSServer(t, "127.0.0.1:0")
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		httpAddr := l.Addr().String()
		require.NoError(t, l.Close())
		listening := make(chan bool, 1)
		go func() {
			// Once the client asks, actorlimitd must not serve yet; then
			// the first configuration comes.
			for !x.requested() {
				time.Sleep(20 * time.Millisecond) // polling a process
			}
			c, err := net.DialTimeout("tcp", httpAddr, time.Second)
			if err == nil {
				c.Close()
			}
			listening <- err == nil
			x.publish("1", xdsLimit(7))
		}()
		d := startDaemon(t, xdsArgs(x.addr, "-http-addr", httpAddr)...)
		assert.False(t, <-listening, "actorlimitd listened before its first configuration")
		assert.Equal(t, uint32(7), limitOf(d), "it serves with the first configuration")
	})
	t.Run("forced start", func(t *testing.T) {
		x := startXDSServer(t, "127.0.0.1:0")
		d := startDaemon(t, xdsArgs(x.addr, "-force-start-without-initial-config")...)
		status, body := d.get("/healthcheck")
		require.Equal(t, http.StatusOK, status, body)
		resp, err := d.ask(request("r", desc("k", "a")))
		require.NoError(t, err)
		assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.OverallCode, "no domain before the first configuration")
		x.publish("1", xdsLimit(7))
		eventually(t, time.Second, "the first configuration in force", func() bool { return limitOf(d) == 7 })
	})
}

// TestXDSConnection: the client reaches a server that wants mutual TLS,
// checking the server's certificate against -xds-tls-san, and gives the
// server its headers and node metadata.
func TestXDSConnection(t *testing.T) {
	c := newCerts(t)
	srvCert, srvKey := c.issue(t, "xds-server", 2)
	cliCert, cliKey := c.issue(t, "actorlimitd", 3)
	pair, err := tls.LoadX509KeyPair(srvCert, srvKey)
	require.NoError(t, err)
	x := startXDSServer(t, "127.0.0.1:0", grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pair}, ClientCAs: c.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})))
	x.publish("1", xdsLimit(7))
	_, port, err := net.SplitHostPort(x.addr)
	require.NoError(t, err)
	// The certificate names 127.0.0.1 only: reached as localhost, it is
	// accepted through -xds-tls-san.
	d := startDaemon(t, xdsArgs("localhost:"+port, "-xds-tls", "-xds-tls-ca", c.caFile, "-xds-tls-san", "127.0.0.1",
		"-xds-tls-cert", cliCert, "-xds-tls-key", cliKey,
		"-xds-headers", "x-token:t1,x-team:rl", "-xds-node-metadata", "zone=a,rack:b")...)
	assert.Equal(t, uint32(7), limitOf(d))
	x.mu.Lock()
	defer x.mu.Unlock()
	require.NotEmpty(t, x.headers)
	assert.Equal(t, []string{"t1"}, x.headers[0].Get("x-token"))
	assert.Equal(t, []string{"rl"}, x.headers[0].Get("x-team"))
	require.NotEmpty(t, x.reqs)
	md := x.reqs[0].GetNode().GetMetadata().AsMap()
	assert.Equal(t, map[string]any{"zone": "a", "rack": "b"}, md)
}

// TestXDSMaxMsgBytes: a response past -xds-max-msg-bytes is not taken;
// one within it is.
func TestXDSMaxMsgBytes(t *testing.T) {
	x := startXDSServer(t, "127.0.0.1:0")
	big := xdsLimit(9)
	for i := range 100 {
		big.Descriptors = append(big.Descriptors, &rlconfv3.RateLimitDescriptor{Key: "k", Value: strings.Repeat("v", 20) + string(rune('a'+i%26)) + strings.Repeat("w", i),
			RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_YEAR, RequestsPerUnit: 1}})
	}
	x.publish("1", big)
	d := startDaemon(t, xdsArgs(x.addr, "-xds-max-msg-bytes", "2048", "-force-start-without-initial-config")...)
	eventually(t, 5*time.Second, "the large response refused", func() bool {
		return strings.Contains(d.logs.String(), "larger than max")
	})
	assert.Equal(t, uint32(0), limitOf(d), "the large configuration is not in force")
	x.publish("2", xdsLimit(7))
	eventually(t, 5*time.Second, "the small configuration in force", func() bool { return limitOf(d) == 7 })
}
