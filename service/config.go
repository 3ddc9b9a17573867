package service

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"gopkg.in/yaml.v3"

	"github.com/actorlimit/actorlimit"
)

// ErrConfig is wrapped by every error of Load and Parse: a configuration
// that cannot be used. The error is a *ConfigError that says where.
var ErrConfig = errors.New("service: invalid configuration")

// ConfigError says what is wrong with a configuration file and where: the
// file, and the line and column of the offending YAML node (0 when the
// error is about the whole file).
type ConfigError struct {
	File         string
	Line, Column int
	Msg          string
}

// Error returns "file:line:column: message".
func (e *ConfigError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// Unit is envoy ratelimit's unit of a rate_limit: the window of its fixed
// window, aligned to the Unix epoch. A month is 30 days and a year 365, as
// envoy ratelimit counts them.
type Unit = rlsv3.RateLimitResponse_RateLimit_Unit

// unitSeconds returns the length of u in seconds, or 0 for an unknown unit.
func unitSeconds(u Unit) int64 {
	switch u {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return 1
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return 60
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return 3600
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return 86400
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * 86400
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * 86400
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * 86400
	}
	return 0
}

// Rule is one rate_limit of a configuration, with the descriptor's flags.
// It is immutable once loaded.
type Rule struct {
	// Domain is the rule's domain; Path its descriptor's keys and values
	// from the file, envoy ratelimit's stat key without the domain
	// ("key_value.key2"): a metric label, holding no client's value.
	Domain, Path string
	// Name and Replaces are envoy ratelimit's: a rule whose Name another
	// matched rule of the request Replaces is not applied.
	Name     string
	Replaces []string
	// Unit and RequestsPerUnit are the file's; Unit is UNKNOWN for a rule
	// with a Period that is no unit, or an unlimited one.
	Unit            Unit
	RequestsPerUnit uint32
	// Unlimited rules answer OK, with no limit and nothing counted.
	Unlimited bool
	// ShadowMode answers OK where the rule would deny; metrics say so.
	ShadowMode bool
	// QuotaMode answers a descriptor over its limit OK, with its limit and
	// remaining, and leaves the overall code alone, as envoy ratelimit's
	// quota_mode does.
	QuotaMode bool
	// DetailedMetric and ValueToMetric put the request's values in the
	// metric label (bounded: see Options.MaxDetailedSeries).
	DetailedMetric, ValueToMetric bool
	// Policy is what the limiter applies: envoy ratelimit's fixed window of
	// one Unit by default, or the extensions' algorithm, period and burst.
	Policy actorlimit.Policy
	// Extended reports whether the rule uses an extension (algorithm,
	// period or burst); such a rule's duration_until_reset is the
	// limiter's, not a whole unit's.
	Extended bool

	line  int
	limit *rlsv3.RateLimitResponse_RateLimit // the answers' current_limit, made once
}

// currentLimit returns the rule's current_limit for a status.
func (r *Rule) currentLimit() *rlsv3.RateLimitResponse_RateLimit {
	if r.limit != nil {
		return r.limit
	}
	return &rlsv3.RateLimitResponse_RateLimit{Name: r.Name, RequestsPerUnit: r.RequestsPerUnit, Unit: r.Unit}
}

// Config is a loaded configuration: envoy ratelimit's domains and their
// descriptor trees. It is immutable and safe for concurrent use.
type Config struct {
	domains map[string]*node
	// Files lists the files loaded, in order; Source is their text,
	// concatenated with "---" between files (what /rlconfig shows).
	Files  []string
	source []byte
	rules  int
	// texts are the files' contents, in Files' order (for RedactedSource).
	texts [][]byte
	// secret holds, per domain, the keys a descriptor says secret: true of.
	secret map[string]map[string]bool
	// merge: a domain may be in several files (LoadOptions.MergeDomains).
	merge bool
}

// Rules returns how many rate_limit entries the configuration holds.
func (c *Config) Rules() int { return c.rules }

// Source returns the configuration files' text, each preceded by a comment
// naming its file.
func (c *Config) Source() []byte { return c.source }

// Domains returns the configuration's domains, sorted.
func (c *Config) Domains() []string {
	out := make([]string, 0, len(c.domains))
	for d := range c.domains {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// node is one level of a domain's descriptor tree.
type node struct {
	children map[string]*node // by "key" or "key_value", as envoy ratelimit files them
	// wildcards are the keys of children ending in '*', in file order.
	wildcards []string
	// longest is the length of the longest key of children.
	longest int
	rule    *Rule
	// shareThreshold: requests matched through this wildcard share one
	// counter, the wildcard's (pattern is the value part, with its '*').
	shareThreshold bool
	pattern        string
	valueToMetric  bool
}

// Load reads a configuration from path: one YAML file, or every *.yaml and
// *.yml file of a directory (not its subdirectories, nor names starting
// with '.', so that a Kubernetes ConfigMap's mount is read as its files),
// in name order, each with one domain. A domain in two files is an error.
func Load(path string) (*Config, error) { return LoadWith(path, LoadOptions{}) }

// LoadOptions are the choices of LoadWith.
type LoadOptions struct {
	// MergeDomains lets a domain be in several files: each one's
	// descriptors are added to the domain's (envoy ratelimit's
	// MERGE_DOMAIN_CONFIG). A descriptor in two files is still an error.
	MergeDomains bool
}

// LoadWith is Load with o's choices.
func LoadWith(path string, o LoadOptions) (*Config, error) {
	files, err := configFiles(path)
	if err != nil {
		return nil, err
	}
	type file struct {
		name string
		data []byte
	}
	var fs []file
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, &ConfigError{File: name, Msg: err.Error()}
		}
		fs = append(fs, file{name, data})
	}
	c := newConfig()
	c.merge = o.MergeDomains
	for _, f := range fs {
		if err := c.add(f.name, f.data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// configFiles returns the files Load reads for path.
func configFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &ConfigError{File: path, Msg: err.Error()}
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, &ConfigError{File: path, Msg: err.Error()}
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		full := filepath.Join(path, name)
		if st, err := os.Stat(full); err != nil || st.IsDir() { // follows a ConfigMap's symlinks
			continue
		}
		out = append(out, full)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, &ConfigError{File: path, Msg: "the directory holds no *.yaml or *.yml file"}
	}
	return out, nil
}

// Parse reads a configuration from YAML files' contents, given in order
// with their names (used in errors); Load reads them from disk.
func Parse(files map[string][]byte) (*Config, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	c := newConfig()
	for _, n := range names {
		if err := c.add(n, files[n]); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func newConfig() *Config {
	return &Config{domains: map[string]*node{}, secret: map[string]map[string]bool{}}
}

// add loads one file's domain into c.
func (c *Config) add(file string, data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return yamlError(file, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &ConfigError{File: file, Msg: "config file cannot have empty domain"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nodeErr(file, root, "the file must be a mapping with domain and descriptors")
	}
	var domain string
	var descs *yaml.Node
	err := eachField(file, root, "the file", func(k, v *yaml.Node) error {
		switch k.Value {
		case "domain":
			s, err := scalar(file, v, "domain")
			domain = s
			return err
		case "descriptors":
			descs = v
			return nil
		case "rate_limit_quota": // the quota service's rules (package quota)
			return nil
		}
		return unknownField(file, k, "the file", "domain, descriptors, rate_limit_quota")
	})
	if err != nil {
		return err
	}
	if domain == "" {
		return nodeErr(file, root, "config file cannot have empty domain")
	}
	top, dup := c.domains[domain]
	switch {
	case dup && !c.merge:
		return nodeErr(file, root, fmt.Sprintf("duplicate domain %q in config file (every domain is in one file, unless merged: MERGE_DOMAIN_CONFIG, -merge-domains)", domain))
	case !dup:
		top = &node{children: map[string]*node{}}
	}
	if err := c.loadDescriptors(file, domain, "", top, descs); err != nil {
		return err
	}
	c.domains[domain] = top
	c.Files = append(c.Files, file)
	c.texts = append(c.texts, data)
	var b bytes.Buffer
	b.Write(c.source)
	if len(c.source) > 0 {
		b.WriteString("---\n")
	}
	fmt.Fprintf(&b, "# %s\n", file)
	b.Write(data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		b.WriteByte('\n')
	}
	c.source = b.Bytes()
	return nil
}

// loadDescriptors loads the sequence n of descriptors under parent.
func (c *Config) loadDescriptors(file, domain, parentPath string, parent *node, n *yaml.Node) error {
	if n == nil || n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return nodeErr(file, n, "descriptors must be a list")
	}
	for _, d := range n.Content {
		if d.Kind != yaml.MappingNode {
			return nodeErr(file, d, "a descriptor must be a mapping")
		}
		var (
			key, value                                             string
			rl, children                                           *yaml.Node
			shadow, quota, detailed, valueToMetric, shareThreshold bool
			secret                                                 bool
		)
		err := eachField(file, d, "a descriptor", func(k, v *yaml.Node) error {
			var err error
			switch k.Value {
			case "key":
				key, err = scalar(file, v, "key")
			case "value":
				value, err = scalar(file, v, "value")
			case "rate_limit":
				rl = v
			case "descriptors":
				children = v
			case "shadow_mode":
				shadow, err = boolean(file, v, "shadow_mode")
			case "quota_mode":
				quota, err = boolean(file, v, "quota_mode")
			case "detailed_metric":
				detailed, err = boolean(file, v, "detailed_metric")
			case "value_to_metric":
				valueToMetric, err = boolean(file, v, "value_to_metric")
			case "share_threshold":
				shareThreshold, err = boolean(file, v, "share_threshold")
			case "secret":
				secret, err = boolean(file, v, "secret (an actorlimitd extension)")
			default:
				return unknownField(file, k, "a descriptor", "key, value, rate_limit, descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, and the extension secret")
			}
			return err
		})
		if err != nil {
			return err
		}
		if key == "" {
			return nodeErr(file, d, "descriptor has empty key")
		}
		if secret {
			if c.secret[domain] == nil {
				c.secret[domain] = map[string]bool{}
			}
			c.secret[domain][key] = true
		}
		final := key
		if value != "" {
			final += "_" + value
		}
		path := final
		if parentPath != "" {
			path = parentPath + "." + final
		}
		if _, dup := parent.children[final]; dup {
			return nodeErr(file, d, fmt.Sprintf("duplicate descriptor composite key '%s.%s'", domain, path))
		}
		wild := strings.HasSuffix(final, "*")
		if shareThreshold && !wild {
			return nodeErr(file, d, fmt.Sprintf("share_threshold can only be used with wildcard values (ending with '*'), but found key '%s'", final))
		}
		child := &node{children: map[string]*node{}, shareThreshold: shareThreshold, valueToMetric: valueToMetric}
		if shareThreshold {
			child.pattern = strings.TrimPrefix(final, key+"_")
		}
		if rl != nil && rl.Tag != "!!null" {
			r, err := parseRule(file, rl)
			if err != nil {
				return err
			}
			r.Domain, r.Path = domain, path
			r.ShadowMode, r.QuotaMode, r.DetailedMetric, r.ValueToMetric = shadow, quota, detailed, valueToMetric
			child.rule = r
			c.rules++
		}
		if wild {
			parent.wildcards = append(parent.wildcards, final)
		}
		if err := c.loadDescriptors(file, domain, path, child, children); err != nil {
			return err
		}
		parent.children[final] = child
		parent.longest = max(parent.longest, len(final))
	}
	return nil
}

// parseRule reads a rate_limit mapping.
func parseRule(file string, n *yaml.Node) (*Rule, error) {
	if n.Kind != yaml.MappingNode {
		return nil, nodeErr(file, n, "rate_limit must be a mapping")
	}
	r := &Rule{line: n.Line}
	var (
		unit, period    string
		unitNode        *yaml.Node
		periodNode      *yaml.Node
		haveAlgo        bool
		burst           int64
		haveRPU         bool
		replacesNode    *yaml.Node
		algorithmNode   *yaml.Node
		requestsPerUnit uint64
	)
	err := eachField(file, n, "rate_limit", func(k, v *yaml.Node) error {
		var err error
		switch k.Value {
		case "unit":
			unitNode = v
			unit, err = scalar(file, v, "unit")
		case "requests_per_unit":
			haveRPU = true
			requestsPerUnit, err = unsigned(file, v, "requests_per_unit", math.MaxUint32)
		case "unlimited":
			r.Unlimited, err = boolean(file, v, "unlimited")
		case "name":
			r.Name, err = scalar(file, v, "name")
		case "replaces":
			replacesNode = v
		case "algorithm":
			algorithmNode, haveAlgo = v, true
			var s string
			if s, err = scalar(file, v, "algorithm"); err == nil {
				if e := r.Policy.Algorithm.UnmarshalText([]byte(s)); e != nil {
					msg := e.Error()
					if i := strings.Index(msg, "unknown algorithm"); i >= 0 {
						msg = msg[i:]
					}
					err = nodeErr(file, v, "algorithm (an actorlimitd extension): "+msg)
				}
			}
		case "period":
			periodNode = v
			period, err = scalar(file, v, "period")
		case "burst":
			var b uint64
			b, err = unsigned(file, v, "burst", math.MaxInt64)
			burst = int64(b)
		default:
			return unknownField(file, k, "rate_limit", "unit, requests_per_unit, unlimited, name, replaces, and the extensions algorithm, period, burst")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	r.RequestsPerUnit = uint32(requestsPerUnit)
	if replacesNode != nil && replacesNode.Tag != "!!null" {
		if replacesNode.Kind != yaml.SequenceNode {
			return nil, nodeErr(file, replacesNode, "replaces must be a list of {name: ...}")
		}
		for _, e := range replacesNode.Content {
			var name string
			if e.Kind != yaml.MappingNode {
				return nil, nodeErr(file, e, "a replaces entry must be a mapping {name: ...}")
			}
			err := eachField(file, e, "a replaces entry", func(k, v *yaml.Node) error {
				if k.Value != "name" {
					return unknownField(file, k, "a replaces entry", "name")
				}
				var err error
				name, err = scalar(file, v, "name")
				return err
			})
			if err != nil {
				return nil, err
			}
			if name == "" {
				return nil, nodeErr(file, e, "should not have an empty replaces entry")
			}
			if name == r.Name {
				return nil, nodeErr(file, e, "replaces should not contain name of same descriptor")
			}
			r.Replaces = append(r.Replaces, name)
		}
	}
	if u, ok := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unit)]; ok && u != 0 {
		r.Unit = Unit(u)
	} else if unit != "" || (periodNode == nil && !r.Unlimited) {
		at := n
		if unitNode != nil {
			at = unitNode
		}
		return nil, nodeErr(file, at, fmt.Sprintf("invalid rate limit unit '%s' (second, minute, hour, day, week, month or year)", unit))
	}
	if r.Unlimited {
		if unit != "" {
			return nil, nodeErr(file, unitNode, "should not specify rate limit unit when unlimited")
		}
		if periodNode != nil || haveAlgo || burst != 0 {
			return nil, nodeErr(file, n, "an unlimited rate_limit takes no algorithm, period or burst")
		}
		return r, nil
	}
	r.Policy.Limit = int64(r.RequestsPerUnit)
	r.Policy.Period = time.Duration(unitSeconds(r.Unit)) * time.Second
	if periodNode != nil {
		if unit != "" {
			return nil, nodeErr(file, periodNode, "give unit or period (an actorlimitd extension), not both")
		}
		d, err := time.ParseDuration(period)
		if err != nil || d <= 0 {
			return nil, nodeErr(file, periodNode, fmt.Sprintf("period (an actorlimitd extension) %q is not a positive duration such as 15s or 1m30s", period))
		}
		r.Policy.Period = d
		for u := range rlsv3.RateLimitResponse_RateLimit_Unit_name {
			if s := unitSeconds(Unit(u)); s > 0 && time.Duration(s)*time.Second == d {
				r.Unit = Unit(u)
			}
		}
	}
	r.Policy.Burst = burst
	r.Extended = haveAlgo || periodNode != nil || burst != 0
	if !haveRPU && !r.Unlimited {
		// envoy ratelimit reads a missing requests_per_unit as 0: every hit denied.
		r.Policy.Limit = 0
	}
	if err := r.Policy.Validate(); err != nil {
		at := n
		if algorithmNode != nil {
			at = algorithmNode
		}
		return nil, nodeErr(file, at, "rate_limit: "+err.Error())
	}
	r.limit = r.currentLimit()
	return r, nil
}

// eachField calls f for each key and value of the mapping n, in order.
func eachField(file string, n *yaml.Node, what string, f func(k, v *yaml.Node) error) error {
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nodeErr(file, k, what+": a key must be a string")
		}
		if seen[k.Value] {
			return nodeErr(file, k, fmt.Sprintf("%q is given twice in %s", k.Value, what))
		}
		seen[k.Value] = true
		if err := f(k, v); err != nil {
			return err
		}
	}
	return nil
}

func unknownField(file string, k *yaml.Node, what, known string) error {
	return nodeErr(file, k, fmt.Sprintf("unknown field %q in %s (known: %s)", k.Value, what, known))
}

func scalar(file string, v *yaml.Node, what string) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", nodeErr(file, v, what+" must be a scalar")
	}
	if v.Tag == "!!null" {
		return "", nil
	}
	return v.Value, nil
}

func boolean(file string, v *yaml.Node, what string) (bool, error) {
	var b bool
	if v.Kind != yaml.ScalarNode || v.Decode(&b) != nil {
		return false, nodeErr(file, v, what+" must be true or false")
	}
	return b, nil
}

func unsigned(file string, v *yaml.Node, what string, max uint64) (uint64, error) {
	if v.Kind != yaml.ScalarNode {
		return 0, nodeErr(file, v, what+" must be a whole number")
	}
	u, err := strconv.ParseUint(v.Value, 10, 64)
	if err != nil || u > max {
		return 0, nodeErr(file, v, fmt.Sprintf("%s must be a whole number from 0 to %d, not %q", what, max, v.Value))
	}
	return u, nil
}

func nodeErr(file string, n *yaml.Node, msg string) error {
	if n == nil {
		return &ConfigError{File: file, Msg: msg}
	}
	return &ConfigError{File: file, Line: n.Line, Column: n.Column, Msg: msg}
}

// yamlError turns a YAML syntax error into a ConfigError with its line.
func yamlError(file string, err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	var line int
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if l, e := strconv.Atoi(rest[:i]); e == nil {
				line, msg = l, strings.TrimSpace(rest[i+1:])
			}
		}
	}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if line > 0 {
		return &ConfigError{File: file, Line: line, Column: 1, Msg: msg}
	}
	return &ConfigError{File: file, Msg: msg}
}
