package quota

// A new configuration (SetConfig) reaches a divided bucket at its next
// report, on the streams already open: the bucket is matched again, and
//
//   - a rule that changed (its limit, algorithm, TTL or any other field an
//     assignment depends on) is the bucket's division's new configuration,
//     and every Envoy of the bucket is sent a new assignment at that
//     division, even one whose share did not move;
//   - a rule unchanged (the same fields, in a new configuration) keeps the
//     division as it is: a reload that touches other rules sends nothing;
//   - a rule gone leaves the bucket to the domain's default action: the
//     bucket is forgotten, and each of its Envoys gets the default action
//     at its own next report of it;
//   - a bucket answered with a blanket rule (no rule matched it) is matched
//     again, and divided if a rule now matches it.

// current brings str's bucket b to cfg, and reports whether str keeps it:
// false if b has no rule in cfg, and then str has left it.
func (s *Server) current(str *stream, b *bucket, cfg *Config, id map[string]string) bool {
	b.mu.Lock()
	stale, gone := b.cfg != cfg, b.gone
	b.mu.Unlock()
	if stale {
		gone = s.rematch(b, cfg, str.domain, id)
	}
	if !gone {
		return true
	}
	b.mu.Lock()
	b.div.Leave(str.id)
	delete(b.members, str.id)
	b.mu.Unlock()
	delete(str.buckets, b.key)
	return false
}

// rematch gives b its rule of cfg, and reports whether b is gone: no rule
// of cfg matches it (or an earlier configuration's did not). A gone bucket
// is no longer among the server's, so that a later rule for its id makes a
// new one.
func (s *Server) rematch(b *bucket, cfg *Config, domain string, id map[string]string) (gone bool) {
	rule, _ := cfg.Match(domain, id)
	s.mu.Lock() // before b.mu, as everywhere
	defer s.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gone || b.cfg == cfg {
		return b.gone
	}
	b.cfg = cfg
	if rule == nil {
		b.gone = true
		if s.buckets[b.key] == b {
			delete(s.buckets, b.key)
		}
		return true
	}
	if !sameRule(b.rule, rule) {
		if err := b.div.SetConfig(rule.division()); err != nil {
			panic(err) // a loaded rule is valid
		}
		b.div.resend()
	}
	b.rule, b.ctr = rule, s.counter(rule)
	return false
}

// sameRule reports whether a and b give the same assignments: the same
// limit, algorithm, and division and strategy settings.
func sameRule(a, b *Rule) bool {
	return a.RequestsPerUnit == b.RequestsPerUnit && a.Unit == b.Unit && a.Algorithm == b.Algorithm &&
		a.ReportingInterval == b.ReportingInterval && a.TTL == b.TTL && a.Reserve == b.Reserve &&
		a.BurstIntervals == b.BurstIntervals && a.Hysteresis == b.Hysteresis && a.Margin == b.Margin
}

// resend makes every live Envoy's assignment due at the next Assign, its
// share moved or not: the rule changed, so may the strategy that carries
// the share.
func (d *Division) resend() {
	for _, m := range d.members {
		if m.live {
			m.sent = false
		}
	}
}
