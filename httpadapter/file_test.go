package httpadapter_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
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
		{"yaml unknown rule field", "rules:\n  - name: a\n    limit: 3\n    policy: {limit: 1, period: 1s}\n", []string{`line 3: rule "a": limit: unknown field`}},
		{"yaml unknown policy field", "rules:\n  - name: a\n    policy: {limit: 1, period: 1s, rate: 2}\n", []string{`rule "a"`, "rate: unknown field"}},
		{"yaml unknown condition field", "rules:\n  - name: a\n    when: [{methods: [GET]}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "methods: unknown field"}},
		{"yaml wrong type", "rules:\n  - name: a\n    policy: {limit: many, period: 1s}\n", []string{`line 3: rule "a": policy.limit: "many" is a string where a whole number is wanted`}},
		{"yaml missing name", "rules:\n  - policy: {limit: 1, period: 1s}\n", []string{"line 2: rule #1 (it has no name): name: missing"}},
		{"yaml missing policy", "rules:\n  - name: a\n", []string{`rule "a"`, "policy: missing"}},
		{"yaml missing limit", "rules:\n  - name: a\n    policy: {period: 1s}\n", []string{`rule "a"`, "policy.limit: missing"}},
		{"yaml bad period", "rules:\n  - name: a\n    policy: {limit: 1, period: soon}\n", []string{`rule "a"`, "policy.period"}},
		{"yaml bad algorithm", "rules:\n  - name: a\n    policy: {algorithm: magic, limit: 1, period: 1s}\n", []string{`rule "a"`, `policy.algorithm: unknown algorithm "magic" (known: fixed_window, sliding_window`}},
		{"yaml bad action", "rules:\n  - name: a\n    policy: {limit: 1, period: 1s}\n    action: drop\n", []string{`rule "a"`, `action: "drop"`}},
		{"yaml monitor status", "rules:\n  - name: a\n    policy: {limit: 1, period: 1s}\n    action: monitor\n    status: 429\n", []string{`rule "a"`, "status"}},
		{"yaml two kinds", "rules:\n  - name: a\n    when: [{method: [GET], path: {exact: /}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].condition"}},
		{"yaml bad path", "rules:\n  - name: a\n    when: [{path: {exact: /, prefix: /}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].path"}},
		{"yaml bad glob", "rules:\n  - name: a\n    when: [{path: {glob: \"[\"}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].path.glob"}},
		{"yaml bad regex", "rules:\n  - name: a\n    when: [{header: {name: A, regex: \"(\"}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].header.regex"}},
		{"yaml bad header", "rules:\n  - name: a\n    when: [{header: {name: A}}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].header"}},
		{"yaml bad ip", "rules:\n  - name: a\n    when: [{ip: [300.1.1.1]}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].ip[0]"}},
		{"yaml bad group", "rules:\n  - name: a\n    group_by: [ip, user]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "group_by[1]"}},
		{"yaml not a mapping", "rules: [3]\n", []string{"line 1: rule #1: not a rule"}},
		{"yaml wrong list", "rules:\n  - name: a\n    when: [{method: GET}]\n    policy: {limit: 1, period: 1s}\n", []string{`rule "a"`, "when[0].method"}},
		{"yaml syntax", "rules: [\n", []string{"line"}},
		{"yaml two documents", "rules: []\n---\nrules: []\n", []string{"more than one"}},
		{"json unknown field", `{"rules": [{"name": "a", "policy": {"limit": 1, "period": "1s"}, "extra": 1}]}`, []string{`line 1: rule "a": "extra": unknown field`}},
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
			// Every error wraps ErrInvalidConfig, as ParseRules promises.
			if !errors.Is(err, httpadapter.ErrInvalidConfig) {
				t.Fatalf("ParseRules: %v, not an ErrInvalidConfig", err)
			}
			return
		}
		// What parses is what ParseRules checks: valid, unique names,
		// policies the limiter accepts, each rule's line.
		names := map[string]bool{}
		for i, r := range rules {
			if !validRuleName(r.Name) || names[r.Name] {
				t.Fatalf("rule %d: name %q invalid or not unique", i, r.Name)
			}
			names[r.Name] = true
			if err := r.Policy.Validate(); err != nil {
				t.Fatalf("rule %q: policy %+v accepted, yet %v", r.Name, r.Policy, err)
			}
			if !strings.HasPrefix(r.Source, "line ") {
				t.Fatalf("rule %q: Source %q, not its line", r.Name, r.Source)
			}
		}
		// What parses must be accepted by a middleware (with a country
		// function), or be refused with a message naming a rule.
		_, err = httpadapter.New(newFake(), httpadapter.Config{Rules: rules, AllowNoRules: true, Country: func(netip.Addr) string { return "" }})
		if err != nil {
			if len(rules) == 0 {
				t.Fatalf("no rules, yet %v", err)
			}
			assert.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Contains(t, err.Error(), "rule")
		}
	})
}

// validRuleName reports whether name is 1 to 64 bytes of ASCII letters,
// digits, '-', '_' and '.', as Rule.Name must be.
func validRuleName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// TestEmptyRuleSets checks that no rule set removes every limit by
// accident: a file without a "rules" key does not parse, and an empty set
// is refused by New and SetRules unless Config.AllowNoRules.
func TestEmptyRuleSets(t *testing.T) {
	for _, data := range []string{"", "  \n", "# nothing yet\n", "{}", "{ }\n"} {
		_, err := httpadapter.ParseRules([]byte(data))
		if assert.ErrorIs(t, err, httpadapter.ErrInvalidConfig, "%q", data) {
			assert.Contains(t, err.Error(), `no "rules" key`, "%q", data)
		}
	}
	_, err := httpadapter.ParseRules([]byte("other: 1\n"))
	assert.ErrorContains(t, err, "other: unknown field", "strict decoding comes first")
	for _, data := range []string{"rules: []\n", "rules:\n", `{"rules": []}`, `{"rules": null}`} {
		rules, err := httpadapter.ParseRules([]byte(data))
		assert.NoError(t, err, "%q says no rules", data)
		assert.Empty(t, rules, "%q", data)
	}
	p := filepath.Join(t.TempDir(), "empty.yaml")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	_, err = httpadapter.LoadRules(p)
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), p+`: no "rules" key`)

	_, err = httpadapter.New(newFake(), httpadapter.Config{})
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "no rules")
	_, err = httpadapter.New(newFake(), httpadapter.Config{AllowNoRules: true})
	assert.NoError(t, err)

	rules := []httpadapter.Rule{{Name: "r", Policy: perMinute(0)}}
	m := newMW(t, newFake(), httpadapter.Config{Rules: rules})
	h := m.Handler(&okHandler{})
	err = m.SetRules(nil)
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "AllowNoRules")
	assert.Equal(t, http.StatusTooManyRequests, serve(h, req("/")).Code, "a refused reload keeps the rules")

	m = newMW(t, newFake(), httpadapter.Config{Rules: rules, AllowNoRules: true})
	h = m.Handler(&okHandler{})
	require.NoError(t, m.SetRules([]httpadapter.Rule{}))
	assert.Equal(t, http.StatusOK, serve(h, req("/")).Code, "no rules, as asked")
	assert.Empty(t, m.Stats().Rules)
}

// TestRulesFileSize checks that a rules file over the size limit is
// reported with its real size.
func TestRulesFileSize(t *testing.T) {
	const size = 4_823_449 // 4.6 MB
	data := append([]byte("rules:\n"), bytes.Repeat([]byte("#"), size-len("rules:\n"))...)
	p := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(p, data, 0o600))
	for name, parse := range map[string]func() ([]httpadapter.Rule, error){
		"LoadRules":  func() ([]httpadapter.Rule, error) { return httpadapter.LoadRules(p) },
		"ParseRules": func() ([]httpadapter.Rule, error) { return httpadapter.ParseRules(data) },
	} {
		_, err := parse()
		require.ErrorIs(t, err, httpadapter.ErrInvalidConfig, name)
		assert.Contains(t, err.Error(), "is 4823449 bytes, more than the 4194304 allowed", name)
		assert.NotContains(t, err.Error(), "4194305", name)
	}
}

// TestRuleErrorsSayWhere checks that every error about a rule of a file
// gives the file and the line, and says what is wrong in the file's terms.
func TestRuleErrorsSayWhere(t *testing.T) {
	tests := []struct {
		name, data string
		noCountry  bool // the middleware has no country lookup
		want       string
	}{
		{"bad name", "rules:\n  - name: x\n    policy: {limit: 1, period: 1s}\n  - name: a b\n    policy: {limit: 1, period: 1s}\n",
			false, `rules.yaml line 4: rule "a b": name: "a b" is not 1 to 64 letters`},
		{"duplicate name", "rules:\n  - name: a\n    policy: {limit: 1, period: 1s}\n  - name: a\n    policy: {limit: 2, period: 1s}\n",
			false, `rules.yaml line 4: rule "a": name: already the name of the rule at line 2`},
		{"duplicate name, JSON", "{\"rules\": [\n  {\"name\": \"a\", \"policy\": {\"limit\": 1, \"period\": \"1s\"}},\n\n  {\"name\": \"a\", \"policy\": {\"limit\": 1, \"period\": \"1s\"}}\n]}",
			false, `rules.yaml line 4: rule "a": name: already the name of the rule at line 2`},
		{"JSON field", "{\"rules\": [\n  {\"name\": \"a\", \"policy\": {\"limit\": 1, \"period\": \"1s\"}},\n  {\"name\": \"b\",\n   \"policy\": {\"limit\": \"x\", \"period\": \"1s\"}}]}",
			false, `rules.yaml line 4: rule "b": policy.limit: a string where a whole number is wanted`},
		{"JSON unknown top field", "{\"rules\": [],\n \"x\": 1}", false, `rules.yaml line 2: "x": unknown field`},
		{"country without lookup", "rules:\n  - name: a\n    policy: {limit: 1, period: 1s}\n  - name: geo\n    when: [{country: [RU]}]\n    policy: {limit: 1, period: 1s}\n",
			true, `rules.yaml line 4: rule "geo" uses a country condition (when[0]) but this server has no country lookup`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "rules.yaml")
			require.NoError(t, os.WriteFile(p, []byte(tt.data), 0o600))
			rules, err := httpadapter.LoadRules(p)
			if err == nil {
				cfg := httpadapter.Config{Rules: rules}
				if !tt.noCountry {
					cfg.Country = func(netip.Addr) string { return "" }
				}
				_, err = httpadapter.New(newFake(), cfg)
			}
			require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Contains(t, err.Error(), filepath.Dir(p)+"/"+tt.want)
			assert.NotContains(t, err.Error(), "Config.", "no Go names for the person who wrote the file")
			assert.NotContains(t, err.Error(), "rules[", "no Go indexes either")
		})
	}
}

func TestRulesKeepTheirSource(t *testing.T) {
	rules, err := httpadapter.ParseRules([]byte(rulesYAML))
	require.NoError(t, err)
	assert.Equal(t, []string{"line 3", "line 10", "line 21"}, []string{rules[0].Source, rules[1].Source, rules[2].Source})
	rules, err = httpadapter.ParseRules([]byte(rulesJSON))
	require.NoError(t, err)
	assert.Equal(t, []string{"line 2", "line 4", "line 8"}, []string{rules[0].Source, rules[1].Source, rules[2].Source})
}
