package httpadapter_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/httpadapter"
)

// goNames matches what a Go type's name looks like in an error: a package
// qualifier, a slice or pointer type, yaml.v3's tags, a sized integer.
var goNames = regexp.MustCompile(`httpadapter\.[a-z]|\[\][a-z]|\*[a-z]+\.|!!|\bint64\b|\bstruct\b|cannot unmarshal`)

// TestRulesFileErrorsSayWhere: a syntax error of a YAML or JSON rules file
// names the line and column where it is, one-based (YAML: where the parser
// stopped, at most two tokens after the mistake, and the line where the
// construct it is in starts when that is earlier); a value of
// the wrong kind names the field and what it wants, in the file's terms,
// never a Go type. The whole message is checked, after the file name.
func TestRulesFileErrorsSayWhere(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"yaml unclosed flow mapping", "rules:\n  - name: a\n    policy: {limit: 1, period: 1m\n  - name: b\n",
			`line 4 column 11: YAML syntax: did not find expected ',' or '}' (in what starts at line 3)`},
		{"yaml bad indentation", "rules:\n  - name: a\n    policy: {limit: 1, period: 1m}\n   bad: [\n",
			`line 4 column 9: YAML syntax: did not find expected '-' indicator (in what starts at line 2)`},
		{"yaml tab", "rules:\n  - name: a\n\tpolicy: x\n",
			`line 3 column 2: YAML syntax: found a tab character that violates indentation (in what starts at line 2)`},
		{"yaml unclosed list on line 1", "rules: [\n",
			`line 1 column 8: YAML syntax: did not find expected node content`},
		{"yaml error after many lines", "rules:\n" + repeat("  - name: r\n    policy: {limit: 1, period: 1m}\n", 40) + "  - name: x\n    policy: {limit: 1, period: 1m]\n",
			`line 83 column 34: YAML syntax: did not find expected ',' or '}'`},
		{"yaml reserved character", "rules:\n  - name: a\n    policy: {limit: 1, period: 1m}\n    body: @x\n",
			`line 4 column 12: YAML syntax: found character that cannot start any token`},
		{"yaml colon in a value", "rules:\n  - name: a\n    policy: {limit: 1, period: 1m}\n    body: a: b\n",
			`line 4 column 14: YAML syntax: mapping values are not allowed in this context`},
		{"yaml unclosed quote", "rules:\n  - name: a\n    body: \"slow\n    policy: {limit: 1, period: 1m}\n",
			`line 4 column 34: YAML syntax: found unexpected end of stream (in what starts at line 3)`},
		{"yaml path is a string", "rules:\n  - name: a\n    when:\n      - path: /login\n    policy: {limit: 1, period: 1m}\n",
			`line 4: rule "a": when[0].path: "/login" is a string where a mapping with one of exact:, prefix:, glob: (such as {prefix: /login}) is wanted`},
		{"yaml method is a string", "rules:\n  - name: a\n    when:\n      - method: GET\n    policy: {limit: 1, period: 1m}\n",
			`line 4: rule "a": when[0].method: "GET" is a string where a list of strings (such as [GET, POST]) is wanted`},
		{"yaml limit is a word", "rules:\n  - name: a\n    policy: {limit: many, period: 1m}\n",
			`line 3: rule "a": policy.limit: "many" is a string where a whole number is wanted`},
		{"yaml header is a list", "rules:\n  - name: a\n    when:\n      - header: [X-A]\n    policy: {limit: 1, period: 1m}\n",
			`line 4: rule "a": when[0].header: a list where a mapping with name: and one of equals:, present: true, regex: is wanted`},
		{"yaml rules is a number", "rules: 5\n", `line 1: "5" is a number where a list of rules is wanted`},
		{"yaml file is a list", "- a\n", `line 1: a list where a mapping with a "rules" key is wanted`},
		{"json double comma", "{\"rules\": [\n {\"name\": \"a\",\n  \"policy\": {\"limit\": 1,,\n \"period\": \"1m\"}}\n]}",
			`line 3 column 25: JSON syntax: invalid character ',' looking for beginning of object key string`},
		{"json bad top level", "{\"rules\" [\n]}",
			`line 1 column 10: JSON syntax: invalid character '[' after object key`},
		{"json unclosed", "{\"rules\": [\n {\"name\": \"a\",\n  \"policy\": {\"limit\": 1, \"period\": \"1m\"}}\n]\n",
			`line 4 column 2: JSON syntax: the file ends before the JSON does (a { or [ is not closed)`},
		{"json limit is a string", "{\"rules\": [\n {\"name\": \"a\",\n  \"policy\": {\"limit\": \"x\", \"period\": \"1m\"}}\n]}",
			`line 3: rule "a": policy.limit: a string where a whole number is wanted`},
		{"json limit is a fraction", "{\"rules\": [\n {\"name\": \"a\",\n  \"policy\": {\"limit\": 1.5, \"period\": \"1m\"}}\n]}",
			`line 3: rule "a": policy.limit: 1.5 is a number where a whole number is wanted`},
		{"json path is a string", "{\"rules\": [\n {\"name\": \"a\",\n  \"when\": [{\"path\": \"/login\"}],\n  \"policy\": {\"limit\": 1, \"period\": \"1m\"}}\n]}",
			`line 3: rule "a": when.path: a string where a mapping with one of exact:, prefix:, glob: (such as {prefix: /login}) is wanted`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := httpadapter.ParseRules([]byte(tt.data))
			require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Equal(t, "httpadapter: invalid configuration: "+tt.want, err.Error())
			assert.NotRegexp(t, goNames, err.Error(), "no Go type names")

			p := filepath.Join(t.TempDir(), "rules.conf")
			require.NoError(t, os.WriteFile(p, []byte(tt.data), 0o600))
			_, err = httpadapter.LoadRules(p)
			require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Equal(t, "httpadapter: invalid configuration: "+p+" "+tt.want, err.Error(), "LoadRules names the file")
		})
	}
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }

// TestYAMLSyntaxErrorsParseOnce: placing a YAML syntax error parses the
// file once, however large the file and wherever the error (yaml.v3 takes
// about a second a megabyte, so each parse more of a 4 MiB file is
// seconds more).
func TestYAMLSyntaxErrorsParseOnce(t *testing.T) {
	item := "  - name: r\n    policy: {limit: 1, period: 1m}\n"
	tests := []struct {
		name, data, want string
	}{
		{"an error at the end of 1 MiB", "rules:\n" + repeat(item, (1<<20)/len(item)) + "  - name: x\n    policy: {limit: 1, period: 1m\n",
			`line 44623 column 33: YAML syntax: did not find expected ',' or '}'`},
		{"a quote left open near the top of 1 MiB", "rules:\n  - name: a\n    body: \"slow\n" + repeat(item, (1<<20)/len(item)),
			`line 44623 column 34: YAML syntax: found unexpected end of stream (in what starts at line 3)`},
		{"an error in the middle", "rules:\n" + repeat(item, 1000) + "    body: a: b\n" + repeat(item, 1000),
			`line 2002 column 14: YAML syntax: mapping values are not allowed in this context`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := httpadapter.YAMLParses()
			_, err := httpadapter.ParseRules([]byte(tt.data))
			require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Equal(t, int64(1), httpadapter.YAMLParses()-before, "parses")
			assert.Equal(t, "httpadapter: invalid configuration: "+tt.want, err.Error())
		})
	}
}
