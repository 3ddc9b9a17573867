package quota_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/quota"
)

const edgeYAML = `domain: edge
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5}
rate_limit_quota:
  default_action: deny_all
  reporting_interval: 2s
  buckets:
    - name: checkout-any
      match: {name: checkout, tenant: "*"}
      rate_limit: {unit: minute, requests_per_unit: 1200}
    - name: checkout-acme
      match: {tenant: acme, name: checkout}
      rate_limit: {unit: second, requests_per_unit: 50}
      algorithm: fixed_window
      ttl: 10s
    - match: {name: "*", tenant: "*"}
      rate_limit: {unit: hour, requests_per_unit: 3600}
    - match: {name: search}
      rate_limit: {unit: second, requests_per_unit: 7}
      reserve: 0.2
`

// TestConfigMatch: a bucket id meets a rule with exactly its keys, values
// equal or "*"; the fewest "*" win, then file order; no rule: the default.
func TestConfigMatch(t *testing.T) {
	c, err := quota.Parse(map[string][]byte{"edge.yaml": []byte(edgeYAML), "other.yaml": []byte("domain: other\n")})
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		domain string
		id     map[string]string
		rule   string // "" for none
		action quota.Action
	}{
		{"exact beats wildcard", "edge", map[string]string{"name": "checkout", "tenant": "acme"}, "checkout-acme", 0},
		{"one wildcard", "edge", map[string]string{"name": "checkout", "tenant": "zeta"}, "checkout-any", 0},
		{"two wildcards", "edge", map[string]string{"name": "login", "tenant": "zeta"}, "name=*,tenant=*", 0},
		{"one key", "edge", map[string]string{"name": "search"}, "name=search", 0},
		{"extra key: no rule", "edge", map[string]string{"name": "search", "x": "y"}, "", quota.DenyAll},
		{"missing key: no rule", "edge", map[string]string{"tenant": "acme"}, "", quota.DenyAll},
		{"other value: no rule", "edge", map[string]string{"name": "login"}, "", quota.DenyAll},
		{"domain without section", "other", map[string]string{"name": "search"}, "", quota.Abandon},
		{"unknown domain", "nowhere", map[string]string{"name": "search"}, "", quota.Abandon},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, act := c.Match(tc.domain, tc.id)
			if tc.rule == "" {
				assert.Nil(t, r)
				assert.Equal(t, tc.action, act)
				return
			}
			require.NotNil(t, r)
			assert.Equal(t, tc.rule, r.Name)
		})
	}
	rules := c.Rules()
	require.Len(t, rules, 4)
	assert.InDelta(t, 20, rules[0].Rate(), 1e-9)
	assert.True(t, rules[0].TokenBucket())
	assert.Equal(t, 6*time.Second, rules[0].TTL, "three reporting intervals")
	assert.False(t, rules[1].TokenBucket(), "fixed_window: requests_per_time_unit")
	assert.Equal(t, 10*time.Second, rules[1].TTL)
	assert.InDelta(t, 0.2, rules[3].Reserve, 1e-9)
}

// TestConfigErrors: each bad section names its file, line and what is
// wrong.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"not a mapping", "domain: d\nrate_limit_quota: 3\n", "f.yaml:2:19: rate_limit_quota must be a mapping"},
		{"unknown field", "domain: d\nrate_limit_quota: {bukets: []}\n", `unknown field "bukets"`},
		{"bad default", "domain: d\nrate_limit_quota: {default_action: allow}\n", `default_action "allow"`},
		{"bad interval", "domain: d\nrate_limit_quota: {reporting_interval: 0s}\n", "reporting_interval"},
		{"no domain", "rate_limit_quota: {}\n", "needs the file's domain"},
		{"no match", "domain: d\nrate_limit_quota:\n  buckets:\n    - rate_limit: {unit: second, requests_per_unit: 1}\n", "needs match"},
		{"no limit", "domain: d\nrate_limit_quota:\n  buckets:\n    - match: {a: b}\n", "needs rate_limit"},
		{"bad unit", "domain: d\nrate_limit_quota:\n  buckets:\n    - {match: {a: b}, rate_limit: {unit: fortnight, requests_per_unit: 1}}\n", `unit "fortnight"`},
		{"zero limit", "domain: d\nrate_limit_quota:\n  buckets:\n    - {match: {a: b}, rate_limit: {unit: second, requests_per_unit: 0}}\n", "requests_per_unit \"0\""},
		{"bad algorithm", "domain: d\nrate_limit_quota:\n  buckets:\n    - {match: {a: b}, rate_limit: {unit: second, requests_per_unit: 1}, algorithm: magic}\n", `unknown algorithm "magic"`},
		{"ttl under interval", "domain: d\nrate_limit_quota:\n  buckets:\n    - {match: {a: b}, rate_limit: {unit: second, requests_per_unit: 1}, ttl: 100ms}\n", "shorter than the reporting_interval"},
		{"duplicate match", "domain: d\nrate_limit_quota:\n  buckets:\n    - {match: {a: b}, rate_limit: {unit: second, requests_per_unit: 1}}\n    - {match: {a: b}, rate_limit: {unit: second, requests_per_unit: 2}}\n", "matches the same ids"},
		{"bad reserve", "domain: d\nrate_limit_quota:\n  buckets:\n    - {match: {a: b}, rate_limit: {unit: second, requests_per_unit: 1}, reserve: 2}\n", `reserve "2"`},
		{"twice", "domain: d\nrate_limit_quota: {buckets: [], buckets: []}\n", "given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := quota.Parse(map[string][]byte{"f.yaml": []byte(tc.yaml)})
			require.ErrorIs(t, err, quota.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
