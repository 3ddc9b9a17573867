package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/analytics"
)

func fetch(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, b)
	return string(b)
}

// TestRunAdmin serves with rules and -admin: after a few requests the
// metrics count each rule's and the per-peer limit's decisions, and the
// limits page and its JSON show the rules.
func TestRunAdmin(t *testing.T) {
	r := startRun(t, []string{"-addr", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-dir", newTestDir(t), "-limit", "2",
		"-rules", "rules.yaml"}, limiterOptions(newFakeClock())...)
	adminURL, url := r.admin, r.url
	require.NotEmpty(t, adminURL)
	for range 3 {
		status(t, url+testFile)
	}
	m := fetch(t, adminURL+"/metrics")
	for _, want := range []string{
		`actorlimit_rule_matched_total{action="monitor",rule="trial"} 3`,
		`actorlimit_rule_matched_total{action="block",rule="per-host"} 3`,
		`actorlimit_rule_allowed_total{action="block",rule="per-peer"} 2`,
		`actorlimit_rule_denied_total{action="block",rule="per-peer"} 1`,
		`actorlimit_check_duration_seconds_count 3`,
		`actorlimit_limiter_entries 3`,
	} {
		assert.Contains(t, m, want)
	}
	var snap analytics.Snapshot
	require.NoError(t, json.Unmarshal([]byte(fetch(t, adminURL+"/limits?format=json")), &snap))
	var names []string
	for _, rule := range snap.Rules {
		names = append(names, rule.Rule)
	}
	assert.Equal(t, []string{"per-host", "per-peer", "trial"}, names)
	assert.Contains(t, fetch(t, adminURL+"/limits"), `<svg class="heatmap" data-kind="requests"`)
}
