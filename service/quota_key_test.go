package service_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/service"
)

// TestParseLeavesQuotaSection: a file's rate_limit_quota section is the
// quota service's; the rate limit service's rules are read as without it.
func TestParseLeavesQuotaSection(t *testing.T) {
	c, err := service.Parse(map[string][]byte{"edge.yaml": []byte(`domain: edge
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5}
rate_limit_quota:
  buckets:
    - match: {name: checkout}
      rate_limit: {unit: minute, requests_per_unit: 1000}
`)})
	require.NoError(t, err)
	assert.Equal(t, 1, c.Rules())
	assert.Equal(t, []string{"edge"}, c.Domains())
}
