package httpadapter

import "sync/atomic"

// ruleStats are one rule's counters.
type ruleStats struct {
	matched, allowed, blocked, monitored, shadowed, errors atomic.Uint64
}

// RuleStats are one rule's counters. Every request the rule matched is
// counted in Matched and in exactly one of the others: what the rule
// decided for it, whichever rule answered the request.
type RuleStats struct {
	// Rule is the rule's name.
	Rule string
	// Matched counts the requests whose conditions held.
	Matched uint64
	// Allowed counts those within the limit.
	Allowed uint64
	// Blocked counts those over the limit of a block rule.
	Blocked uint64
	// Monitored counts those over the limit of a monitor rule: the
	// requests it would have blocked.
	Monitored uint64
	// Shadowed counts those over the limit of a shadow rule.
	Shadowed uint64
	// Errors counts those the limiter failed to decide: it failed as a
	// whole (also counted in Stats.LimiterErrors), or refused this rule's
	// hit while deciding the others'.
	Errors uint64
}

// Stats are a middleware's statistics.
type Stats struct {
	// Rules has one entry per rule of the current set, in its order.
	Rules []RuleStats
	// LimiterErrors counts the requests for which the limiter failed as a
	// whole (closed, timed out); not those for which it refused only some
	// rules' hits, counted in those rules' Errors.
	LimiterErrors uint64
	// UnknownIPRejected counts the requests answered 400 because their
	// client IP was needed and unknown (UnknownIPReject).
	UnknownIPRejected uint64
}

// Stats returns the statistics of the current rule set. Counters of rules
// kept across [Middleware.SetRules] (same name) go on from where they were.
func (m *Middleware) Stats() Stats {
	rs := m.rules.Load()
	if rs == nil {
		return Stats{} // a zero Middleware
	}
	s := Stats{
		Rules:             make([]RuleStats, len(rs.rules)),
		LimiterErrors:     m.limiterErrors.Load(),
		UnknownIPRejected: m.unknownIPs.Load(),
	}
	for i, ru := range rs.rules {
		st := ru.stats
		s.Rules[i] = RuleStats{
			Rule:      ru.name,
			Matched:   st.matched.Load(),
			Allowed:   st.allowed.Load(),
			Blocked:   st.blocked.Load(),
			Monitored: st.monitored.Load(),
			Shadowed:  st.shadowed.Load(),
			Errors:    st.errors.Load(),
		}
	}
	return s
}
