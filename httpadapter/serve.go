package httpadapter

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/actorlimit/actorlimit"
)

// MonitorDecision is what a monitor rule decided for a request.
type MonitorDecision struct {
	// Rule is the monitor rule's name.
	Rule string
	// Result is the limiter's decision; Result.Allowed false means the rule
	// would have blocked the request.
	Result actorlimit.Result
}

type monitorKey struct{}

// MonitorDecisions returns the decisions of the monitor rules that matched
// the request whose context is ctx, in rule order, or nil when none did.
// The slice must not be modified.
func MonitorDecisions(ctx context.Context) []MonitorDecision {
	d, _ := ctx.Value(monitorKey{}).([]MonitorDecision)
	return d
}

// serve is the hot path.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	rs := m.rules.Load()
	if rs == nil { // a zero Middleware, not made by New: fail closed
		http.Error(w, errNotMade.Error(), http.StatusInternalServerError)
		return
	}
	if len(rs.rules) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	s := scratches.Get().(*scratch)
	s.q = request{m: m, r: r}
	for _, ru := range rs.rules {
		if !ru.matches(&s.q) {
			if s.q.rejected {
				break
			}
			continue
		}
		s.buf = ru.appendKey(s.buf, &s.q)
		if s.q.rejected {
			break
		}
		s.ends = append(s.ends, len(s.buf))
		s.rules = append(s.rules, ru)
	}
	switch {
	case s.q.rejected:
		s.release()
		m.unknownIPs.Add(1)
		http.Error(w, "client address unknown", http.StatusBadRequest)
		return
	case len(s.rules) == 0:
		s.release()
		next.ServeHTTP(w, r)
		return
	}
	// One string holds every key: one allocation, whatever the number of
	// rules. The limiter keeps the keys it stores, and with them this
	// string, only as long as the longest-lived of them.
	ids, start := string(s.buf), 0
	for i, ru := range s.rules {
		s.hits = append(s.hits, actorlimit.HitRequest{ID: ids[start:s.ends[i]], Policy: ru.policy})
		start = s.ends[i]
	}
	s.res = append(s.res[:0], make([]actorlimit.Result, len(s.hits))...)
	if err := m.hitMany(r.Context(), s); err != nil {
		m.logFailing(r, err)
		m.failed(w, r, next, s)
		return
	}
	m.logAnswering()
	m.decide(w, r, next, s)
}

// hitMany asks the limiter about every hit of s in one call. When the
// limiter refuses the call for bad input (an error wrapping
// actorlimit.ErrInvalidArgument, after which nothing was counted), it asks
// again one hit at a time, so that the rule whose hit is refused does not
// stop the others. Any other error is the limiter's as a whole.
func (m *Middleware) hitMany(ctx context.Context, s *scratch) error {
	if m.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.timeout)
		defer cancel()
	}
	err := m.lim.HitMany(ctx, s.hits, s.res)
	if err == nil || !errors.Is(err, actorlimit.ErrInvalidArgument) {
		return err
	}
	return m.hitEach(ctx, s)
}

// hitEach asks the limiter about each hit of s alone, and marks in
// s.refused those it refuses.
func (m *Middleware) hitEach(ctx context.Context, s *scratch) error {
	s.refused = append(s.refused[:0], make([]bool, len(s.hits))...)
	for i := range s.hits {
		err := m.lim.HitMany(ctx, s.hits[i:i+1], s.res[i:i+1])
		switch {
		case err == nil:
		case errors.Is(err, actorlimit.ErrInvalidArgument):
			s.refused[i], s.res[i] = true, actorlimit.Result{}
			m.logRefused(s.rules[i], err)
		default:
			return err
		}
	}
	return nil
}

// logRefused logs, once per rule, that the limiter refused its hit.
func (m *Middleware) logRefused(ru *rule, err error) {
	if m.log == nil || !ru.logged.CompareAndSwap(false, true) {
		return
	}
	m.log.Warn("httpadapter: the limiter refuses this rule's hits; the rule limits nothing, the other rules still apply (logged once)",
		"rule", ru.name, "err", err)
}

// logFailing logs, once until the limiter answers again, that it failed.
// A call that failed because the request's own context ended (the client
// went away) says nothing about the limiter, and is not logged.
func (m *Middleware) logFailing(r *http.Request, err error) {
	if m.log == nil || r.Context().Err() != nil || !m.failing.CompareAndSwap(false, true) {
		return
	}
	then := "requests pass (fail open)"
	if m.closed {
		then = "requests that a block or shadow rule matches are answered 503 (fail closed)"
	}
	m.log.Warn("httpadapter: the limiter fails; "+then+" until it answers again (logged once)", "err", err)
}

// logAnswering logs, once, that the limiter answers again after logFailing
// logged its failure. Without a logger, or while the limiter answers, it
// costs a nil check or one atomic load per request.
func (m *Middleware) logAnswering() {
	if m.log == nil || !m.failing.Load() || !m.failing.CompareAndSwap(true, false) {
		return
	}
	m.log.Info("httpadapter: the limiter answers again")
}

// failed handles a limiter failure: counted, then open or closed. The
// scratch is dropped, not pooled: a limiter that gave up waiting may still
// hold it.
func (m *Middleware) failed(w http.ResponseWriter, r *http.Request, next http.Handler, s *scratch) {
	m.limiterErrors.Add(1)
	enforcing := false
	for i, ru := range s.rules {
		ru.stats.matched.Add(1)
		ru.stats.errors.Add(1)
		enforcing = enforcing || ru.action.Kind != Monitor
		m.observe(ru, s.hits[i].ID, Failed, actorlimit.Result{})
	}
	if m.closed && enforcing {
		http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
		return
	}
	next.ServeHTTP(w, r)
}

// verdict is what the rules of one request decided together.
type verdict struct {
	block, shadow *rule             // the strictest denying block and shadow rules
	blockRes      actorlimit.Result // block's
	mon           []MonitorDecision // of every monitor rule the limiter decided
	headers       bool              // a block rule matched and was decided
	undecided     bool              // the limiter refused the hit of a block or shadow rule
	delay         time.Duration     // the longest Delay of an enforcing rule
}

// tally counts every rule's decision and picks the strictest. A rule whose
// hit the limiter refused counts as an error and decides nothing.
func (m *Middleware) tally(s *scratch) verdict {
	var v verdict
	for i, ru := range s.rules {
		res := &s.res[i]
		st := ru.stats
		st.matched.Add(1)
		kind := ru.action.Kind
		if !s.decided(i) {
			st.errors.Add(1)
			v.undecided = v.undecided || kind != Monitor
			m.observe(ru, s.hits[i].ID, Failed, actorlimit.Result{})
			continue
		}
		if len(m.obs) > 0 {
			o := Within
			if !res.Allowed {
				o = Over
			}
			m.observe(ru, s.hits[i].ID, o, *res)
		}
		v.headers = v.headers || kind == Block
		if kind == Monitor {
			v.mon = append(v.mon, MonitorDecision{Rule: ru.name, Result: *res})
		}
		switch {
		case res.Allowed:
			st.allowed.Add(1)
			if kind != Monitor {
				v.delay = max(v.delay, res.Delay)
			}
		case kind == Block:
			st.blocked.Add(1)
			if v.block == nil || stricter(res.RetryAfter, v.blockRes.RetryAfter) {
				v.block, v.blockRes = ru, *res
			}
		case kind == Monitor:
			st.monitored.Add(1)
		case kind == Shadow:
			st.shadowed.Add(1)
			if v.shadow == nil {
				v.shadow = ru
			}
		}
	}
	return v
}

// decide counts the decisions, then answers with the strictest or passes
// the request on. A shadowed request gets the same headers an allowed one
// would: the block rules' RateLimit fields, and no Retry-After.
func (m *Middleware) decide(w http.ResponseWriter, r *http.Request, next http.Handler, s *scratch) {
	v := m.tally(s)
	if v.headers {
		m.setHeaders(w.Header(), s)
	}
	s.release()
	switch {
	case v.shadow != nil: // the strictest, and it must look like a success
		respond(w, &v.shadow.action, false)
		return
	case v.block != nil:
		if v.blockRes.RetryAfter >= 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(ceilSeconds(v.blockRes.RetryAfter), 10))
		}
		respond(w, &v.block.action, true)
		return
	case v.undecided && m.closed:
		http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
		return
	}
	if v.delay > 0 && !m.noDelay {
		if m.sleep(r.Context(), v.delay) != nil {
			return // the client is gone
		}
	}
	if v.mon != nil {
		r = r.WithContext(context.WithValue(r.Context(), monitorKey{}, v.mon))
	}
	next.ServeHTTP(w, r)
}

// observe tells every observer what ru decided for the request whose
// counter id is id.
func (m *Middleware) observe(ru *rule, id string, o Outcome, res actorlimit.Result) {
	if len(m.obs) == 0 {
		return
	}
	ob := Observation{Rule: ru.name, Action: ru.action.Kind, Outcome: o, Result: res}
	if len(id) >= len(ru.prefix) {
		ob.Group = id[len(ru.prefix):]
	}
	for _, x := range m.obs {
		x.Observe(ob)
	}
}

// stricter reports whether a wait of a is longer than one of b; Never is
// the longest.
func stricter(a, b time.Duration) bool {
	switch {
	case b < 0:
		return false
	case a < 0:
		return true
	}
	return a > b
}

// respond answers with a's status and body; nosniff adds
// X-Content-Type-Options, which a shadow answer leaves out as the success it
// fakes would.
func respond(w http.ResponseWriter, a *Action, nosniff bool) {
	h := w.Header()
	h.Set("Content-Type", a.ContentType)
	if nosniff {
		h.Set("X-Content-Type-Options", "nosniff")
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write([]byte(a.Body))
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0. It
// divides before rounding, so that no duration overflows.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
