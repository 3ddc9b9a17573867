package httpadapter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/actorlimit/actorlimit"
)

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
	Secret      []string        `yaml:"secret" json:"secret"`
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
// every error says where (the line), which rule (its name, or its number
// when it has none) and which field, in the file's own terms. Every rule is
// checked as far as it can be without a middleware: names (valid, unique),
// policies (with [actorlimit.Policy.Validate]), conditions, grouping and
// action; [Middleware.SetRules] or [New] then check what needs the
// middleware's configuration (a country condition needs a country lookup)
// and refuse an empty set unless [Config.AllowNoRules]. Each rule's Source
// is its line.
//
// A file without a "rules" key (an empty file, only comments, "{}") is an
// error, as an empty or truncated file is more likely a mistake than a wish
// to remove every limit; "rules: []" says no rules.
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
//	    secret: [header:X-Api-Key]  # group_by values hashed (cookies, Authorization always are)
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
		return nil, fmt.Errorf("%w: the rules file is %d bytes, more than the %d allowed", ErrInvalidConfig, len(data), maxRulesFile)
	}
	return parseRules(data, "")
}

// LoadRules reads and parses the rules file at path with [ParseRules]; its
// errors, and the Source of each rule, start with path.
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
	if len(data) > maxRulesFile {
		// Only the first maxRulesFile+1 bytes were read: the size is the
		// file's, when it has one.
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > maxRulesFile {
			return nil, fmt.Errorf("%w: %s: the rules file is %d bytes, more than the %d allowed", ErrInvalidConfig, path, fi.Size(), maxRulesFile)
		}
		return nil, fmt.Errorf("%w: %s: the rules file is more than the %d bytes allowed", ErrInvalidConfig, path, maxRulesFile)
	}
	return parseRules(data, path)
}

// parseRules parses data, read from file ("" when unknown).
func parseRules(data []byte, file string) ([]Rule, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return parseJSON(data, file)
	}
	return parseYAML(data, file)
}

// errNoRulesKey is the error of a file without a "rules" key.
var errNoRulesKey = errors.New(`no "rules" key: the file is empty or is not a rules file (write "rules: []" for no rules)`)

// where says where in a rules file: "rules.yaml line 12", "line 12",
// "rules.yaml", or "" when nothing is known.
func where(file string, line int) string {
	switch {
	case line <= 0:
		return file
	case file == "":
		return fmt.Sprintf("line %d", line)
	}
	return fmt.Sprintf("%s line %d", file, line)
}

// fileError is an error of the file as a whole.
func fileError(file string, line int, err error) error {
	if w := where(file, line); w != "" {
		return fmt.Errorf("%w: %s: %w", ErrInvalidConfig, w, err)
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
}

// ruleError is an error of the i-th rule, named name (any: a JSON name
// may not be a string), at line of file.
func ruleError(file string, line, i int, name any, err error) error {
	who := fmt.Sprintf("rule #%d (it has no name)", i+1)
	if s, ok := name.(string); ok && s != "" {
		who = fmt.Sprintf("rule %q", s)
	}
	if w := where(file, line); w != "" {
		return fmt.Errorf("%w: %s: %s: %w", ErrInvalidConfig, w, who, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidConfig, who, err)
}

// convert turns the decoded rules, written at lines of file (0: unknown),
// into Rules, and checks that names are unique.
func convert(file string, frs []fileRule, lines []int) ([]Rule, error) {
	rules := make([]Rule, 0, len(frs))
	first := make(map[string]int, len(frs)) // the line of each name's first rule
	for i := range frs {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		r, err := frs[i].rule()
		if l, dup := first[r.Name]; err == nil && dup {
			err = fmt.Errorf("name: already the name of the rule at line %d", l)
		}
		if err != nil {
			return nil, ruleError(file, line, i, frs[i].Name, err)
		}
		first[r.Name] = line
		r.Source = where(file, line)
		rules = append(rules, r)
	}
	return rules, nil
}

// rule converts a decoded rule; errors name the field.
func (fr *fileRule) rule() (Rule, error) {
	r := Rule{Name: fr.Name, GroupBy: fr.GroupBy, Secret: fr.Secret}
	switch {
	case fr.Name == "":
		return r, errors.New("name: missing")
	case !validName(fr.Name):
		return r, fmt.Errorf("name: %q is not 1 to 64 letters, digits, '-', '_' or '.'", fr.Name)
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
	chars := make([]characteristic, len(fr.GroupBy))
	for i, s := range fr.GroupBy {
		c, err := parseCharacteristic(s)
		if err != nil {
			return r, fmt.Errorf("group_by[%d]: %w", i, err)
		}
		chars[i] = c
	}
	return r, markSecrets(chars, fr.Secret)
}

func (fp *filePolicy) policy() (actorlimit.Policy, error) {
	var p actorlimit.Policy
	var alg actorlimit.Algorithm // FixedWindow when not given
	if fp.Algorithm != "" {
		if err := alg.UnmarshalText([]byte(fp.Algorithm)); err != nil {
			return p, errors.New("policy.algorithm: " + strings.TrimPrefix(err.Error(), actorlimit.ErrInvalidArgument.Error()+": "))
		}
	}
	if fp.Limit == nil {
		return p, errors.New("policy.limit: missing")
	}
	d, err := time.ParseDuration(fp.Period)
	if err != nil {
		return p, fmt.Errorf("policy.period: %q is not a duration such as 30s or 1m", fp.Period)
	}
	p = actorlimit.Policy{Algorithm: alg, Limit: *fp.Limit, Period: d, Burst: fp.Burst}
	return p, policyError(p.Validate())
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
	return c, c.check() // whether there is a country lookup, SetRules checks
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
