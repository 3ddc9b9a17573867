package main

import (
	"path/filepath"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envoyExamples are the situations envoy ratelimit's README describes
// (nested descriptors, matching order, the depth rule, unlimited, shadow
// mode, replaces, detailed and value metrics, wildcards, shared
// thresholds), in our own files: one domain per file, every limit per year
// so that no test crosses a window.
var envoyExamples = map[string]string{
	"nested.yaml": `
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: year, requests_per_unit: 2}
  - key: to_number
    rate_limit: {unit: year, requests_per_unit: 4}
`,
	"order.yaml": `
domain: per_ip
descriptors:
  - key: remote_address
    rate_limit: {unit: year, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: year, requests_per_unit: 0}
`,
	"depth.yaml": `
domain: depth
descriptors:
  - key: key
    value: value
    rate_limit: {unit: year, requests_per_unit: 300}
    descriptors:
      - key: subkey
        rate_limit: {unit: year, requests_per_unit: 200}
`,
	"shadow.yaml": `
domain: shadow
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        shadow_mode: true
        rate_limit: {unit: year, requests_per_unit: 1}
      - key: user
        value: user-b
        rate_limit: {unit: year, requests_per_unit: 1}
`,
	"replaces.yaml": `
domain: replaces
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bk
        rate_limit: {name: specific_limit, unit: year, requests_per_unit: 1}
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bk
        rate_limit: {replaces: [{name: specific_limit}], unit: year, requests_per_unit: 3}
`,
	"metrics.yaml": `
domain: metrics
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit: {unit: year, requests_per_unit: 10}
  - key: key1
    value: value1
    rate_limit: {unit: year, requests_per_unit: 20}
  - key: route
    value_to_metric: true
    descriptors:
      - key: subject_id
        rate_limit: {unit: year, requests_per_unit: 60}
`,
	"wildcards.yaml": `
domain: wildcards
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: year, requests_per_unit: 3}
  - key: own
    value: own/*
    rate_limit: {unit: year, requests_per_unit: 3}
`,
}

func TestEnvoyExamples(t *testing.T) {
	dir := t.TempDir()
	for name, text := range envoyExamples {
		writeFile(t, filepath.Join(dir, name), text)
	}
	d := startDaemon(t, "-config", dir)
	steps := []struct {
		name   string
		domain string
		ds     []*ratelimitv3.RateLimitDescriptor
		over   bool
		limits []uint32 // each status's requests_per_unit; 0: no limit
	}{
		{"nested: the marketing pair and the number both apply", "messaging",
			[]*ratelimitv3.RateLimitDescriptor{desc("message_type", "marketing", "to_number", "206"), desc("to_number", "206")}, false, []uint32{2, 4}},
		{"nested: again", "messaging",
			[]*ratelimitv3.RateLimitDescriptor{desc("message_type", "marketing", "to_number", "206"), desc("to_number", "206")}, false, []uint32{2, 4}},
		{"nested: the marketing pair is over, a logical OR", "messaging",
			[]*ratelimitv3.RateLimitDescriptor{desc("message_type", "marketing", "to_number", "206"), desc("to_number", "206")}, true, []uint32{2, 4}},
		{"nested: another number has its own", "messaging",
			[]*ratelimitv3.RateLimitDescriptor{desc("message_type", "marketing", "to_number", "207")}, false, []uint32{2}},
		{"order: the key for any address", "per_ip", []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "50.0.0.1")}, false, []uint32{10}},
		{"order: key and value first (a block list)", "per_ip", []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "50.0.0.5")}, true, []uint32{0}},
		{"depth: one tuple matches the first level", "depth", []*ratelimitv3.RateLimitDescriptor{desc("key", "value")}, false, []uint32{300}},
		{"depth: two tuples the second", "depth", []*ratelimitv3.RateLimitDescriptor{desc("key", "value", "subkey", "x")}, false, []uint32{200}},
		{"depth: three tuples nothing", "depth", []*ratelimitv3.RateLimitDescriptor{desc("key", "value", "subkey", "x", "z", "1")}, false, []uint32{0}},
		{"shadow: user-a", "shadow", []*ratelimitv3.RateLimitDescriptor{desc("service", "auth", "user", "user-a")}, false, []uint32{1}},
		{"shadow: user-a over, answered OK", "shadow", []*ratelimitv3.RateLimitDescriptor{desc("service", "auth", "user", "user-a")}, false, []uint32{1}},
		{"shadow: user-b", "shadow", []*ratelimitv3.RateLimitDescriptor{desc("service", "auth", "user", "user-b")}, false, []uint32{1}},
		{"shadow: user-b over", "shadow", []*ratelimitv3.RateLimitDescriptor{desc("service", "auth", "user", "user-b")}, true, []uint32{1}},
		{"replaces: both descriptors, the named limit replaced", "replaces",
			[]*ratelimitv3.RateLimitDescriptor{desc("key_1", "value_1", "user", "bk"), desc("key_2", "value_2", "user", "bk")}, false, []uint32{0, 3}},
		{"replaces: again, still not the 1", "replaces",
			[]*ratelimitv3.RateLimitDescriptor{desc("key_1", "value_1", "user", "bk"), desc("key_2", "value_2", "user", "bk")}, false, []uint32{0, 3}},
		{"replaces: alone, the named limit applies and was not charged", "replaces",
			[]*ratelimitv3.RateLimitDescriptor{desc("key_1", "value_1", "user", "bk")}, false, []uint32{1}},
		{"metrics: detailed", "metrics", []*ratelimitv3.RateLimitDescriptor{desc("key1", "unspecified")}, false, []uint32{10}},
		{"metrics: key and value", "metrics", []*ratelimitv3.RateLimitDescriptor{desc("key1", "value1")}, false, []uint32{20}},
		{"metrics: value_to_metric", "metrics", []*ratelimitv3.RateLimitDescriptor{desc("route", "api", "subject_id", "123")}, false, []uint32{60}},
	}
	for _, s := range steps {
		resp, err := d.ask(request(s.domain, s.ds...))
		require.NoError(t, err, s.name)
		assert.Equal(t, s.over, resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT, s.name)
		var limits []uint32
		for _, st := range resp.Statuses {
			limits = append(limits, st.GetCurrentLimit().GetRequestsPerUnit())
		}
		assert.Equal(t, s.limits, limits, s.name)
	}

	// Wildcards: a shared threshold for files/*, one per value for own/*.
	var shared, own []bool
	for _, v := range []string{"a.pdf", "b.csv", "c.txt", "d.doc"} {
		resp, err := d.ask(request("wildcards", desc("files", "files/"+v), desc("own", "own/"+v)))
		require.NoError(t, err)
		shared = append(shared, resp.Statuses[0].Code == rlsv3.RateLimitResponse_OVER_LIMIT)
		own = append(own, resp.Statuses[1].Code == rlsv3.RateLimitResponse_OVER_LIMIT)
	}
	assert.Equal(t, []bool{false, false, false, true}, shared, "files/* share 3")
	assert.Equal(t, []bool{false, false, false, false}, own, "own/* values count apart")

	_, body := d.getDebug("/metrics")
	for _, want := range []string{
		`actorlimitd_hits_total{descriptor="key1_unspecified",domain="metrics"} 1`,
		`actorlimitd_hits_total{descriptor="key1_value1",domain="metrics"} 1`,
		`actorlimitd_hits_total{descriptor="route_api.subject_id",domain="metrics"} 1`,
		`actorlimitd_shadow_mode_total{descriptor="service.user_user-a",domain="shadow"} 1`,
		`actorlimitd_hits_total{descriptor="files_files/*",domain="wildcards"} 4`,
		`actorlimitd_hits_total{descriptor="own_own/*",domain="wildcards"} 4`,
	} {
		assert.Contains(t, body, want)
	}
}
