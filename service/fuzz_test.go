package service_test

import (
	"errors"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/service"
)

// FuzzParse: any bytes either load, with every rule's policy valid and a
// match that never panics, or are refused with a *ConfigError that names
// the file (and a line within the file when it has one).
func FuzzParse(f *testing.F) {
	f.Add([]byte(matching))
	f.Add([]byte(decisions))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    value: b*\n    share_threshold: true\n    rate_limit: {algorithm: gcra, period: 15s, requests_per_unit: 3, burst: 2}\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := service.Parse(map[string][]byte{"f.yaml": data})
		if err != nil {
			var ce *service.ConfigError
			require.True(t, errors.As(err, &ce), "%T %v", err, err)
			require.Equal(t, "f.yaml", ce.File)
			require.GreaterOrEqual(t, ce.Line, 0)
			return
		}
		for _, d := range c.Domains() {
			for _, ds := range []*ratelimitv3.RateLimitDescriptor{desc("a", "b"), desc("a", "bc", "x", "y"), desc("", "")} {
				m := c.Match(d, ds)
				if m.Rule != nil && !m.Rule.Unlimited {
					require.NoError(t, m.Rule.Policy.Validate())
				}
				_ = m.ID(d, ds)
			}
		}
	})
}
