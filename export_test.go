package actorlimit

import "github.com/actorlimit/actorlimit/actor"

// WithInject installs a hook the limiter calls, inside its actor, before
// every check: tests use it to make the limiter panic on a chosen id.
func WithInject(f func(id string)) Option {
	return func(cfg *settings) error {
		cfg.Inject = func(c actor.Check) { f(c.ID) }
		return nil
	}
}
