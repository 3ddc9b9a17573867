package httpadapter

import (
	"context"
	"time"
)

// SetSleep replaces how m waits for a Result.Delay, so tests need not
// sleep.
func SetSleep(m *Middleware, f func(context.Context, time.Duration) error) { m.sleep = f }

// SetRulesUnchecked is SetRules without the policy checks, so that a test
// can make the limiter refuse a rule's hits at run time.
func SetRulesUnchecked(m *Middleware, rules []Rule) error { return m.setRules(rules, false) }

// SetYAMLColumnLimit sets the size past which YAML syntax errors name no
// column, and returns what restores it.
func SetYAMLColumnLimit(n int) (restore func()) {
	old := yamlColumnLimit
	yamlColumnLimit = n
	return func() { yamlColumnLimit = old }
}
