package service_test

import (
	"context"
	"fmt"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/testkit"
	"github.com/actorlimit/actorlimit/service"
)

// A configuration in envoy ratelimit's format, decided on the embedded
// table: two requests a minute per user.
func Example() {
	cfg, err := service.Parse(map[string][]byte{"users.yaml": []byte(`
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 2
`)})
	if err != nil {
		panic(err)
	}
	clock := testkit.NewClock(time.Unix(1_800_000_020, 0)) // 20 s into a minute
	lim, err := actorlimit.Start(actorlimit.WithClock(clock))
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	srv, err := service.New(cfg, service.Options{Limiter: lim, Clock: clock})
	if err != nil {
		panic(err)
	}
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "alice"}}},
	}}
	for range 3 {
		resp, err := srv.ShouldRateLimit(context.Background(), req)
		if err != nil {
			panic(err)
		}
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.LimitRemaining, st.DurationUntilReset.AsDuration())
	}
	// Output:
	// OK 1 40s
	// OK 0 40s
	// OVER_LIMIT 0 40s
}
