package rls

import (
	"errors"
	"testing"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestComparer checks that the differential test's comparison finds each
// kind of difference, allows the seconds between two answers, and leaves
// out a counter whose window started on the way until that window ends.
func TestComparer(t *testing.T) {
	hour := &rlspb.RateLimitResponse_RateLimit{Name: "n", RequestsPerUnit: 3, Unit: rlspb.RateLimitResponse_RateLimit_HOUR}
	sec := &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: 3, Unit: rlspb.RateLimitResponse_RateLimit_SECOND}
	status := func(code rlspb.RateLimitResponse_Code, l *rlspb.RateLimitResponse_RateLimit, rem uint32, reset int64) *rlspb.RateLimitResponse_DescriptorStatus {
		s := &rlspb.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: l, LimitRemaining: rem}
		if reset > 0 {
			s.DurationUntilReset = durationpb.New(time.Duration(reset) * time.Second)
		}
		return s
	}
	resp := func(code rlspb.RateLimitResponse_Code, st ...*rlspb.RateLimitResponse_DescriptorStatus) *rlspb.RateLimitResponse {
		return &rlspb.RateLimitResponse{OverallCode: code, Statuses: st}
	}
	req := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitpb.RateLimitDescriptor{{
		Entries: []*ratelimitpb.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}}
	ok, over := rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OVER_LIMIT
	base := resp(ok, status(ok, hour, 2, 100))
	withName := func(name string) *rlspb.RateLimitResponse {
		r := proto.Clone(base).(*rlspb.RateLimitResponse)
		r.Statuses[0].CurrentLimit.Name = name
		return r
	}
	withHeader := proto.Clone(base).(*rlspb.RateLimitResponse)
	withHeader.ResponseHeadersToAdd = []*corepb.HeaderValue{{Key: "RateLimit-Remaining", Value: "2"}}
	withReset := func(v string) *rlspb.RateLimitResponse {
		r := proto.Clone(base).(*rlspb.RateLimitResponse)
		r.ResponseHeadersToAdd = []*corepb.HeaderValue{{Key: "RateLimit-Reset", Value: v}}
		return r
	}
	nanos := proto.Clone(base).(*rlspb.RateLimitResponse)
	nanos.Statuses[0].DurationUntilReset.Nanos = 5

	same := timing{From: 10, To: 10}
	for _, tc := range []struct {
		name     string
		t        timing
		ref, got *rlspb.RateLimitResponse
		gotErr   error
		diffs    int
	}{
		{"equal", same, base, base, nil, 0},
		{"overall code", same, base, resp(over, status(ok, hour, 2, 100)), nil, 1},
		{"code", same, base, resp(ok, status(over, hour, 2, 100)), nil, 1},
		{"limit name", same, base, withName("m"), nil, 1},
		{"no limit", same, base, resp(ok, status(ok, nil, 2, 100)), nil, 1},
		{"remaining", same, base, resp(ok, status(ok, hour, 1, 100)), nil, 1},
		{"duration a second late in one second", same, base, resp(ok, status(ok, hour, 2, 99)), nil, 1},
		{"duration a second late across one", timing{From: 10, To: 11}, base, resp(ok, status(ok, hour, 2, 99)), nil, 0},
		{"duration early", timing{From: 10, To: 11}, base, resp(ok, status(ok, hour, 2, 101)), nil, 1},
		{"duration missing", same, base, resp(ok, status(ok, hour, 2, 0)), nil, 1},
		{"duration nanos", same, base, nanos, nil, 1},
		{"headers", same, base, withHeader, nil, 1},
		{"reset header a second late across one", timing{From: 10, To: 11}, withReset("100"), withReset("99"), nil, 0},
		{"reset header a second late in one", same, withReset("100"), withReset("99"), nil, 1},
		{"statuses", same, base, resp(ok), nil, 1},
		{"error", same, base, nil, errors.New("boom"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := newComparer().compare(req, tc.t, tc.ref, tc.got, nil, tc.gotErr)
			assert.Len(t, got, tc.diffs, "%v", got)
		})
	}

	t.Run("window started on the way", func(t *testing.T) {
		c := newComparer()
		ref := resp(ok, status(ok, sec, 2, 1))
		bad := resp(over, status(over, sec, 0, 1))
		assert.Empty(t, c.compare(req, timing{From: 10, To: 11}, ref, bad, nil, nil), "crossed: left out")
		assert.Empty(t, c.compare(req, timing{From: 11, To: 11}, ref, bad, nil, nil), "tainted until 12")
		assert.Len(t, c.compare(req, timing{From: 12, To: 12}, ref, bad, nil, nil), 3, "a new window: compared")
		assert.Equal(t, 2, c.Skipped)
		assert.Len(t, c.compare(req, timing{From: 10, To: 11}, base, withName("m"), nil, nil), 1,
			"an hour's window did not start: compared")
	})
}
