package unary_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/actorlimit/actorlimit/service/unary"
)

// TestConcurrentCallers: many callers on one connection and on several,
// some cancelling and some past their deadlines, each answer its own.
func TestConcurrentCallers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		conns, caller int
	}{
		{"conns=1", 1, 64},
		{"conns=8", 8, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			s := serve(t, unary.Config{})
			var wg sync.WaitGroup
			var ccs []*grpc.ClientConn
			for c := range tc.conns {
				cc := dial(t, s.addr, nil)
				ccs = append(ccs, cc)
				client := rlsv3.NewRateLimitServiceClient(cc)
				for k := range tc.caller {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range 50 {
							v := fmt.Sprintf("%d-%d-%d", c, k, i)
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
							switch i % 10 {
							case 3: // cancelled mid-call
								ctx2, cancel2 := context.WithCancel(ctx)
								go cancel2()
								_, err := client.ShouldRateLimit(ctx2, request("sleep", v))
								assert.Equal(t, codes.Canceled, status.Code(err))
							case 7: // past its deadline
								ctx2, cancel2 := context.WithTimeout(ctx, time.Millisecond)
								_, err := client.ShouldRateLimit(ctx2, request("sleep", v))
								cancel2()
								assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
							default:
								resp, err := client.ShouldRateLimit(ctx, request("d", v))
								if assert.NoError(t, err) && assert.Len(t, resp.GetResponseHeadersToAdd(), 1) {
									assert.Equal(t, v, resp.GetResponseHeadersToAdd()[0].GetValue())
								}
							}
							cancel()
						}
					}()
				}
			}
			wg.Wait()
			// Every handler ended: those of calls reset by their clients
			// too, their contexts cancelled.
			s.stop(t, base, ccs...)
		})
	}
}

// TestStatuses: a handler's status reaches the caller as grpc-go's server
// sends it (its message percent-encoded on the wire, invalid UTF-8
// included); the health service's Check is served.
func TestStatuses(t *testing.T) {
	s := serve(t, unary.Config{})
	direct := rlsv3.NewRateLimitServiceClient(dial(t, s.addr, nil))
	stock := rlsv3.NewRateLimitServiceClient(dial(t, s.grpc, nil))
	for _, tc := range []struct{ domain, v string }{
		{"fail", "plain"}, {"fail", "100% sure"}, {"fail", "non-ascii: é, 日本"}, {"fail", "ctl\x01\n"}, {"fail", ""},
		{"failbad", "x"}, {"plainerr", "y"}, {"d", "ok"},
	} {
		want, werr := stock.ShouldRateLimit(context.Background(), request(tc.domain, tc.v))
		got, gerr := direct.ShouldRateLimit(context.Background(), request(tc.domain, tc.v))
		assert.Equal(t, status.Convert(werr).Proto().String(), status.Convert(gerr).Proto().String(), tc)
		assert.Equal(t, want.String(), got.String(), tc)
	}
	cc := dial(t, s.addr, nil)
	s.health.SetServingStatus("x", healthpb.HealthCheckResponse_NOT_SERVING)
	hc := healthpb.NewHealthClient(cc)
	resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "x"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, resp.GetStatus())
	_, err = hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "nope"})
	assert.Equal(t, codes.NotFound, status.Code(err))
}
