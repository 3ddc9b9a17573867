package main

import (
	"context"
	"fmt"
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

// TestSIGTERMUnderLoad: under load from 16 gRPC clients, SIGTERM turns the
// gRPC health service and /healthcheck to not serving while requests are
// still answered for -drain-delay: requests sent after the process was seen
// draining are answered OK, none is refused before the drain has passed,
// no request fails with anything but Unavailable (the server gone), and the
// process exits 0 within drain + grace.
//
// Every bound here is the drain's own: the health answers are read while the
// process must still serve (a failed call is a failure, not a retry), and an
// Unavailable is a failure when it came sooner than drain after the signal.
func TestSIGTERMUnderLoad(t *testing.T) { forTransports(t, testSIGTERMUnderLoad) }

func testSIGTERMUnderLoad(t *testing.T, transport string) {
	const drain, grace = 1 * time.Second, 5 * time.Second
	d := startWithConfig(t, serveConfig, "-drain-delay", drain.String(), "-shutdown-grace", grace.String(), "-grpc-transport", transport)
	client := d.client()
	var (
		stop        atomic.Bool
		mu          sync.Mutex
		signalled   time.Time // when the signal was sent
		draining    time.Time // when the test saw /healthcheck at 503
		okBefore    int       // answered OK, sent before draining was seen
		okDraining  int       // answered OK, sent after draining was seen
		unavailable int       // refused after the drain
		early       []string  // refused sooner than drain after the signal
		otherErrs   []error
		wg          sync.WaitGroup
	)
	for i := range 16 {
		wg.Go(func() {
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				sentAt := time.Now()
				_, err := client.ShouldRateLimit(ctx, request("web", desc("user", string(rune('a'+i)))))
				answeredAt := time.Now()
				cancel()
				mu.Lock()
				switch {
				case err == nil && !draining.IsZero() && sentAt.After(draining):
					okDraining++
				case err == nil:
					okBefore++
				case status.Code(err) == codes.Unavailable && !signalled.IsZero() && answeredAt.Sub(signalled) >= drain:
					unavailable++
				case status.Code(err) == codes.Unavailable && !signalled.IsZero():
					early = append(early, fmt.Sprintf("%v after the signal: %v", answeredAt.Sub(signalled), err))
				default:
					otherErrs = append(otherErrs, err)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // the server is gone; do not spin
				}
			}
		})
	}
	eventually(t, 10*time.Second, "load running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return okBefore > 100
	})
	mu.Lock()
	signalled = time.Now()
	mu.Unlock()
	d.signal(syscall.SIGTERM)

	// Until the drain has passed the process must answer both: a call that
	// fails here is a server that stopped before its drain.
	health := healthpb.NewHealthClient(d.conn)
	hc := &http.Client{Timeout: drain + grace}
	for {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "the gRPC health service while draining")
		if resp.Status == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.Status)
		time.Sleep(5 * time.Millisecond) // polling a process for the signal's effect
	}
	r, err := hc.Get("http://" + d.http + "/healthcheck")
	require.NoError(t, err, "/healthcheck while draining")
	r.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, r.StatusCode, "/healthcheck once gRPC health says not serving")
	mu.Lock()
	draining = time.Now()
	mu.Unlock()

	code := d.wait(drain + grace + 5*time.Second)
	took := time.Since(signalled)
	stop.Store(true)
	wg.Wait()
	require.Equal(t, 0, code, "exit code")
	assert.Empty(t, otherErrs)
	assert.Empty(t, early, "refused before the drain had passed")
	assert.Positive(t, okDraining, "requests sent while draining and answered")
	t.Logf("exit 0 %v after SIGTERM; answered %d before the drain was seen, %d sent during it; %d unavailable once it had stopped",
		took, okBefore, okDraining, unavailable)
}
