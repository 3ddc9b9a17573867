package rls

import (
	"context"
	"testing"
	"time"

	ratelimitpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// casesConfig is TestDifferentialCases' configuration: 3 a day per user.
const casesConfig = `domain: cases
descriptors:
  - key: user
    rate_limit:
      unit: day
      requests_per_unit: 3
`

// TestDifferentialCases sends envoy ratelimit and actorlimitd (embedded and
// on Redis) short request sequences, each on a counter of its own, that the
// random streams of TestDifferential found them to answer differently, and
// compares the answers as TestDifferential does. envoy ratelimit sends a
// request's descriptors to Redis as one pipeline of INCRBY in their order,
// so a descriptor checked with hits_addend 0 sees the hits of the
// descriptors before it on the same counter, and not those after it.
func TestDifferentialCases(t *testing.T) {
	if !hasActorlimitd() {
		t.Skip("no candidate: this tree has no cmd/actorlimitd yet")
	}
	cfg := writeConfig(t, map[string]string{"cases.yaml": casesConfig})
	ref := rlsClient(t, startEnvoy(t, cfg, startRedis(t).Addr, envoyOptions{}))
	cands := map[string]rlspb.RateLimitServiceClient{
		"actorlimitd (embedded)": rlsClient(t, startActorlimitd(t, cfg, "")),
		"actorlimitd (-redis)":   rlsClient(t, startActorlimitd(t, cfg, startRedis(t).Addr)),
	}
	// d is a descriptor's hits_addend; hits < 0 leaves it out. Every
	// descriptor of a case is on the case's counter.
	d := func(hits int) *wrapperspb.UInt64Value {
		if hits < 0 {
			return nil
		}
		return wrapperspb.UInt64(uint64(hits))
	}
	for _, tc := range []struct {
		name string
		reqs [][]*wrapperspb.UInt64Value // each request's descriptors' hits_addend
	}{
		{"hit then check in one request", [][]*wrapperspb.UInt64Value{{d(-1), d(0)}}},
		{"check then hit in one request", [][]*wrapperspb.UInt64Value{{d(0), d(-1)}}},
		{"two hits in one request", [][]*wrapperspb.UInt64Value{{d(2), d(-1)}}},
		{"over the limit, then checked in one request", [][]*wrapperspb.UInt64Value{{d(3), d(1), d(0)}}},
		{"check between hits", [][]*wrapperspb.UInt64Value{{d(1)}, {d(1), d(0), d(1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := tc.name + time.Now().Format(time.RFC3339Nano) // a counter of its own
			for name, c := range cands {
				cmp := newComparer()
				for i, descs := range tc.reqs {
					req := &rlspb.RateLimitRequest{Domain: "cases"}
					for _, h := range descs {
						req.Descriptors = append(req.Descriptors, &ratelimitpb.RateLimitDescriptor{
							Entries:    []*ratelimitpb.RateLimitDescriptor_Entry{{Key: "user", Value: user + name}},
							HitsAddend: h})
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					from := time.Now().Unix()
					rr, rerr := ref.ShouldRateLimit(ctx, req)
					gr, gerr := c.ShouldRateLimit(ctx, req)
					tm := timing{From: from, To: time.Now().Unix()}
					cancel()
					if rerr != nil {
						t.Fatalf("envoy ratelimit: %v", rerr)
					}
					for _, diff := range cmp.compare(req, tm, rr, gr, rerr, gerr) {
						t.Errorf("%s, request %d: %s\n  request: %s\n  envoy ratelimit: %s\n  %s: %s",
							name, i, diff, text(req), text(rr), name, respText(gr, gerr))
					}
				}
			}
		})
	}
}
