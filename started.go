package actorlimit

// Started reports whether l was made by [Start], [Spawn] or [Over]. A nil
// or zero Limiter was not: its methods return an error wrapping [ErrClosed]
// (PID and PIDFor return nil, Close does nothing); callers that receive a
// *Limiter they did not make (middleware, for one) check it up front. A
// closed limiter was started: its calls return [ErrClosed].
func (l *Limiter) Started() bool {
	return l != nil && len(l.shards) > 0
}
