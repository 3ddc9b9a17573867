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

// YAMLParses returns how many times a YAML rules file was parsed.
func YAMLParses() int64 { return yamlParses.Load() }
