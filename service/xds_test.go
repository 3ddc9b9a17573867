package service_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit/service"
)

func xdsAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	require.NoError(t, err)
	return a
}

func TestXDSTypeURL(t *testing.T) {
	assert.Equal(t, service.XDSTypeURL, xdsAny(t, &rlconfv3.RateLimitConfig{}).GetTypeUrl())
}

func TestParseXDS(t *testing.T) {
	policy := func(u rlconfv3.RateLimitUnit, n uint32) *rlconfv3.RateLimitPolicy {
		return &rlconfv3.RateLimitPolicy{Unit: u, RequestsPerUnit: n}
	}
	edge := &rlconfv3.RateLimitConfig{Name: "edge", Domain: "edge", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "remote_address", RateLimit: policy(rlconfv3.RateLimitUnit_SECOND, 10)},
		{Key: "path", Value: "/api: \"v1\"*", RateLimit: policy(rlconfv3.RateLimitUnit_WEEK, 0), ShadowMode: true},
		{Key: "tenant", Descriptors: []*rlconfv3.RateLimitDescriptor{
			{Key: "plan", Value: "gold", RateLimit: &rlconfv3.RateLimitPolicy{Unlimited: true}},
			{Key: "plan", Value: "free", DetailedMetric: true, RateLimit: &rlconfv3.RateLimitPolicy{
				Name: "free", Unit: rlconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 5,
				Replaces: []*rlconfv3.RateLimitReplace{{Name: "other"}}}},
		}},
	}}
	other := &rlconfv3.RateLimitConfig{Name: "other", Domain: "mail", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "to", RateLimit: policy(rlconfv3.RateLimitUnit_YEAR, 3)}}}
	noUnit := &rlconfv3.RateLimitConfig{Name: "nounit", Domain: "d", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "k", RateLimit: policy(rlconfv3.RateLimitUnit_UNKNOWN, 3)}}}
	unlimitedWithUnit := &rlconfv3.RateLimitConfig{Name: "u", Domain: "d", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "k", RateLimit: &rlconfv3.RateLimitPolicy{Unlimited: true, Unit: rlconfv3.RateLimitUnit_HOUR}}}}
	sameDomain := &rlconfv3.RateLimitConfig{Name: "edge2", Domain: "edge"}
	for _, tc := range []struct {
		name    string
		res     []*anypb.Any
		domains []string
		rules   int
		err     string // "": loads
	}{
		{name: "none", domains: []string{}},
		{name: "two domains", res: []*anypb.Any{xdsAny(t, edge), xdsAny(t, other)}, domains: []string{"edge", "mail"}, rules: 5},
		{name: "no unit", res: []*anypb.Any{xdsAny(t, noUnit)}, err: "invalid rate limit unit"},
		{name: "unlimited with a unit", res: []*anypb.Any{xdsAny(t, unlimitedWithUnit)}, err: "should not specify rate limit unit when unlimited"},
		{name: "a domain in two resources", res: []*anypb.Any{xdsAny(t, edge), xdsAny(t, sameDomain)}, err: `duplicate domain "edge"`},
		{name: "two resources of one name", res: []*anypb.Any{xdsAny(t, other), xdsAny(t, other)}, err: `two resources named "other"`},
		{name: "no domain", res: []*anypb.Any{xdsAny(t, &rlconfv3.RateLimitConfig{Name: "x"})}, err: "empty domain"},
		{name: "another type", res: []*anypb.Any{xdsAny(t, durationpb.New(time.Second))}, err: "google.protobuf.Duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := service.ParseXDS(tc.res)
			if tc.err != "" {
				require.Error(t, err)
				assert.True(t, errors.Is(err, service.ErrConfig), "%v wraps ErrConfig", err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.domains, c.Domains())
			assert.Equal(t, tc.rules, c.Rules())
		})
	}
}

// TestParseXDSMatches: the rules of a resource decide as a file's do.
func TestParseXDSMatches(t *testing.T) {
	res := &rlconfv3.RateLimitConfig{Name: "edge", Domain: "edge", Descriptors: []*rlconfv3.RateLimitDescriptor{
		{Key: "path", Value: "/api: \"v1\"*", RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_WEEK, RequestsPerUnit: 4}},
		{Key: "tenant", Descriptors: []*rlconfv3.RateLimitDescriptor{
			{Key: "plan", Value: "free", RateLimit: &rlconfv3.RateLimitPolicy{Name: "free", Unit: rlconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 5}},
		}},
	}}
	c, err := service.ParseXDS([]*anypb.Any{xdsAny(t, res)})
	require.NoError(t, err)
	assert.Contains(t, string(c.Source()), "# xds:edge")
	for _, tc := range []struct {
		entries []string
		limit   uint32
	}{
		{[]string{"path", `/api: "v1"/users`}, 4},
		{[]string{"tenant", "a", "plan", "free"}, 5},
		{[]string{"tenant", "a", "plan", "gold"}, 0},
	} {
		m := c.Match("edge", desc(tc.entries...))
		if tc.limit == 0 {
			assert.Nil(t, m.Rule, "%v", tc.entries)
			continue
		}
		require.NotNil(t, m.Rule, "%v", tc.entries)
		assert.Equal(t, tc.limit, m.Rule.RequestsPerUnit, "%v", tc.entries)
	}
}

func TestParseKeyValues(t *testing.T) {
	for _, tc := range []struct {
		in, seps string
		want     map[string]string
		err      string
	}{
		{in: "", seps: "=:", want: map[string]string{}},
		{in: "k1:v1,k2=v2", seps: "=:", want: map[string]string{"k1": "v1", "k2": "v2"}},
		{in: "url=http://x:1, ,zone = a", seps: "=:", want: map[string]string{"url": "http://x:1", "zone": "a"}},
		{in: "x-token:a=b", seps: ":", want: map[string]string{"x-token": "a=b"}},
		{in: "k1:v1,oops", seps: ":", err: `"oops" is not key:value`},
		{in: ":v", seps: ":", err: `":v" is not key:value`},
	} {
		got, err := service.ParseKeyValues(tc.in, tc.seps)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestXDSBackoff(t *testing.T) {
	b := service.XDSBackoff{Initial: time.Second, Max: 5 * time.Second, RandomFactor: 0.5}
	jittered := b
	jittered.Jitter = true
	for _, tc := range []struct {
		b    service.XDSBackoff
		n    int
		rnd  float64
		want time.Duration
	}{
		{b, 0, 0, time.Second},
		{b, 1, 0, 2 * time.Second},
		{b, 2, 0.9, 4 * time.Second},
		{b, 3, 0, 5 * time.Second},
		{b, 1000, 0, 5 * time.Second},
		{jittered, 0, 0, 500 * time.Millisecond},
		{jittered, 0, 0.5, time.Second},
		{jittered, 0, 1, 1500 * time.Millisecond},
		{jittered, 3, 1, 7500 * time.Millisecond},
	} {
		assert.Equal(t, tc.want, tc.b.Delay(tc.n, func() float64 { return tc.rnd }), "%+v attempt %d rnd %v", tc.b, tc.n, tc.rnd)
	}
}

// TestXDSDocExample: the resource docs/service.md shows is one a server can
// publish, and it loads.
func TestXDSDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/service.md")
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(doc), "## Configuration over xDS\n")
	require.True(t, ok, "the section is there")
	_, block, ok := strings.Cut(sec, "```json\n")
	require.True(t, ok, "the section shows a resource")
	block, _, _ = strings.Cut(block, "```")
	var a anypb.Any
	require.NoError(t, protojson.Unmarshal([]byte(block), &a))
	c, err := service.ParseXDS([]*anypb.Any{&a})
	require.NoError(t, err)
	assert.Equal(t, []string{"edge"}, c.Domains())
	assert.Equal(t, 4, c.Rules())
	m := c.Match("edge", desc("path", "/login"))
	require.NotNil(t, m.Rule)
	assert.Equal(t, "login", m.Rule.Name)
	assert.Equal(t, uint32(5), m.Rule.RequestsPerUnit)
}
