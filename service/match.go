package service

import (
	"strconv"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// Match is what a request's descriptor matched in a configuration.
type Match struct {
	// Rule is the rule that applies, or nil: the domain is unknown, no rule
	// matches, or the rule is deeper or shallower than the descriptor.
	Rule *Rule
	// Known reports whether the domain is in the configuration.
	Known bool
	// shared[i] is the wildcard pattern that replaces entry i's value in the
	// counter's id (share_threshold), or "".
	shared []string
	// label is the metric label of a detailed_metric or value_to_metric
	// rule, which holds the request's values, or of a rule whose path
	// holds a secret value (redacted); "" means Rule.Path.
	label string
	// detailed: label holds a request's values.
	detailed bool
	// secret are the keys the domain's configuration marks secret.
	secret map[string]bool
}

// Match finds the rule for a descriptor of domain, as envoy ratelimit does:
// at each level, an entry matches the child "key_value" first, then the
// wildcard children (values ending in '*') in file order, then the child
// "key" alone; a rule applies only when it sits at the descriptor's last
// entry, and the walk stops at a level with no children.
//
// Match knows no Secrets: its Label holds the values as they are. The
// Server's own matching writes secret and long values as their digests.
func (c *Config) Match(domain string, d *ratelimitv3.RateLimitDescriptor) Match {
	return c.match(domain, d, nil)
}

// match is Match, with h's digests in the label (nil: none).
func (c *Config) match(domain string, d *ratelimitv3.RateLimitDescriptor, h *hasher) Match {
	top := c.domains[domain]
	if top == nil {
		return Match{}
	}
	m := Match{Known: true, secret: c.secret[domain]}
	entries := d.GetEntries()
	// metricValue[i] is what envoy ratelimit writes after entry i's key in
	// a value_to_metric label; kept only when a level asks for it.
	var small [8]string
	metricValue := small[:0]
	toMetric := false
	level := top
	var buf [128]byte
	for i, e := range entries {
		// "key_value", on the stack when it fits: the lookups allocate
		// nothing. No more of it than the level's longest child is needed
		// (a client's long value is not copied).
		full := len(e.GetKey()) + 1 + len(e.GetValue())
		n := min(full, level.longest)
		final := append(append(buf[:0], e.GetKey()...), '_')
		if rest := n - len(final); rest > 0 {
			final = append(final, e.GetValue()[:rest]...)
		} else {
			final = final[:n]
		}
		var next *node
		if len(final) == full {
			next = level.children[string(final)]
		}
		wildcard := ""
		if next == nil {
			for _, w := range level.wildcards {
				if p := w[:len(w)-1]; len(final) >= len(p) && string(final[:len(p)]) == p {
					next, wildcard = level.children[w], w
					break
				}
			}
		}
		byValue := next != nil
		if next == nil {
			next = level.children[e.GetKey()]
		}
		v := ""
		if next != nil {
			toMetric = toMetric || next.valueToMetric
			switch {
			case wildcard != "" && next.shareThreshold:
				if m.shared == nil {
					m.shared = make([]string, len(entries))
				}
				m.shared[i] = next.pattern
				v = next.pattern
			case wildcard != "" && next.valueToMetric:
				v = e.GetValue()
			case wildcard != "":
				v = strings.TrimPrefix(wildcard, e.GetKey()+"_")
			case byValue || next.valueToMetric:
				v = e.GetValue()
			}
		}
		metricValue = append(metricValue, v)
		if next != nil && next.rule != nil && i == len(entries)-1 {
			m.Rule = next.rule
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		level = next
	}
	if m.Rule == nil {
		return m
	}
	// A label with a value to hide: a secret one (even the file's own, in
	// the rule's path), or a client's long one.
	hide := false
	if h != nil {
		for i, e := range entries {
			shown := i < len(metricValue) && metricValue[i] != "" || m.Rule.DetailedMetric && e.GetValue() != ""
			if shown && h.secretKey(e.GetKey(), m.secret) || (m.Rule.DetailedMetric || toMetric) && len(e.GetValue()) > h.maxValue {
				hide = true
				break
			}
		}
	}
	if !(m.Rule.DetailedMetric || toMetric || hide) {
		return m
	}
	l := m.label0(entries, metricValue, nil)
	m.detailed = (m.Rule.DetailedMetric || toMetric) && (l != m.Rule.Path || m.Rule.DetailedMetric)
	if hide {
		l = m.label0(entries, metricValue, h)
	}
	if l != m.Rule.Path || m.detailed {
		m.label = l
	}
	return m
}

// label0 builds the label of a match whose rule is detailed or has values
// to hide, with h's digests (nil: the values as they are).
func (m *Match) label0(entries []*ratelimitv3.RateLimitDescriptor_Entry, metricValue []string, h *hasher) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.GetKey())
		v := e.GetValue()
		switch {
		case m.Rule.DetailedMetric && i < len(m.shared) && m.shared[i] != "":
			v = m.shared[i]
		case !m.Rule.DetailedMetric:
			v = metricValue[i]
		}
		if v != "" {
			b.WriteByte('_')
			b.WriteString(h.labelValue(v, h.secretKey(e.GetKey(), m.secret)))
		}
	}
	return b.String()
}

// Label returns the metric label of the match: the rule's path in the
// file, or, for a detailed_metric or value_to_metric rule, the request's
// keys and values.
func (m Match) Label() string {
	if m.label != "" {
		return m.label
	}
	if m.Rule != nil {
		return m.Rule.Path
	}
	return ""
}

// Detailed reports whether Label holds a request's values.
func (m Match) Detailed() bool { return m.detailed }

// ID returns the limiter id of the descriptor's counter: the domain and
// every entry's key and value (a share_threshold wildcard's pattern in
// place of the value), each prefixed by its length, so that no two
// different descriptors share an id. It knows no Secrets: the Server's ids
// hold secret and long values as their digests (see MaxStoredID).
func (m Match) ID(domain string, d *ratelimitv3.RateLimitDescriptor) string {
	return m.id(domain, d, nil)
}

// id is ID, with h's digests (nil: none).
func (m Match) id(domain string, d *ratelimitv3.RateLimitDescriptor, h *hasher) string {
	n := len(domain) + 4
	for _, e := range d.GetEntries() {
		n += len(e.GetKey()) + min(len(e.GetValue()), MaxStoredID) + 8
	}
	var buf [MaxStoredID + 64]byte
	b := buf[:0]
	if n > len(buf) {
		b = make([]byte, 0, n)
	}
	b = appendField(b, domain)
	for i, e := range d.GetEntries() {
		b = appendField(b, e.GetKey())
		v := e.GetValue()
		if i < len(m.shared) && m.shared[i] != "" {
			v = m.shared[i]
		}
		b = h.appendValue(b, v, h.secretKey(e.GetKey(), m.secret))
	}
	return h.finish(b)
}

func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}
