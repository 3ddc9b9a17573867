package httpadapter

import (
	"fmt"
	"net/http"
	"net/netip"
	"path"
	"regexp"
	"strings"

	"github.com/actorlimit/actorlimit"
)

// Rule is one rate limit: the requests it applies to (every condition of
// When holds), how they are grouped into counters (GroupBy), how many hits
// a group may make (Policy) and what happens to a request over the limit
// (Action).
type Rule struct {
	// Name identifies the rule in statistics, headers and counter keys: 1 to
	// 64 bytes of ASCII letters, digits, '-', '_' and '.'; unique in a set.
	Name string
	// When lists the conditions; a rule with none matches every request.
	When []Condition
	// GroupBy lists the characteristics whose values, together, make a
	// request's group: "ip", "host", "method", "path", "header:NAME",
	// "query:NAME" and "cookie:NAME", in any combination and order. Empty
	// means one counter shared by every matching request.
	GroupBy []string
	// Secret lists the items of GroupBy ("header:NAME" or "query:NAME")
	// whose values are credentials: they are hashed before they become
	// part of a counter id, as every cookie and the Authorization,
	// Proxy-Authorization and Cookie headers always are (see
	// [Config.SecretKey]). An item not in GroupBy, or of another kind, is
	// an error.
	Secret []string
	// Policy is the limit of each group. It is checked with
	// [actorlimit.Policy.Validate] when the rule is parsed or set, so a
	// policy the limiter would refuse is an error then, not at each request.
	Policy actorlimit.Policy
	// Action says what a request over the limit gets.
	Action Action
	// Source says where the rule was written, for error messages: "line
	// 12" for a rule from [ParseRules], "rules.yaml line 12" from
	// [LoadRules]; empty for a rule built in Go, which errors name by its
	// index.
	Source string
}

// ActionKind is what a rule does with a request over its limit.
type ActionKind int

// The action kinds.
const (
	// Block answers the request itself with Action.Status (429 by
	// default), a Retry-After header and a short body.
	Block ActionKind = iota
	// Monitor never blocks: the request passes, and the would-be decision
	// is counted in the rule's statistics and put into the request's
	// context (see [MonitorDecisions]).
	Monitor
	// Shadow answers the request with a fake success (Action.Status, 200
	// by default, and Action.Body) without calling the next handler: a
	// shadow ban. The answer has the headers an allowed request gets (the
	// block rules' RateLimit fields), and no Retry-After.
	Shadow
)

// String returns the kind's name as the rules file spells it.
func (k ActionKind) String() string {
	switch k {
	case Block:
		return "block"
	case Monitor:
		return "monitor"
	case Shadow:
		return "shadow"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// Action is what a rule does with a request over its limit.
type Action struct {
	// Kind is Block (the zero value), Monitor or Shadow.
	Kind ActionKind
	// Status is the response status: for Block 429 by default, any 4xx or
	// 5xx allowed (413 as the raterlimiter answered); for Shadow 200 by
	// default, any 2xx allowed. Monitor takes none.
	Status int
	// Body is the response body: for Block "rate limit exceeded\n" by
	// default; for Shadow empty by default.
	Body string
	// ContentType is the body's Content-Type, "text/plain; charset=utf-8"
	// by default.
	ContentType string
}

// Default bodies and content type of the actions.
const (
	DefaultBlockBody   = "rate limit exceeded\n"
	DefaultContentType = "text/plain; charset=utf-8"
)

type condKind uint8

const (
	condMethod condKind = iota + 1
	condPathExact
	condPathPrefix
	condPathGlob
	condHeaderEquals
	condHeaderPresent
	condHeaderRegex
	condClientIP
	condCountry
)

// Condition is one test of a request. Build it with [Method], [PathExact],
// [PathPrefix], [PathGlob], [HeaderEquals], [HeaderPresent], [HeaderRegex],
// [ClientIPIn] or [CountryIn], and negate it with [Condition.Not]. The zero
// Condition is invalid.
type Condition struct {
	kind     condKind
	not      bool
	name     string   // canonical header name
	value    string   // path, glob, header value
	set      []string // methods, countries
	re       *regexp.Regexp
	prefixes []netip.Prefix
}

// Method holds when the request's method is one of methods (case-sensitive,
// as HTTP methods are). GET covers HEAD too, since net/http answers a HEAD
// request with the GET handler: a limit on GET cannot be escaped with
// HEAD.
func Method(methods ...string) Condition {
	return Condition{kind: condMethod, set: methods}
}

// PathExact holds when the request's cleaned path is p.
func PathExact(p string) Condition { return Condition{kind: condPathExact, value: p} }

// PathPrefix holds when the request's cleaned path starts with p.
func PathPrefix(p string) Condition { return Condition{kind: condPathPrefix, value: p} }

// PathGlob holds when the request's cleaned path matches pattern in the
// syntax of [path.Match]: '*' matches within one segment, never a '/'.
func PathGlob(pattern string) Condition { return Condition{kind: condPathGlob, value: pattern} }

// HeaderEquals holds when one of the values of header name is value.
func HeaderEquals(name, value string) Condition {
	return Condition{kind: condHeaderEquals, name: http.CanonicalHeaderKey(name), value: value}
}

// HeaderPresent holds when header name is present, even empty.
func HeaderPresent(name string) Condition {
	return Condition{kind: condHeaderPresent, name: http.CanonicalHeaderKey(name)}
}

// HeaderRegex holds when one of the values of header name matches re.
func HeaderRegex(name string, re *regexp.Regexp) Condition {
	return Condition{kind: condHeaderRegex, name: http.CanonicalHeaderKey(name), re: re}
}

// ClientIPIn holds when the client IP is in one of prefixes. It does not
// hold when the client IP is unknown. Client IPs are unmapped (an IPv4
// client on an IPv6 socket is its IPv4 address), and so are IPv4-mapped
// prefixes: ::ffff:10.0.0.0/104 is 10.0.0.0/8.
func ClientIPIn(prefixes ...netip.Prefix) Condition {
	return Condition{kind: condClientIP, prefixes: prefixes}
}

// CountryIn holds when Config.Country maps the client IP to one of codes
// (compared case-insensitively). It does not hold when the client IP is
// unknown.
func CountryIn(codes ...string) Condition {
	return Condition{kind: condCountry, set: codes}
}

// Not returns c negated.
func (c Condition) Not() Condition {
	c.not = !c.not
	return c
}

// String describes c, for error messages.
func (c Condition) String() string {
	var s string
	switch c.kind {
	case condMethod:
		s = fmt.Sprintf("method in %q", c.set)
	case condPathExact:
		s = fmt.Sprintf("path == %q", c.value)
	case condPathPrefix:
		s = fmt.Sprintf("path prefix %q", c.value)
	case condPathGlob:
		s = fmt.Sprintf("path glob %q", c.value)
	case condHeaderEquals:
		s = fmt.Sprintf("header %s == %q", c.name, c.value)
	case condHeaderPresent:
		s = fmt.Sprintf("header %s present", c.name)
	case condHeaderRegex:
		s = fmt.Sprintf("header %s matches %v", c.name, c.re)
	case condClientIP:
		s = fmt.Sprintf("client IP in %v", c.prefixes)
	case condCountry:
		s = fmt.Sprintf("country in %q", c.set)
	default:
		return "invalid condition"
	}
	if c.not {
		return "not " + s
	}
	return s
}

// check says what is wrong with c, naming the field as the rules file does.
// Whether the middleware can look countries up is the caller's to check.
func (c *Condition) check() error {
	switch c.kind {
	case condMethod:
		if len(c.set) == 0 {
			return fmt.Errorf("method: no method given")
		}
		for _, m := range c.set {
			if m == "" || strings.ContainsAny(m, " \t\r\n") {
				return fmt.Errorf("method: %q is not a method", m)
			}
		}
	case condPathExact, condPathPrefix:
		if !strings.HasPrefix(c.value, "/") {
			return fmt.Errorf("path: %q does not start with /", c.value)
		}
	case condPathGlob:
		if _, err := path.Match(c.value, ""); err != nil {
			return fmt.Errorf("path.glob: %q: %w", c.value, err)
		}
	case condHeaderEquals, condHeaderPresent:
		if c.name == "" {
			return fmt.Errorf("header.name: empty")
		}
	case condHeaderRegex:
		if c.name == "" {
			return fmt.Errorf("header.name: empty")
		}
		if c.re == nil {
			return fmt.Errorf("header.regex: nil")
		}
	case condClientIP:
		if len(c.prefixes) == 0 {
			return fmt.Errorf("ip: no prefix given")
		}
		for i, p := range c.prefixes {
			if !p.IsValid() {
				return fmt.Errorf("ip[%d]: invalid prefix", i)
			}
			c.prefixes[i] = unmapPrefix(p)
		}
	case condCountry:
		if len(c.set) == 0 {
			return fmt.Errorf("country: no code given")
		}
	default:
		return fmt.Errorf("condition: a zero Condition (build one with Method, PathExact, PathPrefix, PathGlob, HeaderEquals, HeaderPresent, HeaderRegex, ClientIPIn or CountryIn)")
	}
	return nil
}

// match reports whether c holds for q.
func (c *Condition) match(q *request) bool {
	return c.matchPlain(q) != c.not
}

func (c *Condition) matchPlain(q *request) bool {
	switch c.kind {
	case condMethod:
		for _, m := range c.set {
			if q.r.Method == m || m == http.MethodGet && q.r.Method == http.MethodHead {
				return true
			}
		}
		return false
	case condPathExact:
		return q.path() == c.value
	case condPathPrefix:
		return strings.HasPrefix(q.path(), c.value)
	case condPathGlob:
		ok, _ := path.Match(c.value, q.path())
		return ok
	case condHeaderEquals:
		for _, v := range q.r.Header[c.name] {
			if v == c.value {
				return true
			}
		}
		return false
	case condHeaderPresent:
		_, ok := q.r.Header[c.name]
		return ok
	case condHeaderRegex:
		for _, v := range q.r.Header[c.name] {
			if c.re.MatchString(v) {
				return true
			}
		}
		return false
	case condClientIP:
		ip, ok := q.clientIP()
		if !ok {
			return false
		}
		for _, p := range c.prefixes {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	case condCountry:
		cc, ok := q.country()
		if !ok {
			return false
		}
		for _, s := range c.set {
			if strings.EqualFold(s, cc) {
				return true
			}
		}
		return false
	}
	return false
}

func (c *Condition) needsIP() bool { return c.kind == condClientIP || c.kind == condCountry }

// validName reports whether s is a valid rule name.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '_' || b == '.') {
			return false
		}
	}
	return true
}
