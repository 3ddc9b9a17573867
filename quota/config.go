package quota

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/actorlimit/actorlimit"
)

// Section is the top-level key of a configuration file that holds the
// quota rules of the file's domain, beside envoy ratelimit's domain and
// descriptors.
const Section = "rate_limit_quota"

// Action is what a bucket that no rule matches is answered.
type Action int

// The default actions.
const (
	// Abandon abandons the bucket: the Envoy applies its own
	// no_assignment_behavior, and reports the bucket again later.
	Abandon Action = iota
	// AllowAll assigns allow-all (a blanket rule).
	AllowAll
	// DenyAll assigns deny-all (a blanket rule).
	DenyAll
)

var actionNames = [...]string{Abandon: "abandon", AllowAll: "allow_all", DenyAll: "deny_all"}

// String returns the action's name in configuration files.
func (a Action) String() string {
	if a < 0 || int(a) >= len(actionNames) {
		return "Action(" + strconv.Itoa(int(a)) + ")"
	}
	return actionNames[a]
}

// ParseAction returns the action named s ("abandon", "allow_all" or
// "deny_all").
func ParseAction(s string) (Action, error) {
	for i, n := range actionNames {
		if n == s {
			return Action(i), nil
		}
	}
	return 0, fmt.Errorf("%w: action %q: want abandon, allow_all or deny_all", ErrInvalid, s)
}

// Defaults of a section's optional fields.
const (
	DefaultReportingInterval = time.Second
	DefaultTTLIntervals      = 3
	DefaultReserve           = 0.05
	DefaultBurstIntervals    = 0.05
	DefaultHysteresis        = 0.04
	DefaultMargin            = 0.1
)

// Rule is one bucket rule of a configuration: which bucket ids it matches
// and the fleet-wide limit of each. It is immutable once loaded.
type Rule struct {
	// Domain is the file's domain; Name the rule's name, or its match
	// written out ("name=checkout,tenant=*"): a metric label, holding no
	// client's value.
	Domain, Name string
	// Match is the bucket id's keys and values; a value "*" matches any.
	Match map[string]string
	// RequestsPerUnit per Unit (second, minute, hour, day) is the limit of
	// each bucket the rule matches, over the whole fleet.
	RequestsPerUnit uint32
	Unit            time.Duration
	// Algorithm is the library's algorithm the Envoys apply: token_bucket,
	// gcra and leaky_bucket are sent as a token bucket, fixed_window,
	// sliding_window and sliding_log as requests_per_time_unit.
	Algorithm actorlimit.Algorithm
	// ReportingInterval is the filter's reporting_interval, as the file
	// says; TTL the assignments' time to live.
	ReportingInterval, TTL time.Duration
	// Reserve is the fraction of the limit a newcomer gets at most until
	// its first report; BurstIntervals a token bucket's size, in reporting
	// intervals of its share; Hysteresis the relative change of a share
	// not worth sending.
	// Margin is the room given above a reported demand, relative.
	Reserve, BurstIntervals, Hysteresis, Margin float64

	order, wildcards int
	keys             string
}

// Rate returns the rule's limit in requests per second.
func (r *Rule) Rate() float64 { return float64(r.RequestsPerUnit) / r.Unit.Seconds() }

// TokenBucket reports whether the rule's assignments are token buckets
// (else requests_per_time_unit).
func (r *Rule) TokenBucket() bool { return !r.Algorithm.Windowed() }

// division returns the division configuration of a bucket of r.
func (r *Rule) division() DivisionConfig {
	rate := r.Rate()
	return DivisionConfig{Limit: rate, TTL: r.TTL, Reserve: rate * r.Reserve, Hysteresis: r.Hysteresis, Margin: r.Margin}
}

// domainRules is one domain's section.
type domainRules struct {
	def Action
	// byKeys holds the rules by their sorted key set, most specific first
	// (fewest wildcards), then in file order.
	byKeys map[string][]*Rule
	rules  []*Rule
}

// Config is the quota rules of every domain. It is immutable and safe for
// concurrent use.
type Config struct {
	domains map[string]*domainRules
	// Default is the action of a domain with no rate_limit_quota section.
	Default Action
}

// Rules returns every rule, by domain then file order.
func (c *Config) Rules() []*Rule {
	var out []*Rule
	names := make([]string, 0, len(c.domains))
	for d := range c.domains {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		out = append(out, c.domains[d].rules...)
	}
	return out
}

// Match returns the rule of the bucket id in domain, or nil and the action
// for a bucket no rule matches. A rule matches an id with exactly its
// keys, each value equal to the rule's or the rule's "*"; among the rules
// that match, the one with fewest "*" wins, then the first in the file.
func (c *Config) Match(domain string, id map[string]string) (*Rule, Action) {
	d := c.domains[domain]
	if d == nil {
		return nil, c.Default
	}
	for _, r := range d.byKeys[keySet(id)] {
		if r.matches(id) {
			return r, 0
		}
	}
	return nil, d.def
}

func (r *Rule) matches(id map[string]string) bool {
	for k, v := range r.Match {
		got, ok := id[k]
		if !ok || (v != "*" && v != got) {
			return false
		}
	}
	return true
}

// keySet returns the sorted keys of id joined by NUL.
func keySet(id map[string]string) string {
	keys := make([]string, 0, len(id))
	for k := range id {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, "\x00")
}

// Load reads the quota rules of the configuration at path: one YAML file,
// or every *.yaml and *.yml file of a directory (not its subdirectories,
// nor names starting with '.'), as actorlimitd reads its rules. Only the
// domain and rate_limit_quota keys are read; the rest is the rate limit
// service's.
func Load(path string) (*Config, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	files := map[string][]byte{}
	names := []string{path}
	if st.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		names = names[:0]
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
				continue
			}
			full := filepath.Join(path, n)
			if st, err := os.Stat(full); err != nil || st.IsDir() {
				continue
			}
			names = append(names, full)
		}
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		files[n] = b
	}
	return Parse(files)
}

// Parse reads the quota rules of configuration files' contents, by name
// (used in errors), in name order. A file without a rate_limit_quota
// section adds nothing.
func Parse(files map[string][]byte) (*Config, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	c := &Config{domains: map[string]*domainRules{}}
	for _, n := range names {
		if err := c.add(n, files[n]); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// fileErr is an error at a YAML node of a file.
func fileErr(file string, n *yaml.Node, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if n == nil {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, file, msg)
	}
	return fmt.Errorf("%w: %s:%d:%d: %s", ErrInvalid, file, n.Line, n.Column, msg)
}

func (c *Config) add(file string, data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fileErr(file, nil, "%v", err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil // the rate limit service says what is wrong
	}
	root := doc.Content[0]
	var domain string
	var section *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "domain":
			domain = root.Content[i+1].Value
		case Section:
			section = root.Content[i+1]
		}
	}
	if section == nil || section.Tag == "!!null" {
		return nil
	}
	if domain == "" {
		return fileErr(file, section, "%s needs the file's domain", Section)
	}
	if _, dup := c.domains[domain]; dup {
		return fileErr(file, section, "domain %q has a %s section in two files", domain, Section)
	}
	if section.Kind != yaml.MappingNode {
		return fileErr(file, section, "%s must be a mapping of default_action, reporting_interval, buckets", Section)
	}
	d := &domainRules{byKeys: map[string][]*Rule{}}
	interval := DefaultReportingInterval
	var buckets *yaml.Node
	err := fields(file, section, Section, func(k, v *yaml.Node) error {
		var err error
		switch k.Value {
		case "default_action":
			if d.def, err = ParseAction(v.Value); err != nil {
				return fileErr(file, v, "default_action %q: want abandon, allow_all or deny_all", v.Value)
			}
		case "reporting_interval":
			interval, err = duration(file, v, "reporting_interval")
		case "buckets":
			buckets = v
		default:
			return fileErr(file, k, "unknown field %q in %s (known: default_action, reporting_interval, buckets)", k.Value, Section)
		}
		return err
	})
	if err != nil {
		return err
	}
	if buckets != nil && buckets.Tag != "!!null" {
		if buckets.Kind != yaml.SequenceNode {
			return fileErr(file, buckets, "buckets must be a list")
		}
		for i, b := range buckets.Content {
			r, err := parseBucketRule(file, b, domain, interval)
			if err != nil {
				return err
			}
			r.order = i
			for _, prev := range d.rules {
				if prev.keys == r.keys && equalMatch(prev.Match, r.Match) {
					return fileErr(file, b, "bucket rule %q matches the same ids as %q", r.Name, prev.Name)
				}
			}
			d.rules = append(d.rules, r)
			d.byKeys[r.keys] = append(d.byKeys[r.keys], r)
		}
	}
	for _, rs := range d.byKeys {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].wildcards < rs[j].wildcards })
	}
	c.domains[domain] = d
	return nil
}

func equalMatch(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// fields calls f for each key and value of the mapping n; a key given
// twice is an error.
func fields(file string, n *yaml.Node, what string, f func(k, v *yaml.Node) error) error {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return fileErr(file, k, "%q is given twice in %s", k.Value, what)
		}
		seen[k.Value] = true
		if err := f(k, v); err != nil {
			return err
		}
	}
	return nil
}

func duration(file string, v *yaml.Node, what string) (time.Duration, error) {
	d, err := time.ParseDuration(v.Value)
	if err != nil || d <= 0 || d > 24*time.Hour {
		return 0, fileErr(file, v, "%s %q: want a duration such as 1s, above 0 and at most 24h", what, v.Value)
	}
	return d, nil
}

func fraction(file string, v *yaml.Node, what string, lo, hi float64) (float64, error) {
	f, err := strconv.ParseFloat(v.Value, 64)
	if err != nil || !(f >= lo && f <= hi) {
		return 0, fileErr(file, v, "%s %q: want a number from %v to %v", what, v.Value, lo, hi)
	}
	return f, nil
}

var units = map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}

// parseBucketRule reads one entry of buckets.
func parseBucketRule(file string, n *yaml.Node, domain string, interval time.Duration) (*Rule, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fileErr(file, n, "a bucket rule must be a mapping")
	}
	r := &Rule{Domain: domain, Algorithm: actorlimit.TokenBucket, ReportingInterval: interval,
		TTL: DefaultTTLIntervals * interval, Reserve: DefaultReserve, BurstIntervals: DefaultBurstIntervals, Hysteresis: DefaultHysteresis, Margin: DefaultMargin}
	var match, limit *yaml.Node
	err := fields(file, n, "a bucket rule", func(k, v *yaml.Node) error {
		var err error
		switch k.Value {
		case "name":
			r.Name = v.Value
		case "match":
			match = v
		case "rate_limit":
			limit = v
		case "algorithm":
			if e := r.Algorithm.UnmarshalText([]byte(v.Value)); e != nil {
				msg := e.Error()
				if i := strings.Index(msg, "unknown algorithm"); i >= 0 {
					msg = msg[i:]
				}
				return fileErr(file, v, "algorithm: %s", msg)
			}
			if r.Algorithm == actorlimit.LeakyBucket || r.Algorithm == actorlimit.GCRA {
				r.Algorithm = actorlimit.TokenBucket // what an Envoy can apply
			}
		case "ttl":
			r.TTL, err = duration(file, v, "ttl")
		case "reserve":
			r.Reserve, err = fraction(file, v, "reserve", 0, 1)
		case "burst_intervals":
			r.BurstIntervals, err = fraction(file, v, "burst_intervals", 0, 100)
		case "hysteresis":
			r.Hysteresis, err = fraction(file, v, "hysteresis", 0, 0.5)
		case "margin":
			r.Margin, err = fraction(file, v, "margin", 0, 1)
		default:
			return fileErr(file, k, "unknown field %q in a bucket rule (known: name, match, rate_limit, algorithm, ttl, reserve, burst_intervals, hysteresis, margin)", k.Value)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if match == nil || match.Kind != yaml.MappingNode || len(match.Content) == 0 {
		return nil, fileErr(file, n, "a bucket rule needs match: a mapping of the bucket id's keys to values or \"*\"")
	}
	r.Match = map[string]string{}
	var parts []string
	if err := fields(file, match, "match", func(k, v *yaml.Node) error {
		if v.Kind != yaml.ScalarNode || k.Value == "" {
			return fileErr(file, v, "match %q: a key's value must be a string or \"*\"", k.Value)
		}
		r.Match[k.Value] = v.Value
		if v.Value == "*" {
			r.wildcards++
		}
		parts = append(parts, k.Value+"="+v.Value)
		return nil
	}); err != nil {
		return nil, err
	}
	sort.Strings(parts)
	r.keys = keySet(r.Match)
	if r.Name == "" {
		r.Name = strings.Join(parts, ",")
	}
	if limit == nil || limit.Kind != yaml.MappingNode {
		return nil, fileErr(file, n, "bucket rule %q needs rate_limit: {unit, requests_per_unit}", r.Name)
	}
	if err := fields(file, limit, "rate_limit", func(k, v *yaml.Node) error {
		switch k.Value {
		case "unit":
			u, ok := units[strings.ToLower(v.Value)]
			if !ok {
				return fileErr(file, v, "unit %q: want second, minute, hour or day", v.Value)
			}
			r.Unit = u
		case "requests_per_unit":
			u, err := strconv.ParseUint(v.Value, 10, 32)
			if err != nil || u == 0 {
				return fileErr(file, v, "requests_per_unit %q: want a whole number from 1 to %d", v.Value, math.MaxUint32)
			}
			r.RequestsPerUnit = uint32(u)
		default:
			return fileErr(file, k, "unknown field %q in rate_limit (known: unit, requests_per_unit)", k.Value)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if r.Unit == 0 || r.RequestsPerUnit == 0 {
		return nil, fileErr(file, limit, "bucket rule %q: rate_limit needs unit and requests_per_unit", r.Name)
	}
	if r.TTL < interval {
		return nil, fileErr(file, n, "bucket rule %q: ttl %v is shorter than the reporting_interval %v", r.Name, r.TTL, interval)
	}
	return r, nil
}
