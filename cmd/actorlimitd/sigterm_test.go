package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestSIGTERMUnderLoad: under load from 16 gRPC clients, SIGTERM turns
// /healthcheck and the gRPC health service to not serving while requests
// are still answered for -drain-delay, requests in flight finish, no
// request fails with anything but Unavailable (the server gone), and the
// process exits 0 within drain + grace.
func TestSIGTERMUnderLoad(t *testing.T) {
	const drain, grace = 500 * time.Millisecond, 5 * time.Second
	d := startWithConfig(t, serveConfig, "-drain-delay", drain.String(), "-shutdown-grace", grace.String())
	client := d.client()
	var (
		stop              atomic.Bool
		signalled         atomic.Bool
		okBefore, okAfter atomic.Int64
		unavailable       atomic.Int64
		mu                sync.Mutex
		otherErrs         []error
		wg                sync.WaitGroup
	)
	for i := range 16 {
		wg.Go(func() {
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := client.ShouldRateLimit(ctx, request("web", desc("user", string(rune('a'+i)))))
				cancel()
				switch {
				case err == nil && signalled.Load():
					okAfter.Add(1)
				case err == nil:
					okBefore.Add(1)
				case status.Code(err) == codes.Unavailable && signalled.Load():
					unavailable.Add(1)
					time.Sleep(10 * time.Millisecond) // the server is gone; do not spin
				default:
					mu.Lock()
					otherErrs = append(otherErrs, err)
					mu.Unlock()
				}
			}
		})
	}
	eventually(t, 10*time.Second, "load running", func() bool { return okBefore.Load() > 100 })
	signalled.Store(true)
	sent := time.Now()
	d.signal(syscall.SIGTERM)
	eventually(t, drain, "/healthcheck 503", func() bool {
		resp, err := http.Get("http://" + d.http + "/healthcheck")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	hc, err := healthpb.NewHealthClient(d.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err == nil {
		assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, hc.Status)
	}
	code := d.wait(drain + grace + 5*time.Second)
	took := time.Since(sent)
	stop.Store(true)
	wg.Wait()
	require.Equal(t, 0, code, "exit code")
	assert.Empty(t, otherErrs)
	assert.Positive(t, okAfter.Load(), "requests answered while draining")
	t.Logf("exit 0 %v after SIGTERM; answered %d before, %d after it; %d unavailable once it had stopped", took, okBefore.Load(), okAfter.Load(), unavailable.Load())
}
