package httpadapter

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/actorlimit/actorlimit"
)

// rule is a validated Rule, ready for the hot path.
type rule struct {
	name    string
	when    []Condition
	chars   []characteristic
	policy  actorlimit.Policy
	action  Action
	prefix  string // of every key, see key.go
	window  int64  // the policy's period in whole seconds, rounded up
	needsIP bool
	stats   *ruleStats
	logged  atomic.Bool // the limiter's refusal of a hit of this rule was logged
}

// ruleSet is the immutable set the hot path reads through an atomic
// pointer.
type ruleSet struct {
	rules []*rule
}

// SetRules replaces the rule set, atomically: a request sees either the old
// set or the new one. The counters of a rule live in the limiter under keys
// made of its name, policy and characteristics, so a rule whose name, policy
// and GroupBy did not change keeps counting where it was; a changed one
// starts afresh. Statistics are kept by rule name. Every rule is checked
// first, its policy with [actorlimit.Policy.Validate]; an empty set is an
// error unless [Config.AllowNoRules]. On error nothing changes, and the
// error names the rule (where it was written, for a rule from a file) and
// the field.
func (m *Middleware) SetRules(rules []Rule) error {
	if m.lim == nil {
		return errNotMade
	}
	return m.setRules(rules, true)
}

// setRules is SetRules; tests pass checkPolicies false to let a policy the
// limiter refuses reach it.
func (m *Middleware) setRules(rules []Rule, checkPolicies bool) error {
	if len(rules) == 0 && !m.noRules {
		return fmt.Errorf("%w: no rules: every request would pass unlimited (set Config.AllowNoRules if that is intended)", ErrInvalidConfig)
	}
	compiled := make([]*rule, 0, len(rules))
	seen := make(map[string]bool, len(rules))
	for i := range rules {
		r := &rules[i]
		ru, err := m.compile(r, checkPolicies)
		if err == nil && seen[ru.name] {
			err = errors.New("name: used by an earlier rule")
		}
		if err != nil {
			return setRulesError(r, i, err)
		}
		seen[ru.name] = true
		compiled = append(compiled, ru)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := make(map[string]*rule)
	if rs := m.rules.Load(); rs != nil {
		for _, ru := range rs.rules {
			old[ru.name] = ru
		}
	}
	stats := make(map[string]*ruleStats, len(compiled))
	for _, ru := range compiled {
		st := m.stats[ru.name]
		if st == nil {
			st = new(ruleStats)
		}
		ru.stats, stats[ru.name] = st, st
		if o := old[ru.name]; o != nil && o.prefix == ru.prefix {
			ru.logged.Store(o.logged.Load()) // the same rule: said once is enough
		}
	}
	m.stats = stats
	prev := m.rules.Swap(&ruleSet{rules: compiled})
	if prev != nil && m.log != nil {
		names := make([]string, len(compiled))
		for i, ru := range compiled {
			names[i] = ru.name
		}
		m.log.Info("httpadapter: rule set swapped", "rules", names, "previous", len(prev.rules))
	}
	return nil
}

// setRulesError words err, the error of rules[i], for the person who wrote
// the rule: where (Source, or the index of a rule built in Go), which rule,
// which field.
func setRulesError(r *Rule, i int, err error) error {
	who := fmt.Sprintf("rule %q (rules[%d])", r.Name, i)
	if r.Source != "" {
		who = fmt.Sprintf("%s: rule %q", r.Source, r.Name)
	}
	var nc *noCountryError
	if errors.As(err, &nc) {
		msg := fmt.Sprintf("%s uses a country condition (when[%d]) but this server has no country lookup", who, nc.when)
		if r.Source == "" {
			msg += " (Config.Country is nil)"
		}
		return fmt.Errorf("%w: %s", ErrInvalidConfig, msg)
	}
	return fmt.Errorf("%w: %s: %w", ErrInvalidConfig, who, err)
}

// noCountryError is compile's error for when[when], a country condition,
// when the middleware has no country lookup.
type noCountryError struct{ when int }

func (e *noCountryError) Error() string {
	return fmt.Sprintf("when[%d].country: this server has no country lookup", e.when)
}

// compile validates r and prepares it; errors name the field as the rules
// file does.
func (m *Middleware) compile(r *Rule, checkPolicy bool) (*rule, error) {
	if !validName(r.Name) {
		return nil, fmt.Errorf("name: %q is not 1 to 64 letters, digits, '-', '_' or '.'", r.Name)
	}
	ru := &rule{name: r.Name, policy: r.Policy, action: r.Action}
	if checkPolicy {
		if err := policyError(r.Policy.Validate()); err != nil {
			return nil, err
		}
	}
	if err := checkAction(&ru.action); err != nil {
		return nil, err
	}
	for i, c := range r.When {
		c.set = slices.Clone(c.set)
		c.prefixes = slices.Clone(c.prefixes)
		if err := c.check(); err != nil {
			return nil, fmt.Errorf("when[%d].%w", i, err)
		}
		if c.kind == condCountry && m.country == nil {
			return nil, &noCountryError{when: i}
		}
		ru.needsIP = ru.needsIP || c.needsIP()
		ru.when = append(ru.when, c)
	}
	for i, s := range r.GroupBy {
		c, err := parseCharacteristic(s)
		if err != nil {
			return nil, fmt.Errorf("group_by[%d]: %w", i, err)
		}
		if slices.Contains(ru.chars, c) {
			return nil, fmt.Errorf("group_by[%d]: %q given twice", i, s)
		}
		ru.needsIP = ru.needsIP || c.kind == charIP
		c.secret = secretByDefault(c)
		ru.chars = append(ru.chars, c)
	}
	if err := markSecrets(ru.chars, r.Secret); err != nil {
		return nil, err
	}
	ru.prefix = keyPrefix(ru.name, ru.policy, ru.chars)
	if len(ru.prefix) > maxPrefix {
		return nil, fmt.Errorf("group_by: the names given are too long: with them a counter's key would be more than %d bytes", actorlimit.MaxIDLength)
	}
	ru.window = ceilSeconds(ru.policy.Period)
	return ru, nil
}

// markSecrets marks the characteristics of chars that secret lists; it
// says which item of secret is not one of them, or not a header or query.
func markSecrets(chars []characteristic, secret []string) error {
	for i, s := range secret {
		c, err := parseCharacteristic(s)
		if err != nil {
			return fmt.Errorf("secret[%d]: %w", i, err)
		}
		if c.kind != charHeader && c.kind != charQuery && c.kind != charCookie {
			return fmt.Errorf("secret[%d]: %q: only header:NAME and query:NAME values are hashed on request (cookies always are)", i, s)
		}
		j := slices.IndexFunc(chars, func(g characteristic) bool { return g.kind == c.kind && g.name == c.name })
		if j < 0 {
			return fmt.Errorf("secret[%d]: %q is not in group_by", i, s)
		}
		chars[j].secret = true
	}
	return nil
}

// policyError rewords an error of [actorlimit.Policy.Validate] to name
// fields and algorithms as rules files do: "policy: burst is -1, negative".
func policyError(err error) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), actorlimit.ErrInvalidArgument.Error()+": ")
	return errors.New("policy: " + policyWords.Replace(msg))
}

// policyWords maps the Go names in the limiter's policy errors to the
// rules file's.
var policyWords = func() *strings.Replacer {
	pairs := []string{
		"Policy.Algorithm", "algorithm",
		"Policy.Limit", "limit",
		"Policy.Period", "period",
		"Policy.Burst", "burst",
	}
	for a := actorlimit.Algorithm(0); a.Known(); a++ {
		if text, err := a.MarshalText(); err == nil {
			pairs = append(pairs, a.String(), string(text))
		}
	}
	return strings.NewReplacer(pairs...)
}()

// checkAction validates a and fills in its defaults.
func checkAction(a *Action) error {
	switch a.Kind {
	case Block:
		if a.Status == 0 {
			a.Status = http.StatusTooManyRequests
		}
		if a.Status < 400 || a.Status > 599 {
			return fmt.Errorf("status: %d is not a 4xx or 5xx status for action block", a.Status)
		}
		if a.Body == "" {
			a.Body = DefaultBlockBody
		}
	case Shadow:
		if a.Status == 0 {
			a.Status = http.StatusOK
		}
		if a.Status < 200 || a.Status > 299 {
			return fmt.Errorf("status: %d is not a 2xx status for action shadow", a.Status)
		}
	case Monitor:
		if a.Status != 0 || a.Body != "" || a.ContentType != "" {
			return fmt.Errorf("status: action monitor never answers, it takes no status, body or content_type")
		}
		return nil
	default:
		return fmt.Errorf("action: %v is not block, monitor or shadow", a.Kind)
	}
	if a.ContentType == "" {
		a.ContentType = DefaultContentType
	}
	return nil
}

// matches reports whether every condition of ru holds for q.
func (ru *rule) matches(q *request) bool {
	for i := range ru.when {
		if !ru.when[i].match(q) {
			return false
		}
	}
	return true
}
