package httpadapter_test

import (
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

const rulesYAML = `
rules:
  - name: login-watch
    when:
      - method: [POST]
      - path: {exact: /login}
    group_by: [ip]
    policy: {limit: 2, period: 1m}
    action: monitor
  - name: login
    when:
      - method: [POST]
      - path: {prefix: /login}
      - header: {name: X-Internal, present: true}
        not: true
    group_by: [ip, host]
    policy: {algorithm: fixed_window, limit: 1, period: 1m}
    action: block
    status: 413
    body: "slow down\n"
  - name: spam
    when:
      - path: {glob: /invite/*}
      - header: {name: User-Agent, regex: "(?i)bot"}
      - ip: [192.0.2.0/24, "2001:db8::1"]
      - country: [RU]
        not: true
    group_by: [header:User-Agent, query:doc, cookie:session, method, path]
    policy: {limit: 0, period: 10s}
    action: shadow
    body: '{"ok":true}'
    content_type: application/json
`

const rulesJSON = `{"rules": [
  {"name": "login-watch", "when": [{"method": ["POST"]}, {"path": {"exact": "/login"}}],
   "group_by": ["ip"], "policy": {"limit": 2, "period": "1m"}, "action": "monitor"},
  {"name": "login", "when": [{"method": ["POST"]}, {"path": {"prefix": "/login"}},
     {"header": {"name": "X-Internal", "present": true}, "not": true}],
   "group_by": ["ip", "host"], "policy": {"algorithm": "fixed_window", "limit": 1, "period": "1m"},
   "action": "block", "status": 413, "body": "slow down\n"},
  {"name": "spam", "when": [{"path": {"glob": "/invite/*"}}, {"header": {"name": "User-Agent", "regex": "(?i)bot"}},
     {"ip": ["192.0.2.0/24", "2001:db8::1"]}, {"country": ["RU"], "not": true}],
   "group_by": ["header:User-Agent", "query:doc", "cookie:session", "method", "path"],
   "policy": {"limit": 0, "period": "10s"}, "action": "shadow", "body": "{\"ok\":true}",
   "content_type": "application/json"}
]}`

func TestParseRulesYAMLAndJSONAgree(t *testing.T) {
	y, err := httpadapter.ParseRules([]byte(rulesYAML))
	require.NoError(t, err)
	j, err := httpadapter.ParseRules([]byte(rulesJSON))
	require.NoError(t, err)
	require.Len(t, y, 3)
	assert.Equal(t, len(y), len(j))
	for i := range y {
		assert.Equal(t, y[i].Name, j[i].Name)
		assert.Equal(t, y[i].Policy, j[i].Policy)
		assert.Equal(t, y[i].Action, j[i].Action)
		assert.Equal(t, y[i].GroupBy, j[i].GroupBy)
		require.Len(t, j[i].When, len(y[i].When))
		for k := range y[i].When {
			assert.Equal(t, y[i].When[k].String(), j[i].When[k].String())
		}
	}
	assert.Equal(t, actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: 1, Period: time.Minute}, y[1].Policy)
	assert.Equal(t, httpadapter.Action{Kind: httpadapter.Block, Status: 413, Body: "slow down\n", ContentType: httpadapter.DefaultContentType}, y[1].Action)
	assert.Equal(t, "not header X-Internal present", y[1].When[2].String())
}

func TestRulesFromFileWork(t *testing.T) {
	rules, err := httpadapter.ParseRules([]byte(rulesYAML))
	require.NoError(t, err)
	m := newMW(t, newFake(), httpadapter.Config{Rules: rules, Country: func(netip.Addr) string { return "NL" }})
	next := &okHandler{}
	h := m.Handler(next)
	post := method("POST")
	assert.Equal(t, http.StatusOK, serve(h, req("/login", post)).Code)
	assert.Equal(t, http.StatusRequestEntityTooLarge, serve(h, req("/login", post)).Code)
	assert.Equal(t, http.StatusOK, serve(h, req("/login", post, header("X-Internal", "1"))).Code)
	w := serve(h, req("/invite/7?doc=1", header("User-Agent", "SpamBot")))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `{"ok":true}`, w.Body.String())
	assert.Equal(t, 2, next.calls)
	s := m.Stats()
	assert.Equal(t, []httpadapter.RuleStats{
		{Rule: "login-watch", Matched: 3, Allowed: 2, Monitored: 1},
		{Rule: "login", Matched: 2, Allowed: 1, Blocked: 1},
		{Rule: "spam", Matched: 1, Shadowed: 1},
	}, s.Rules)
}

func TestParseRulesErrors(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string
	}{
		{"yaml unknown top field", "rulez: []", []string{"line 1: rulez: unknown field"}},
		{"yaml unknown rule field", "rules:\n  - name: a\n    limit: 3\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a" (rules[0])`, "line 3", "limit: unknown field"}},
		{"yaml unknown policy field", "rules:\n  - name: a\n    policy: {limit: 1, period: 1s, rate: 2}\n", []string{`rule "a"`, "rate: unknown field"}},
		{"yaml unknown condition field", "rules:\n  - name: a\n    when: [{methods: [GET]}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "methods: unknown field"}},
		{"yaml wrong type", "rules:\n  - name: a\n    policy: {limit: many, period: 1s}\n", []string{`rule "a"`, "line 3: policy.limit:", "many"}},
		{"yaml missing name", "rules:\n  - policy: {limit: 1, period: 1s}\n", []string{"rules[0]", "name: missing"}},
		{"yaml missing policy", "rules:\n  - name: a\n", []string{`rule "a"`, "policy: missing"}},
		{"yaml missing limit", "rules:\n  - name: a\n    policy: {period: 1s}\n", []string{`rule "a"`, "policy.limit: missing"}},
		{"yaml bad period", "rules:\n  - name: a\n    policy: {limit: 1, period: soon}\n", []string{`rule "a"`, "policy.period"}},
		{"yaml bad algorithm", "rules:\n  - name: a\n    policy: {algorithm: magic, limit: 1, period: 1s}\n", []string{`rule "a"`, `policy.algorithm: "magic"`}},
		{"yaml bad action", "rules:\n  - name: a\n    policy: {limit: 1, period: 1s}\n    action: drop\n", []string{`rule "a"`, `action: "drop"`}},
		{"yaml monitor status", "rules:\n  - name: a\n    policy: {limit: 1, period: 1s}\n    action: monitor\n    status: 429\n", []string{`rule "a"`, "status"}},
		{"yaml two kinds", "rules:\n  - name: a\n    when: [{method: [GET], path: {exact: /}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].condition"}},
		{"yaml bad path", "rules:\n  - name: a\n    when: [{path: {exact: /, prefix: /}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].path"}},
		{"yaml bad glob", "rules:\n  - name: a\n    when: [{path: {glob: \"[\"}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].path.glob"}},
		{"yaml bad regex", "rules:\n  - name: a\n    when: [{header: {name: A, regex: \"(\"}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].header.regex"}},
		{"yaml bad header", "rules:\n  - name: a\n    when: [{header: {name: A}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].header"}},
		{"yaml bad ip", "rules:\n  - name: a\n    when: [{ip: [300.1.1.1]}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].ip[0]"}},
		{"yaml bad group", "rules:\n  - name: a\n    group_by: [ip, user]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "group_by[1]"}},
		{"yaml not a mapping", "rules: [3]\n", []string{"rules[0]: line 1"}},
		{"yaml wrong list", "rules:\n  - name: a\n    when: [{method: GET}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].method"}},
		{"yaml syntax", "rules: [\n", []string{"line"}},
		{"yaml two documents", "rules: []\n---\nrules: []\n", []string{"more than one"}},
		{"json unknown field", `{"rules": [{"name": "a", "policy": {"limit": 1, "period": "1s"}, "extra": 1}]}`, []string{`rule "a" (rules[0])`, `"extra": unknown field`}},
		{"json unknown top field", `{"rules": [], "x": 1}`, []string{`"x"`}},
		{"json wrong type", `{"rules": [{"name": "a", "policy": {"limit": "1", "period": "1s"}}]}`, []string{`rule "a"`, "policy.limit"}},
		{"json trailing", `{"rules": []} {}`, []string{"after"}},
		{"json bad status", `{"rules": [{"name": "a", "policy": {"limit": 1, "period": "1s"}, "action": "shadow", "status": 404}]}`, []string{`rule "a"`, "status: 404"}},
	}
	for _, tt := range tests {
		_, err := httpadapter.ParseRules([]byte(tt.data))
		require.Error(t, err, tt.name)
		assert.ErrorIs(t, err, httpadapter.ErrInvalidConfig, tt.name)
		for _, w := range tt.want {
			assert.Contains(t, err.Error(), w, tt.name)
		}
	}
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(p, []byte(rulesYAML), 0o600))
	rules, err := httpadapter.LoadRules(p)
	require.NoError(t, err)
	assert.Len(t, rules, 3)
	_, err = httpadapter.LoadRules(filepath.Join(dir, "missing.yaml"))
	assert.Error(t, err)
}

func FuzzParseRules(f *testing.F) {
	f.Add([]byte(rulesYAML))
	f.Add([]byte(rulesJSON))
	f.Add([]byte("rules:\n  - name: a\n    policy: {limit: 1, period: 1s}\n"))
	f.Add([]byte(`{"rules": [{"name": "a", "policy": {"limit": 1, "period": "1s"}, "extra": 1}]}`))
	f.Add([]byte("rules: [3]\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := httpadapter.ParseRules(data)
		if err != nil {
			return
		}
		// What parses must be accepted by a middleware (with a country
		// function), or be refused with a message naming a rule.
		_, err = httpadapter.New(newFake(), httpadapter.Config{Rules: rules, Country: func(netip.Addr) string { return "" }})
		if err != nil {
			if len(rules) == 0 {
				t.Fatalf("no rules, yet %v", err)
			}
			assert.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Contains(t, err.Error(), "rule")
		}
	})
}
