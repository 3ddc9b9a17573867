package httpadapter

import (
	"fmt"
	"net/http"
	"slices"
	"time"

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
// starts afresh. Statistics are kept by rule name. On error nothing
// changes.
func (m *Middleware) SetRules(rules []Rule) error {
	compiled := make([]*rule, 0, len(rules))
	seen := make(map[string]bool, len(rules))
	for i := range rules {
		ru, err := m.compile(&rules[i])
		if err != nil {
			return fmt.Errorf("%w: rule %q (rules[%d]): %w", ErrInvalidConfig, rules[i].Name, i, err)
		}
		if seen[ru.name] {
			return fmt.Errorf("%w: rule %q (rules[%d]): name: used by an earlier rule", ErrInvalidConfig, ru.name, i)
		}
		seen[ru.name] = true
		compiled = append(compiled, ru)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	stats := make(map[string]*ruleStats, len(compiled))
	for _, ru := range compiled {
		st := m.stats[ru.name]
		if st == nil {
			st = new(ruleStats)
		}
		ru.stats, stats[ru.name] = st, st
	}
	m.stats = stats
	m.rules.Store(&ruleSet{rules: compiled})
	return nil
}

// compile validates r and prepares it; errors name the field as the rules
// file does.
func (m *Middleware) compile(r *Rule) (*rule, error) {
	if !validName(r.Name) {
		return nil, fmt.Errorf("name: %q is not 1 to 64 letters, digits, '-', '_' or '.'", r.Name)
	}
	ru := &rule{name: r.Name, policy: r.Policy, action: r.Action}
	if err := checkPolicy(r.Policy); err != nil {
		return nil, err
	}
	if err := checkAction(&ru.action); err != nil {
		return nil, err
	}
	for i, c := range r.When {
		c.set = slices.Clone(c.set)
		c.prefixes = slices.Clone(c.prefixes)
		if err := c.check(m.country != nil); err != nil {
			return nil, fmt.Errorf("when[%d].%w", i, err)
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
		ru.chars = append(ru.chars, c)
	}
	ru.prefix = keyPrefix(ru.name, ru.policy, ru.chars)
	ru.window = ceilSeconds(ru.policy.Period)
	return ru, nil
}

func checkPolicy(p actorlimit.Policy) error {
	switch {
	case p.Limit < 0:
		return fmt.Errorf("policy.limit: %d is negative", p.Limit)
	case p.Period <= 0:
		return fmt.Errorf("policy.period: %v is not positive", p.Period)
	case p.Burst < 0:
		return fmt.Errorf("policy.burst: %d is negative", p.Burst)
	case windowed(p.Algorithm) && p.Period%time.Millisecond != 0:
		return fmt.Errorf("policy.period: %v is not a whole number of milliseconds, as %v needs", p.Period, p.Algorithm)
	case p.Algorithm == actorlimit.SlidingLog && p.Limit > actorlimit.MaxSlidingLogLimit:
		return fmt.Errorf("policy.limit: %d is more than %d, too large a log for SlidingLog", p.Limit, actorlimit.MaxSlidingLogLimit)
	}
	return nil
}

// windowed reports whether a counts in windows of whole milliseconds.
func windowed(a actorlimit.Algorithm) bool {
	return a == actorlimit.FixedWindow || a == actorlimit.SlidingWindow || a == actorlimit.SlidingLog
}

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
