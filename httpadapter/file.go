package httpadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/actorlimit/actorlimit"
)

// algorithms maps the algorithm names of rules files to algorithms.
var algorithms = map[string]actorlimit.Algorithm{
	"fixed_window":   actorlimit.FixedWindow,
	"sliding_window": actorlimit.SlidingWindow,
	"gcra":           actorlimit.GCRA,
	"token_bucket":   actorlimit.TokenBucket,
	"leaky_bucket":   actorlimit.LeakyBucket,
	"sliding_log":    actorlimit.SlidingLog,
}

// maxRulesFile bounds the size of a rules file.
const maxRulesFile = 4 << 20

// The rules file's shape. Every struct is decoded strictly: a field not
// listed here is an error.
type fileRules struct {
	Rules []fileRule `yaml:"rules" json:"rules"`
}

type fileRule struct {
	Name        string          `yaml:"name" json:"name"`
	When        []fileCondition `yaml:"when" json:"when"`
	GroupBy     []string        `yaml:"group_by" json:"group_by"`
	Policy      *filePolicy     `yaml:"policy" json:"policy"`
	Action      string          `yaml:"action" json:"action"`
	Status      int             `yaml:"status" json:"status"`
	Body        string          `yaml:"body" json:"body"`
	ContentType string          `yaml:"content_type" json:"content_type"`
}

type filePolicy struct {
	Algorithm string `yaml:"algorithm" json:"algorithm"`
	Limit     *int64 `yaml:"limit" json:"limit"`
	Period    string `yaml:"period" json:"period"`
	Burst     int64  `yaml:"burst" json:"burst"`
}

type fileCondition struct {
	Not     bool        `yaml:"not" json:"not"`
	Method  []string    `yaml:"method" json:"method"`
	Path    *filePath   `yaml:"path" json:"path"`
	Header  *fileHeader `yaml:"header" json:"header"`
	IP      []string    `yaml:"ip" json:"ip"`
	Country []string    `yaml:"country" json:"country"`
}

type filePath struct {
	Exact  *string `yaml:"exact" json:"exact"`
	Prefix *string `yaml:"prefix" json:"prefix"`
	Glob   *string `yaml:"glob" json:"glob"`
}

type fileHeader struct {
	Name    string  `yaml:"name" json:"name"`
	Equals  *string `yaml:"equals" json:"equals"`
	Present bool    `yaml:"present" json:"present"`
	Regex   *string `yaml:"regex" json:"regex"`
}

// ParseRules parses a rules file, JSON when its first non-blank byte is '{'
// and YAML otherwise. Parsing is strict: an unknown field is an error, and
// every error names the rule (its index and name) and the field. The
// result still goes through [Middleware.SetRules] or [New], which check
// what needs the middleware's configuration (CountryIn needs
// Config.Country).
//
// The format, in YAML:
//
//	rules:
//	  - name: login            # unique; letters, digits, - _ .
//	    when:                  # all must hold; each may have not: true
//	      - method: [POST]
//	      - path: {prefix: /api/login}   # or exact: / glob:
//	      - header: {name: User-Agent, regex: "(?i)curl"}  # or equals: / present: true
//	      - ip: [10.0.0.0/8]
//	        not: true
//	      - country: [RU]
//	    group_by: [ip, host]   # ip host method path header:N query:N cookie:N
//	    policy: {algorithm: fixed_window, limit: 5, period: 1m}  # burst: for buckets
//	    action: block          # block (default), monitor or shadow
//	    status: 429            # block: 4xx/5xx, default 429; shadow: 2xx, default 200
//	    body: "slow down\n"
//	    content_type: text/plain
//
// The algorithms are fixed_window (the default), sliding_window, gcra,
// token_bucket, leaky_bucket and sliding_log.
func ParseRules(data []byte) ([]Rule, error) {
	if len(data) > maxRulesFile {
		return nil, fmt.Errorf("%w: rules file is %d bytes, more than %d", ErrInvalidConfig, len(data), maxRulesFile)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return parseJSON(data)
	}
	return parseYAML(data)
}

// LoadRules reads and parses the rules file at path with [ParseRules].
func LoadRules(path string) ([]Rule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRulesFile+1))
	if err != nil {
		return nil, err
	}
	rules, err := ParseRules(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return rules, nil
}

func parseJSON(data []byte) ([]Rule, error) {
	var top struct {
		Rules []json.RawMessage `json:"rules"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the rules object", ErrInvalidConfig)
	}
	rules := make([]Rule, 0, len(top.Rules))
	for i, raw := range top.Rules {
		var named struct {
			Name any `json:"name"`
		}
		_ = json.Unmarshal(raw, &named)
		var fr fileRule
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&fr); err != nil {
			return nil, ruleError(i, named.Name, jsonField(err))
		}
		r, err := fr.rule()
		if err != nil {
			return nil, ruleError(i, fr.Name, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// jsonField rewords a JSON decoding error to name the field.
func jsonField(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: a JSON %s where %s is wanted", te.Field, te.Value, te.Type)
	}
	if s, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("%s: unknown field", s)
	}
	return err
}

func parseYAML(data []byte) ([]Rule, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: more than one YAML document", ErrInvalidConfig)
	}
	var file fileRules
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&file); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		return nil, yamlTypeError(&root, te)
	}
	ruleNodes := yamlRuleNodes(&root)
	rules := make([]Rule, 0, len(file.Rules))
	for i := range file.Rules {
		r, err := file.Rules[i].rule()
		if err != nil {
			if i < len(ruleNodes) {
				err = fmt.Errorf("line %d: %w", ruleNodes[i].Line, err)
			}
			return nil, ruleError(i, file.Rules[i].Name, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// yamlRuleNodes returns the items of the top-level "rules" sequence.
func yamlRuleNodes(root *yaml.Node) []*yaml.Node {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "rules" && doc.Content[i+1].Kind == yaml.SequenceNode {
			return doc.Content[i+1].Content
		}
	}
	return nil
}

// yamlTypeError rewrites the messages of a strict decoding error ("line 7:
// field limt not found in type ...", "line 9: cannot unmarshal !!str
// `many` into int64") to name the rule and the field path, found in the
// document's nodes by line and value.
func yamlTypeError(root *yaml.Node, te *yaml.TypeError) error {
	rules := yamlRuleNodes(root)
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		line, msg, val := splitYAMLError(e)
		where := ""
		for i, rn := range rules {
			if rn.Kind != yaml.MappingNode && rn.Line == line {
				where = fmt.Sprintf("rules[%d]: line %d: ", i, line)
				break
			}
			if p := yamlPath(rn, line, val, ""); p != "" {
				where = fmt.Sprintf("rule %q (rules[%d]): line %d: %s: ", yamlName(rn), i, line, p)
				break
			}
		}
		if where == "" {
			where = fmt.Sprintf("line %d: ", line)
			if msg == "unknown field" {
				where += val + ": "
			}
		}
		msgs = append(msgs, where+msg)
	}
	return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(msgs, "; "))
}

// splitYAMLError splits one yaml.v3 type error message into its line, the
// message and the value it is about (a field name or a scalar).
func splitYAMLError(e string) (line int, msg, val string) {
	msg = e
	if rest, ok := strings.CutPrefix(e, "line "); ok {
		if n, m, ok := strings.Cut(rest, ": "); ok {
			if _, err := fmt.Sscan(n, &line); err == nil {
				msg = m
			}
		}
	}
	if f, ok := strings.CutPrefix(msg, "field "); ok {
		if f, _, ok := strings.Cut(f, " not found in type"); ok {
			return line, "unknown field", f
		}
	}
	if _, rest, ok := strings.Cut(msg, "`"); ok {
		if v, _, ok := strings.Cut(rest, "`"); ok {
			val = v
		}
	}
	return line, msg, val
}

// yamlPath returns the path (policy.limit, when[1].path.exact) under n of
// the key or scalar at line whose value is val ("" matches any; a value
// ending in "..." is a truncated one), or "".
func yamlPath(n *yaml.Node, line int, val, prefix string) string {
	same := func(m *yaml.Node) bool {
		if m.Line != line {
			return false
		}
		if v, ok := strings.CutSuffix(val, "..."); ok {
			return strings.HasPrefix(m.Value, v)
		}
		return val == "" || m.Value == val
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if prefix != "" {
				p = prefix + "." + k.Value
			}
			if same(k) || v.Kind == yaml.ScalarNode && same(v) {
				return p
			}
			if r := yamlPath(v, line, val, p); r != "" {
				return r
			}
		}
	case yaml.SequenceNode:
		for j, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", prefix, j)
			if c.Kind == yaml.ScalarNode && same(c) {
				return p
			}
			if r := yamlPath(c, line, val, p); r != "" {
				return r
			}
		}
	}
	return ""
}

// yamlName finds a rule's name in its node, for error messages.
func yamlName(node *yaml.Node) string {
	if node.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == "name" {
			return node.Content[i+1].Value
		}
	}
	return ""
}

func ruleError(i int, name any, err error) error {
	if s, ok := name.(string); ok && s != "" {
		return fmt.Errorf("%w: rule %q (rules[%d]): %w", ErrInvalidConfig, s, i, err)
	}
	return fmt.Errorf("%w: rules[%d]: %w", ErrInvalidConfig, i, err)
}

// rule converts a decoded rule; errors name the field.
func (fr *fileRule) rule() (Rule, error) {
	r := Rule{Name: fr.Name, GroupBy: fr.GroupBy}
	if fr.Name == "" {
		return r, errors.New("name: missing")
	}
	if fr.Policy == nil {
		return r, errors.New("policy: missing")
	}
	p, err := fr.Policy.policy()
	if err != nil {
		return r, err
	}
	r.Policy = p
	switch fr.Action {
	case "", "block":
		r.Action.Kind = Block
	case "monitor":
		r.Action.Kind = Monitor
	case "shadow":
		r.Action.Kind = Shadow
	default:
		return r, fmt.Errorf("action: %q is not block, monitor or shadow", fr.Action)
	}
	r.Action.Status, r.Action.Body, r.Action.ContentType = fr.Status, fr.Body, fr.ContentType
	if err := checkAction(&r.Action); err != nil {
		return r, err
	}
	for i := range fr.When {
		c, err := fr.When[i].condition()
		if err != nil {
			return r, fmt.Errorf("when[%d].%w", i, err)
		}
		r.When = append(r.When, c)
	}
	for i, s := range fr.GroupBy {
		if _, err := parseCharacteristic(s); err != nil {
			return r, fmt.Errorf("group_by[%d]: %w", i, err)
		}
	}
	return r, nil
}

func (fp *filePolicy) policy() (actorlimit.Policy, error) {
	var p actorlimit.Policy
	name := fp.Algorithm
	if name == "" {
		name = "fixed_window"
	}
	alg, ok := algorithms[name]
	if !ok {
		return p, fmt.Errorf("policy.algorithm: %q is unknown", fp.Algorithm)
	}
	if fp.Limit == nil {
		return p, errors.New("policy.limit: missing")
	}
	d, err := time.ParseDuration(fp.Period)
	if err != nil {
		return p, fmt.Errorf("policy.period: %q is not a duration such as 30s or 1m", fp.Period)
	}
	p = actorlimit.Policy{Algorithm: alg, Limit: *fp.Limit, Period: d, Burst: fp.Burst}
	return p, checkPolicy(p)
}

// condition converts one decoded condition; exactly one kind must be set.
// Errors start with the field name, after "when[i].".
func (fc *fileCondition) condition() (Condition, error) {
	var c Condition
	n := 0
	for _, set := range []bool{fc.Method != nil, fc.Path != nil, fc.Header != nil, fc.IP != nil, fc.Country != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return c, errors.New("condition: exactly one of method, path, header, ip, country is needed")
	}
	switch {
	case fc.Method != nil:
		c = Method(fc.Method...)
	case fc.Path != nil:
		var err error
		if c, err = fc.Path.condition(); err != nil {
			return c, err
		}
	case fc.Header != nil:
		var err error
		if c, err = fc.Header.condition(); err != nil {
			return c, err
		}
	case fc.IP != nil:
		ps := make([]netip.Prefix, len(fc.IP))
		for i, s := range fc.IP {
			p, err := parsePrefix(s)
			if err != nil {
				return c, fmt.Errorf("ip[%d]: %q is not an address or CIDR", i, s)
			}
			ps[i] = p
		}
		c = ClientIPIn(ps...)
	case fc.Country != nil:
		c = CountryIn(fc.Country...)
	}
	if fc.Not {
		c = c.Not()
	}
	return c, c.check(true) // Config.Country is checked by SetRules
}

func (fp *filePath) condition() (Condition, error) {
	switch {
	case fp.Exact != nil && fp.Prefix == nil && fp.Glob == nil:
		return PathExact(*fp.Exact), nil
	case fp.Prefix != nil && fp.Exact == nil && fp.Glob == nil:
		return PathPrefix(*fp.Prefix), nil
	case fp.Glob != nil && fp.Exact == nil && fp.Prefix == nil:
		return PathGlob(*fp.Glob), nil
	}
	return Condition{}, errors.New("path: exactly one of exact, prefix, glob is needed")
}

func (fh *fileHeader) condition() (Condition, error) {
	if fh.Name == "" || !validToken(fh.Name) {
		return Condition{}, fmt.Errorf("header.name: %q is not a header name", fh.Name)
	}
	switch {
	case fh.Equals != nil && !fh.Present && fh.Regex == nil:
		return HeaderEquals(fh.Name, *fh.Equals), nil
	case fh.Present && fh.Equals == nil && fh.Regex == nil:
		return HeaderPresent(fh.Name), nil
	case fh.Regex != nil && fh.Equals == nil && !fh.Present:
		re, err := regexp.Compile(*fh.Regex)
		if err != nil {
			return Condition{}, fmt.Errorf("header.regex: %w", err)
		}
		return HeaderRegex(fh.Name, re), nil
	}
	return Condition{}, errors.New("header: exactly one of equals, present: true, regex is needed")
}

// parsePrefix parses a CIDR or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
