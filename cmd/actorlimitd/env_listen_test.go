package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// TestEnvGRPCListener: GRPC_UDS puts gRPC on a unix socket, and
// GRPC_MAX_CONNECTION_AGE sends a connection away once it is that old.
func TestEnvGRPCListener(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "rt", "config"), 0o755))
	writeFile(t, filepath.Join(dir, "rt", "config", "c.yaml"), "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 5}\n")
	sock := filepath.Join(dir, "rl.sock")
	ports := freePorts(t, 2)
	d, err := spawnEnv(t, []string{"RUNTIME_ROOT=" + dir, "RUNTIME_SUBDIRECTORY=rt", "USE_STATSD=false",
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]), "DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[1]),
		"GRPC_UDS=" + sock, "GRPC_MAX_CONNECTION_AGE=300ms", "GRPC_MAX_CONNECTION_AGE_GRACE=1s"})
	require.NoError(t, err)
	assert.Equal(t, sock, d.grpc)

	conn, err := grpc.NewClient("unix:"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(t.Context(), request("web", desc("user", "u")))
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.OverallCode)

	// The server's GOAWAY at the connection's age takes the client's
	// connection out of READY.
	require.Equal(t, connectivity.Ready, conn.GetState())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	assert.True(t, conn.WaitForStateChange(ctx, connectivity.Ready), "the connection is sent away within 10 s of its 300 ms age")
}
