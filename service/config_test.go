package service_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/service"
)

// matching is envoy ratelimit's documented example layout, plus wildcards.
const matching = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 10.0.0.1
    rate_limit:
      name: vip
      unit: minute
      requests_per_unit: 1000
  - key: path
    value: /api/*
    rate_limit:
      unit: hour
      requests_per_unit: 5
  - key: path
    value: /api/v1*
    rate_limit:
      unit: hour
      requests_per_unit: 6
  - key: path
    rate_limit:
      unit: day
      requests_per_unit: 7
  - key: client
    descriptors:
      - key: route
        rate_limit:
          unit: second
          requests_per_unit: 3
  - key: deep
    value: x
    rate_limit:
      unit: second
      requests_per_unit: 4
    descriptors:
      - key: sub
        rate_limit:
          unit: second
          requests_per_unit: 5
`

func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func TestMatch(t *testing.T) {
	c, err := service.Parse(map[string][]byte{"edge.yaml": []byte(matching)})
	require.NoError(t, err)
	tests := []struct {
		name   string
		domain string
		d      *ratelimitv3.RateLimitDescriptor
		limit  uint32 // 0: no rule
		path   string
	}{
		{"key and value first", "edge", desc("remote_address", "10.0.0.1"), 1000, "remote_address_10.0.0.1"},
		{"then the key alone", "edge", desc("remote_address", "10.0.0.2"), 10, "remote_address"},
		{"wildcards in file order", "edge", desc("path", "/api/v1/users"), 5, "path_/api/*"},
		{"no wildcard: the key alone", "edge", desc("path", "/static"), 7, "path"},
		{"nested", "edge", desc("client", "a", "route", "r"), 3, "client.route"},
		{"a parent without rule", "edge", desc("client", "a"), 0, ""},
		{"rule only at the descriptor's depth (deeper request)", "edge", desc("remote_address", "1", "more", "x"), 0, ""},
		{"rule at depth 1 of a parent with children", "edge", desc("deep", "x"), 4, "deep_x"},
		{"rule at depth 2", "edge", desc("deep", "x", "sub", "y"), 5, "deep_x.sub"},
		{"too deep", "edge", desc("deep", "x", "sub", "y", "z", "1"), 0, ""},
		{"unknown key", "edge", desc("nope", "x"), 0, ""},
		{"unknown domain", "other", desc("remote_address", "1"), 0, ""},
		{"no entries", "edge", desc(), 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := c.Match(tt.domain, tt.d)
			assert.Equal(t, tt.domain == "edge", m.Known)
			if tt.limit == 0 {
				assert.Nil(t, m.Rule)
				return
			}
			require.NotNil(t, m.Rule)
			assert.Equal(t, tt.limit, m.Rule.RequestsPerUnit)
			assert.Equal(t, tt.path, m.Rule.Path)
		})
	}
}

func TestMatchIDsDoNotCollide(t *testing.T) {
	c, err := service.Parse(map[string][]byte{"a.yaml": []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n")})
	require.NoError(t, err)
	pairs := [][2]*ratelimitv3.RateLimitDescriptor{
		{desc("a", "b_c"), desc("a_b", "c")},
		{desc("a", "1:x"), desc("a1", "x")},
		{desc("a", ""), desc("a", "", "", "")},
	}
	for _, p := range pairs {
		assert.NotEqual(t, c.Match("d", p[0]).ID("d", p[0]), c.Match("d", p[1]).ID("d", p[1]))
	}
}

func TestParseRules(t *testing.T) {
	c, err := service.Parse(map[string][]byte{"x.yaml": []byte(`
domain: x
descriptors:
  - key: a
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 10, name: a, replaces: [{name: b}]}
  - key: u
    rate_limit: {unlimited: true}
  - key: g
    rate_limit: {algorithm: gcra, period: 15s, requests_per_unit: 10, burst: 3}
  - key: s
    rate_limit: {algorithm: sliding_window, unit: hour, requests_per_unit: 100}
  - key: p
    rate_limit: {period: 60s, requests_per_unit: 1}
`)})
	require.NoError(t, err)
	a := c.Match("x", desc("a", "1")).Rule
	require.NotNil(t, a)
	assert.True(t, a.ShadowMode)
	assert.Equal(t, []string{"b"}, a.Replaces)
	assert.Equal(t, actorlimit.Policy{Limit: 10, Period: time.Minute}, a.Policy)
	assert.False(t, a.Extended)
	assert.True(t, c.Match("x", desc("u", "1")).Rule.Unlimited)
	g := c.Match("x", desc("g", "1")).Rule
	assert.Equal(t, actorlimit.Policy{Algorithm: actorlimit.GCRA, Limit: 10, Period: 15 * time.Second, Burst: 3}, g.Policy)
	assert.True(t, g.Extended)
	assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_UNKNOWN, g.Unit)
	s := c.Match("x", desc("s", "1")).Rule
	assert.Equal(t, actorlimit.Policy{Algorithm: actorlimit.SlidingWindow, Limit: 100, Period: time.Hour}, s.Policy)
	assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_MINUTE, c.Match("x", desc("p", "1")).Rule.Unit, "a period of one unit shows as that unit")
	assert.Equal(t, 5, c.Rules())
	assert.Equal(t, []string{"x"}, c.Domains())
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		line, col  int
		msg        string
	}{
		{"unknown top field", "domain: d\nfoo: 1\n", 2, 1, `unknown field "foo" in the file`},
		{"unknown descriptor field", "domain: d\ndescriptors:\n  - key: a\n    vaule: b\n", 4, 5, `unknown field "vaule" in a descriptor`},
		{"unknown rate_limit field", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, per: 2}\n", 4, 54, `unknown field "per" in rate_limit`},
		{"empty domain", "descriptors: []\n", 1, 1, "empty domain"},
		{"empty file", "", 0, 0, "empty domain"},
		{"empty key", "domain: d\ndescriptors:\n  - value: a\n", 3, 5, "descriptor has empty key"},
		{"duplicate descriptor", "domain: d\ndescriptors:\n  - key: a\n  - key: b\n  - key: a\n", 5, 5, "duplicate descriptor composite key 'd.a'"},
		{"duplicate nested descriptor", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        value: c\n      - key: b\n        value: c\n", 7, 9, "duplicate descriptor composite key 'd.a.b_c'"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", 4, 24, "invalid rate limit unit 'fortnight'"},
		{"no unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 1}\n", 4, 17, "invalid rate limit unit ''"},
		{"unit when unlimited", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}\n", 4, 41, "should not specify rate limit unit when unlimited"},
		{"negative requests", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n", 4, 51, "requests_per_unit must be a whole number"},
		{"bad algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: magic}\n", 4, 65, `unknown algorithm "magic"`},
		{"bad period", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {period: soon, requests_per_unit: 1}\n", 4, 26, "period (an actorlimitd extension)"},
		{"unit and period", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {period: 1s, unit: second, requests_per_unit: 1}\n", 4, 26, "not both"},
		{"bad policy", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {period: 1500us, requests_per_unit: 1}\n", 4, 17, "whole number of milliseconds"},
		{"empty replaces", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}\n", 4, 65, "empty replaces"},
		{"replaces itself", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {name: n, unit: second, requests_per_unit: 1, replaces: [{name: n}]}\n", 4, 74, "replaces should not contain name of same descriptor"},
		{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n", 3, 5, "share_threshold can only be used with wildcard"},
		{"syntax", "domain: d\ndescriptors:\n  - key: [a\n", 2, 1, "did not find expected"},
		{"duplicate yaml key", "domain: d\ndomain: e\n", 2, 1, "given twice"},
		{"shadow_mode not a bool", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n", 4, 18, "shadow_mode must be true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := service.Parse(map[string][]byte{"f.yaml": []byte(tt.yaml)})
			require.Error(t, err)
			assert.ErrorIs(t, err, service.ErrConfig)
			var ce *service.ConfigError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Equal(t, "f.yaml", ce.File)
			assert.Equal(t, tt.line, ce.Line, "%v", err)
			assert.Equal(t, tt.col, ce.Column, "%v", err)
			assert.Contains(t, ce.Msg, tt.msg)
		})
	}
}

func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	write("b.yml", "domain: b\n")
	write("notes.txt", "not yaml")
	write(".hidden.yaml", "domain: [")
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	c, err := service.Load(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, c.Domains())
	assert.Len(t, c.Files, 2)
	assert.Contains(t, string(c.Source()), "domain: b")

	write("c.yaml", "domain: a\n")
	_, err = service.Load(dir)
	var ce *service.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, filepath.Join(dir, "c.yaml"), ce.File)
	assert.Contains(t, ce.Msg, `duplicate domain "a"`)

	_, err = service.Load(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, service.ErrConfig)
}

func TestMatchShareThresholdAndMetricLabels(t *testing.T) {
	c, err := service.Parse(map[string][]byte{"x.yaml": []byte(`
domain: x
descriptors:
  - key: file
    value: "docs*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: user
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: team
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
`)})
	require.NoError(t, err)
	a, b := desc("file", "docs1"), desc("file", "docs2")
	ma, mb := c.Match("x", a), c.Match("x", b)
	assert.Equal(t, ma.ID("x", a), mb.ID("x", b), "share_threshold: one counter for the wildcard")
	assert.Equal(t, "file_docs*", ma.Label())
	u := c.Match("x", desc("user", "alice"))
	assert.True(t, u.Detailed())
	assert.Equal(t, "user_alice", u.Label())
	tm := c.Match("x", desc("team", "red"))
	assert.Equal(t, "team_red", tm.Label())
}

// TestLoadMergeDomains: with MergeDomains, a domain's descriptors may come
// from several files (envoy ratelimit's MERGE_DOMAIN_CONFIG); a descriptor
// in two of them is still an error, and without it the domain in two files
// is.
func TestLoadMergeDomains(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		merge bool
		err   string
		rules map[string]uint32 // key=value -> requests_per_unit of the rule matched
	}{
		{"merged", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: one\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: two\n    rate_limit: {unit: minute, requests_per_unit: 2}\n",
		}, true, "", map[string]uint32{"one": 1, "two": 2}},
		{"refused without merging", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: one\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: two\n    rate_limit: {unit: minute, requests_per_unit: 2}\n",
		}, false, `duplicate domain "d"`, nil},
		{"a descriptor in two files", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: one\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: one\n    rate_limit: {unit: minute, requests_per_unit: 2}\n",
		}, true, "duplicate descriptor composite key 'd.k_one'", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range c.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
			}
			cfg, err := service.LoadWith(dir, service.LoadOptions{MergeDomains: c.merge})
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{"d"}, cfg.Domains())
			assert.Equal(t, len(c.rules), cfg.Rules())
			for value, want := range c.rules {
				m := cfg.Match("d", desc("k", value))
				require.NotNil(t, m.Rule, value)
				assert.Equal(t, want, m.Rule.RequestsPerUnit, value)
			}
		})
	}
}
