package rls

import (
	"fmt"
	"math/rand/v2"
	"strings"

	ratelimitpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A random configuration in envoy ratelimit's format and random requests
// drawn from it, for the differential test. The configurations use every
// field of the format that envoy ratelimit and actorlimitd both read by
// default: nested descriptors, values, wildcards (a value ending in '*',
// "*" alone among them), keys alone, rate_limit with every unit,
// requests_per_unit 0, unlimited, name, replaces, shadow_mode. The requests
// reach rules at every depth and past them, carry keys and values no rule
// names, unknown domains, repeated descriptors (one counter hit twice in a
// request), the request's hits_addend (0 meaning 1), each descriptor's own
// (0 included: checked, not counted), and limit overrides.
//
// Keys are chosen so that no key followed by '_' starts another (envoy
// ratelimit joins key and value with '_' when it looks rules up, so "a" with
// value "b_c" and "a_b" with value "c" are one rule to it; a client cannot
// rely on that, and actorlimitd need not copy it).

// rule is one descriptor of the configuration.
type rule struct {
	Key, Value string // Value "" is the key alone; ending in '*', a wildcard
	Limit      *limit
	Shadow     bool
	Children   []*rule
}

// limit is a rule's rate_limit.
type limit struct {
	Unit      string // "" when Unlimited
	Requests  uint32
	Unlimited bool
	Name      string
	Replaces  []string
}

// domain is one configuration file.
type domain struct {
	Name  string
	Rules []*rule
}

var (
	genKeys = []string{"remote_address", "path", "user", "tier", "method"}
	// genExact are the values rules name exactly; genPrefixes, before '*',
	// the wildcards' ("" makes "*", every value).
	genExact    = []string{"a", "b", "gold", "10.0.0.1", "/api/v1", "GET"}
	genPrefixes = []string{"/api", "10.0.", "go", ""}
	// genValues are the values a request's entries take besides those.
	genValues = []string{"v1", "v2", "v3", "zz", "/other"}
	// genSuffixes follow a wildcard's prefix in a request.
	genSuffixes = []string{"", "1", "x", "/deep/er"}
	genUnits    = []string{"second", "minute", "hour", "hour", "hour", "day", "day", "week", "month", "year"}
	// genOverrideUnits are the units a limit override names: Envoy's
	// RateLimitUnit has no week.
	genOverrideUnits = []string{"second", "minute", "hour", "day", "month", "year"}
	genRequests      = []uint32{0, 1, 2, 3, 3, 5, 8, 13, 50, 1000}
)

// gen draws configurations and requests from one seeded source.
type gen struct {
	r       *rand.Rand
	names   int
	domains []*domain
}

func newGen(seed uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *gen, s []T) T { return s[g.r.IntN(len(s))] }

// domain draws a domain named name and keeps it for the requests.
func (g *gen) domain(name string) *domain {
	d := &domain{Name: name, Rules: g.rules(0)}
	// Every domain has an unlimited rule at its top level (one drawn
	// anyway, or one of its limits made so), so that every stream meets
	// that case: a twelfth of the limits alone left some seeds without.
	var top []*rule
	unlimited := false
	for _, r := range d.Rules {
		if r.Limit != nil {
			top = append(top, r)
			unlimited = unlimited || r.Limit.Unlimited
		}
	}
	if !unlimited && len(top) > 0 {
		r := pick(g, top)
		r.Limit.Unlimited, r.Limit.Unit, r.Limit.Requests, r.Shadow = true, "", 0, false
	}
	// replaces: a fifth of the limits replace another named limit of the
	// domain (a name of another domain would do the same: names are global
	// to a request).
	var named, all []*limit
	walk(d.Rules, func(r *rule) {
		if r.Limit != nil {
			all = append(all, r.Limit)
			if r.Limit.Name != "" {
				named = append(named, r.Limit)
			}
		}
	})
	for _, l := range all {
		if len(named) > 0 && g.chance(0.2) {
			if o := pick(g, named); o != l {
				l.Replaces = append(l.Replaces, o.Name)
			}
		}
	}
	g.domains = append(g.domains, d)
	return d
}

func walk(rules []*rule, f func(*rule)) {
	for _, r := range rules {
		f(r)
		walk(r.Children, f)
	}
}

// rules draws the rules of one level, depth 0 being the domain's.
func (g *gen) rules(depth int) []*rule {
	n := 1 + g.r.IntN(3)
	if depth == 0 {
		n = 3 + g.r.IntN(4)
	}
	seen := map[string]bool{}
	var out []*rule
	for range n {
		r := &rule{Key: pick(g, genKeys)}
		switch x := g.r.Float64(); {
		case x < 0.35:
		case x < 0.75:
			r.Value = pick(g, genExact)
		default:
			r.Value = pick(g, genPrefixes) + "*"
		}
		if seen[r.Key+"_"+r.Value] {
			continue // envoy ratelimit refuses two rules with one key and value
		}
		seen[r.Key+"_"+r.Value] = true
		if depth < 2 && g.chance(0.4) {
			r.Children = g.rules(depth + 1)
		}
		if len(r.Children) == 0 || g.chance(0.5) {
			r.Limit = g.limit()
			r.Shadow = !r.Limit.Unlimited && g.chance(0.15)
		}
		out = append(out, r)
	}
	return out
}

func (g *gen) limit() *limit {
	l := &limit{}
	if g.chance(0.08) {
		l.Unlimited = true
	} else {
		l.Unit = pick(g, genUnits)
		l.Requests = pick(g, genRequests)
	}
	if g.chance(0.35) {
		g.names++
		l.Name = fmt.Sprintf("rule%d", g.names)
	}
	return l
}

// yaml writes d in envoy ratelimit's format.
func (d *domain) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain: %s\ndescriptors:\n", d.Name)
	writeRules(&b, d.Rules, "  ")
	return b.String()
}

func writeRules(b *strings.Builder, rules []*rule, ind string) {
	for _, r := range rules {
		fmt.Fprintf(b, "%s- key: %s\n", ind, r.Key)
		in := ind + "  "
		if r.Value != "" {
			fmt.Fprintf(b, "%svalue: %q\n", in, r.Value)
		}
		if l := r.Limit; l != nil {
			fmt.Fprintf(b, "%srate_limit:\n", in)
			if l.Unlimited {
				fmt.Fprintf(b, "%s  unlimited: true\n", in)
			} else {
				fmt.Fprintf(b, "%s  unit: %s\n%s  requests_per_unit: %d\n", in, l.Unit, in, l.Requests)
			}
			if l.Name != "" {
				fmt.Fprintf(b, "%s  name: %s\n", in, l.Name)
			}
			if len(l.Replaces) > 0 {
				fmt.Fprintf(b, "%s  replaces:\n", in)
				for _, n := range l.Replaces {
					fmt.Fprintf(b, "%s    - name: %s\n", in, n)
				}
			}
		}
		if r.Shadow {
			fmt.Fprintf(b, "%sshadow_mode: true\n", in)
		}
		if len(r.Children) > 0 {
			fmt.Fprintf(b, "%sdescriptors:\n", in)
			writeRules(b, r.Children, in+"  ")
		}
	}
}

// request draws a request: a domain of the configuration (or, one time in
// ten, one it lacks) and one to four descriptors.
func (g *gen) request() *rlspb.RateLimitRequest {
	req := &rlspb.RateLimitRequest{Domain: "unknown_domain"}
	var rules []*rule
	if !g.chance(0.1) {
		d := pick(g, g.domains)
		req.Domain, rules = d.Name, d.Rules
	}
	if g.chance(0.45) {
		req.HitsAddend = uint32(1 + g.r.IntN(3))
	}
	n := 1 + g.r.IntN(4)
	for range n {
		var d *ratelimitpb.RateLimitDescriptor
		if len(req.Descriptors) > 0 && g.chance(0.1) {
			// the same entries again: one counter, hit twice in a request
			prev := pick(g, req.Descriptors)
			d = &ratelimitpb.RateLimitDescriptor{Entries: prev.Entries, Limit: prev.Limit}
		} else {
			d = g.descriptor(rules)
		}
		if g.chance(0.25) {
			d.HitsAddend = wrapperspb.UInt64(uint64(g.r.IntN(4)))
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

// descriptor walks rules down from the domain's, one entry a level, and
// stops at a rule with a limit more often than not; it sometimes goes on
// past the rules, with entries no rule names. One in fourteen gets a limit
// override, and then an entry ("override", its unit) so that overrides of
// different units never share entries (see limitOverride).
func (g *gen) descriptor(level []*rule) *ratelimitpb.RateLimitDescriptor {
	d := &ratelimitpb.RateLimitDescriptor{}
	for {
		if len(level) == 0 || g.chance(0.1) {
			d.Entries = append(d.Entries, &ratelimitpb.RateLimitDescriptor_Entry{
				Key: pick(g, append([]string{"other"}, genKeys...)), Value: pick(g, genValues)})
			if g.chance(0.7) {
				break
			}
			level = nil
			continue
		}
		r := pick(g, level)
		d.Entries = append(d.Entries, g.entry(r))
		if r.Limit != nil && g.chance(0.6) {
			break
		}
		if len(r.Children) == 0 && g.chance(0.8) {
			break
		}
		level = r.Children
	}
	if g.chance(1.0 / 14) {
		g.limitOverride(d)
	}
	return d
}

// limitOverride gives d a limit override. envoy ratelimit keys a counter by
// the entries and the start of the window alone, so two units whose windows
// start at the same second (a minute's and an hour's at the top of the hour)
// would share one counter then; a client cannot rely on that, and the entry
// naming the unit keeps the test off it.
func (g *gen) limitOverride(d *ratelimitpb.RateLimitDescriptor) {
	unit := pick(g, genOverrideUnits)
	d.Entries = append(d.Entries, &ratelimitpb.RateLimitDescriptor_Entry{Key: "override", Value: unit})
	d.Limit = &ratelimitpb.RateLimitDescriptor_RateLimitOverride{
		RequestsPerUnit: pick(g, genRequests),
		Unit:            typepb.RateLimitUnit(unitOf(unit)), // the same numbers, but for the week
	}
}

func unitOf(s string) rlspb.RateLimitResponse_RateLimit_Unit {
	return rlspb.RateLimitResponse_RateLimit_Unit(rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(s)])
}

// entry returns an entry that r matches by its own look-up: its value, a
// value its wildcard takes, or any value for a key alone (which a sibling's
// value or wildcard may then match first).
func (g *gen) entry(r *rule) *ratelimitpb.RateLimitDescriptor_Entry {
	e := &ratelimitpb.RateLimitDescriptor_Entry{Key: r.Key}
	switch {
	case r.Value == "":
		e.Value = pick(g, append(genValues, genExact...))
	case strings.HasSuffix(r.Value, "*"):
		e.Value = strings.TrimSuffix(r.Value, "*") + pick(g, genSuffixes)
		if e.Value == "" {
			e.Value = pick(g, genValues)
		}
	default:
		e.Value = r.Value
	}
	return e
}
