package unary_test

import (
	"context"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/actorlimit/actorlimit/service/unary"
)

// TestHandOff: a connection whose first call is a stream (health Watch)
// is grpc-go's, which then serves every call on it, the RateLimitService's
// too; a connection whose first call is served here answers a Watch
// UNIMPLEMENTED, saying why.
func TestHandOff(t *testing.T) {
	s := serve(t, unary.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	handed := dial(t, s.addr, nil)
	w, err := healthpb.NewHealthClient(handed).Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	first, err := w.Recv()
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, first.GetStatus())
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	next, err := w.Recv()
	require.NoError(t, err, "the stream goes on")
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, next.GetStatus())
	resp, err := rlsv3.NewRateLimitServiceClient(handed).ShouldRateLimit(ctx, request("d", "on grpc-go"))
	require.NoError(t, err)
	assert.Equal(t, "on grpc-go", resp.GetResponseHeadersToAdd()[0].GetValue())

	direct := dial(t, s.addr, nil)
	resp, err = rlsv3.NewRateLimitServiceClient(direct).ShouldRateLimit(ctx, request("d", "direct"))
	require.NoError(t, err)
	assert.Equal(t, "direct", resp.GetResponseHeadersToAdd()[0].GetValue())
	w2, err := healthpb.NewHealthClient(direct).Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = w2.Recv()
	assert.Equal(t, codes.Unimplemented, status.Code(err))
	assert.ErrorContains(t, err, "unknown method Watch for service grpc.health.v1.Health")
}

// TestShutdownDrains: Shutdown with calls in flight sends GOAWAY, lets
// them be answered, refuses none of them, and returns once they are; a
// Shutdown whose context ends first closes the connections.
func TestShutdownDrains(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release bool // the calls end before the context
	}{
		{"calls answered", true},
		{"context ends first", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, unary.Config{})
			cc := dial(t, s.addr, nil)
			client := rlsv3.NewRateLimitServiceClient(cc)
			_, err := client.ShouldRateLimit(t.Context(), request("d", "warm"))
			require.NoError(t, err)
			// "sleep" calls end with their context: give them a deadline
			// past the Shutdown, so that they are in flight through it.
			const calls = 8
			var wg sync.WaitGroup
			codesSeen := make(chan codes.Code, calls)
			for range calls {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
					defer cancel()
					_, err := client.ShouldRateLimit(ctx, request("sleep", "v"))
					codesSeen <- status.Code(err)
				})
			}
			time.Sleep(50 * time.Millisecond) // the calls reach the server
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			if !tc.release {
				ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
			}
			defer cancel()
			start := time.Now()
			err = s.srv.Shutdown(ctx)
			wg.Wait()
			close(codesSeen)
			if tc.release {
				assert.NoError(t, err)
				assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "waited for the calls")
				for c := range codesSeen {
					assert.Equal(t, codes.DeadlineExceeded, c, "ended by their own deadline, not refused")
				}
			} else {
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				for c := range codesSeen {
					assert.Contains(t, []codes.Code{codes.Unavailable, codes.DeadlineExceeded}, c)
				}
			}
		})
	}
}
