package httpadapter_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

func perMinute(limit int64) actorlimit.Policy {
	return actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: limit, Period: time.Minute}
}

func perHour(limit int64) actorlimit.Policy {
	return actorlimit.Policy{Algorithm: actorlimit.FixedWindow, Limit: limit, Period: time.Hour}
}

// okHandler answers 200 "ok" and counts its calls.
type okHandler struct{ calls int }

func (h *okHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.calls++
	_, _ = io.WriteString(w, "ok")
}

func newMW(t *testing.T, lim httpadapter.Limiter, cfg httpadapter.Config) *httpadapter.Middleware {
	t.Helper()
	m, err := httpadapter.New(lim, cfg)
	require.NoError(t, err)
	return m
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// req builds a GET request from 192.0.2.1 unless edit changes it.
func req(target string, edit ...func(*http.Request)) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.RemoteAddr = "192.0.2.1:1234"
	for _, e := range edit {
		e(r)
	}
	return r
}

func method(m string) func(*http.Request) { return func(r *http.Request) { r.Method = m } }
func header(k, v string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Add(k, v) }
}
func remote(a string) func(*http.Request) { return func(r *http.Request) { r.RemoteAddr = a } }
func host(h string) func(*http.Request)   { return func(r *http.Request) { r.Host = h } }

func TestConditions(t *testing.T) {
	country := func(a netip.Addr) string {
		if netip.MustParsePrefix("203.0.113.0/24").Contains(a) {
			return "RU"
		}
		return "NL"
	}
	tests := []struct {
		name     string
		cond     httpadapter.Condition
		match    *http.Request
		nonMatch *http.Request
	}{
		{"method", httpadapter.Method("POST", "PUT"), req("/", method("POST")), req("/")},
		{"path exact", httpadapter.PathExact("/login"), req("/login"), req("/login/x")},
		{"path exact cleaned", httpadapter.PathExact("/login"), req("/a/../login"), req("/a/login")},
		{"path prefix", httpadapter.PathPrefix("/api/"), req("/api/x"), req("/apix")},
		{"path prefix trailing slash", httpadapter.PathPrefix("/api/"), req("/api//"), req("/api")},
		{"path glob", httpadapter.PathGlob("/u/*/edit"), req("/u/42/edit"), req("/u/42/x/edit")},
		{"header equals", httpadapter.HeaderEquals("x-env", "prod"), req("/", header("X-Env", "staging"), header("X-Env", "prod")), req("/", header("X-Env", "staging"))},
		{"header present", httpadapter.HeaderPresent("Authorization"), req("/", header("Authorization", "")), req("/")},
		{"header regex", httpadapter.HeaderRegex("User-Agent", regexp.MustCompile(`(?i)^curl/`)), req("/", header("User-Agent", "CURL/8.1")), req("/", header("User-Agent", "Mozilla/5.0 curl/8"))},
		{"client ip v4", httpadapter.ClientIPIn(netip.MustParsePrefix("10.0.0.0/8")), req("/", remote("10.1.2.3:5")), req("/")},
		{"client ip v6", httpadapter.ClientIPIn(netip.MustParsePrefix("2001:db8::/32")), req("/", remote("[2001:db8::1]:5")), req("/", remote("[2001:db9::1]:5"))},
		{"client ip v4-mapped", httpadapter.ClientIPIn(netip.MustParsePrefix("10.0.0.0/8")), req("/", remote("[::ffff:10.0.0.1]:5")), req("/")},
		{"client ip unknown", httpadapter.ClientIPIn(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")), req("/"), req("/", remote("@unix"))},
		{"country", httpadapter.CountryIn("ru"), req("/", remote("203.0.113.9:1")), req("/")},
		{"country unknown ip", httpadapter.CountryIn("NL"), req("/"), req("/", remote("pipe"))},
	}
	for _, tt := range tests {
		for _, negate := range []bool{false, true} {
			name := tt.name
			cond, match, nonMatch := tt.cond, tt.match, tt.nonMatch
			if negate {
				name, cond, match, nonMatch = "not "+name, cond.Not(), nonMatch, match
			}
			t.Run(name, func(t *testing.T) {
				lim := newFake()
				m := newMW(t, lim, httpadapter.Config{Country: country, Rules: []httpadapter.Rule{{
					Name: "r", When: []httpadapter.Condition{cond}, Policy: perMinute(0),
				}}})
				next := &okHandler{}
				h := m.Handler(next)

				w := serve(h, nonMatch.Clone(nonMatch.Context()))
				assert.Equal(t, http.StatusOK, w.Code, "non-matching request")
				calls, _ := lim.snapshot()
				assert.Zero(t, calls, "a request that matches no rule costs no limiter call")

				w = serve(h, match.Clone(match.Context()))
				assert.Equal(t, http.StatusTooManyRequests, w.Code, "matching request")
				assert.Equal(t, 1, next.calls)
			})
		}
	}
}

func TestConditionsAllMustHold(t *testing.T) {
	lim := newFake()
	m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{{
		Name:   "r",
		When:   []httpadapter.Condition{httpadapter.Method("POST"), httpadapter.PathPrefix("/api")},
		Policy: perMinute(0),
	}}})
	h := m.Handler(&okHandler{})
	assert.Equal(t, http.StatusOK, serve(h, req("/api")).Code)
	assert.Equal(t, http.StatusOK, serve(h, req("/x", method("POST"))).Code)
	assert.Equal(t, http.StatusTooManyRequests, serve(h, req("/api", method("POST"))).Code)
}

func TestCharacteristics(t *testing.T) {
	tests := []struct {
		char      string
		a, same   *http.Request // same group
		different *http.Request
	}{
		{"ip", req("/"), req("/", remote("192.0.2.1:999")), req("/", remote("192.0.2.2:1234"))},
		{"host", req("/", host("a.example")), req("/", host("A.Example")), req("/", host("b.example"))},
		{"method", req("/"), req("/x"), req("/", method("POST"))},
		{"path", req("/a?x=1"), req("/b/../a"), req("/b")},
		{"header:X-Api-Key", req("/", header("X-Api-Key", "k1")), req("/x", header("x-api-key", "k1")), req("/", header("X-Api-Key", "k2"))},
		{"header:X-Api-Key", req("/", header("X-Api-Key", "")), req("/x", header("X-Api-Key", "")), req("/")},
		{"query:user", req("/?user=a+b"), req("/x?z=1&user=a%20b&user=c"), req("/?user=ab")},
		{"query:user", req("/?user="), req("/?user"), req("/")},
		{"query:user name", req("/?user+name=1"), req("/?user%20name=1"), req("/?user=1")},
		{"cookie:session", req("/", header("Cookie", "a=1; session=s1")), req("/", header("Cookie", `session="s1"`)), req("/", header("Cookie", "session=s2"))},
		{"cookie:session", req("/", header("Cookie", "a=1"), header("Cookie", "session=s1")), req("/", header("Cookie", "session=s1")), req("/", header("Cookie", "xsession=s1"))},
	}
	for _, tt := range tests {
		t.Run(tt.char, func(t *testing.T) {
			lim := newFake()
			m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{{
				Name: "r", GroupBy: []string{tt.char}, Policy: perMinute(100),
			}}})
			h := m.Handler(&okHandler{})
			for _, r := range []*http.Request{tt.a, tt.same, tt.different} {
				require.Equal(t, http.StatusOK, serve(h, r).Code)
			}
			_, ids := lim.snapshot()
			require.Len(t, ids, 3)
			assert.Equal(t, ids[0], ids[1], "same group")
			assert.NotEqual(t, ids[0], ids[2], "different group")
		})
	}
}

func TestKeysAreUnambiguous(t *testing.T) {
	lim := newFake()
	rule := func(name string) httpadapter.Rule {
		return httpadapter.Rule{Name: name, GroupBy: []string{"header:A", "header:B"}, Policy: perMinute(100)}
	}
	m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{rule("r1"), rule("r2")}})
	h := m.Handler(&okHandler{})
	serve(h, req("/", header("A", "x"), header("B", "yz")))
	serve(h, req("/", header("A", "xy"), header("B", "z")))
	serve(h, req("/", header("A", "x:1:y")))
	serve(h, req("/", header("A", "x"), header("B", "1:y")))
	_, ids := lim.snapshot()
	require.Len(t, ids, 8)
	seen := map[string]bool{}
	for _, id := range ids {
		assert.False(t, seen[id], "key %q given twice", id)
		seen[id] = true
	}
}

func TestLongKeysAreHashed(t *testing.T) {
	lim := newFake()
	m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{{
		Name: "r", GroupBy: []string{"header:A"}, Policy: perMinute(1),
	}}})
	h := m.Handler(&okHandler{})
	long := string(make([]byte, 2*actorlimit.MaxIDLength))
	assert.Equal(t, http.StatusOK, serve(h, req("/", header("A", long))).Code)
	assert.Equal(t, http.StatusTooManyRequests, serve(h, req("/", header("A", long))).Code)
	assert.Equal(t, http.StatusOK, serve(h, req("/", header("A", long+"x"))).Code)
	_, ids := lim.snapshot()
	for _, id := range ids {
		assert.LessOrEqual(t, len(id), actorlimit.MaxIDLength)
	}
}

func TestBlock(t *testing.T) {
	lim := newFake()
	lim.Retry = map[string]time.Duration{"5:login": 1500 * time.Millisecond}
	m := newMW(t, lim, httpadapter.Config{LegacyHeaders: true, Rules: []httpadapter.Rule{
		{Name: "login", Policy: perMinute(1), Action: httpadapter.Action{Status: http.StatusRequestEntityTooLarge, Body: "no"}},
		{Name: "all", Policy: perMinute(5)},
	}})
	next := &okHandler{}
	h := m.Handler(next)

	w := serve(h, req("/"))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `"login";q=1;w=60, "all";q=5;w=60`, w.Header().Get("RateLimit-Policy"))
	assert.Equal(t, `"login";r=0;t=30, "all";r=4;t=30`, w.Header().Get("RateLimit"))
	assert.Equal(t, "1", w.Header().Get("X-RateLimit-Limit"))
	assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"))
	assert.Equal(t, "30", w.Header().Get("X-RateLimit-Reset"))
	assert.Empty(t, w.Header().Get("Retry-After"))

	w = serve(h, req("/"))
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Equal(t, "no", w.Body.String())
	assert.Equal(t, "2", w.Header().Get("Retry-After"), "1.5 s rounds up")
	assert.Equal(t, `"login";r=0;t=30, "all";r=3;t=30`, w.Header().Get("RateLimit"))
	assert.Equal(t, 1, next.calls)
}

func TestBlockDefaults(t *testing.T) {
	m := newMW(t, newFake(), httpadapter.Config{Rules: []httpadapter.Rule{{Name: "r", Policy: perMinute(0)}}})
	w := serve(m.Handler(&okHandler{}), req("/"))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, httpadapter.DefaultBlockBody, w.Body.String())
	assert.Equal(t, "30", w.Header().Get("Retry-After"))
	assert.Equal(t, httpadapter.DefaultContentType, w.Header().Get("Content-Type"))
	assert.Empty(t, w.Header().Get("X-RateLimit-Limit"), "legacy headers are off by default")
}

func TestStrictestBlockAnswers(t *testing.T) {
	lim := newFake()
	lim.Retry = map[string]time.Duration{"5:short": time.Second, "4:long": time.Hour}
	m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{
		{Name: "short", Policy: perMinute(0), Action: httpadapter.Action{Body: "short"}},
		{Name: "long", Policy: perMinute(0), Action: httpadapter.Action{Body: "long"}},
		{Name: "watch", Policy: perMinute(0), Action: httpadapter.Action{Kind: httpadapter.Monitor}},
	}})
	w := serve(m.Handler(&okHandler{}), req("/"))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "long", w.Body.String())
	assert.Equal(t, "3600", w.Header().Get("Retry-After"))
	calls, ids := lim.snapshot()
	assert.Equal(t, 1, calls, "all matching rules in one call")
	assert.Len(t, ids, 3)
}

func TestMonitor(t *testing.T) {
	lim := newFake()
	m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{{
		Name: "watch", Policy: perMinute(1), Action: httpadapter.Action{Kind: httpadapter.Monitor},
	}}})
	var got [][]httpadapter.MonitorDecision
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, httpadapter.MonitorDecisions(r.Context()))
	}))
	r := req("/")
	ctx := r.Context()
	for range 3 {
		w := serve(h, r)
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Empty(t, w.Header().Get("RateLimit"), "a monitor rule shows no header")
	}
	assert.Equal(t, ctx, r.Context(), "the caller's request is not changed")
	require.Len(t, got, 3)
	assert.True(t, got[0][0].Result.Allowed)
	assert.False(t, got[1][0].Result.Allowed)
	assert.Equal(t, "watch", got[2][0].Rule)
	assert.Nil(t, httpadapter.MonitorDecisions(ctx))
	st := m.Stats().Rules[0]
	assert.Equal(t, httpadapter.RuleStats{Rule: "watch", Matched: 3, Allowed: 1, Monitored: 2}, st)
}

func TestShadow(t *testing.T) {
	lim := newFake()
	m := newMW(t, lim, httpadapter.Config{LegacyHeaders: true, Rules: []httpadapter.Rule{
		{Name: "spam", Policy: perMinute(1), Action: httpadapter.Action{
			Kind: httpadapter.Shadow, Status: http.StatusAccepted, Body: `{"sent":true}`, ContentType: "application/json"}},
		{Name: "block", Policy: perMinute(1)},
	}})
	next := &okHandler{}
	h := m.Handler(next)
	assert.Equal(t, http.StatusOK, serve(h, req("/")).Code)
	w := serve(h, req("/"))
	assert.Equal(t, http.StatusAccepted, w.Code, "shadow wins over block")
	assert.Equal(t, `{"sent":true}`, w.Body.String())
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Empty(t, w.Header().Values("Retry-After"), "a success has no Retry-After")
	assert.Empty(t, w.Header().Values("X-Content-Type-Options"), "nor does the middleware add nosniff to it")
	assert.Equal(t, `"block";r=0;t=30`, w.Header().Get("RateLimit"), "the block rule's fields, as on any response it matched")
	assert.Equal(t, 1, next.calls, "the next handler is not called for a shadowed request")
	s := m.Stats()
	assert.Equal(t, []httpadapter.RuleStats{
		{Rule: "spam", Matched: 2, Allowed: 1, Shadowed: 1},
		{Rule: "block", Matched: 2, Allowed: 1, Blocked: 1},
	}, s.Rules)
}

func TestLimiterFailure(t *testing.T) {
	boom := errors.New("boom")
	for _, closed := range []bool{false, true} {
		lim := newFake()
		lim.setErr(boom)
		m := newMW(t, lim, httpadapter.Config{FailClosed: closed, Rules: []httpadapter.Rule{
			{Name: "r", Policy: perMinute(10)},
		}})
		w := serve(m.Handler(&okHandler{}), req("/"))
		want := http.StatusOK
		if closed {
			want = http.StatusServiceUnavailable
		}
		assert.Equal(t, want, w.Code, "closed=%v", closed)
		s := m.Stats()
		assert.Equal(t, uint64(1), s.LimiterErrors)
		assert.Equal(t, httpadapter.RuleStats{Rule: "r", Matched: 1, Errors: 1}, s.Rules[0])
	}
}

func TestFailClosedNeverBlocksForMonitor(t *testing.T) {
	lim := newFake()
	lim.setErr(errors.New("boom"))
	m := newMW(t, lim, httpadapter.Config{FailClosed: true, Rules: []httpadapter.Rule{
		{Name: "r", Policy: perMinute(10), Action: httpadapter.Action{Kind: httpadapter.Monitor}},
	}})
	assert.Equal(t, http.StatusOK, serve(m.Handler(&okHandler{}), req("/")).Code)
}

func TestUnknownIP(t *testing.T) {
	rules := []httpadapter.Rule{{Name: "r", GroupBy: []string{"ip"}, Policy: perMinute(1)}}
	t.Run("group", func(t *testing.T) {
		lim := newFake()
		h := newMW(t, lim, httpadapter.Config{Rules: rules}).Handler(&okHandler{})
		assert.Equal(t, http.StatusOK, serve(h, req("/", remote("@a"))).Code)
		assert.Equal(t, http.StatusTooManyRequests, serve(h, req("/", remote("@b"))).Code, "unknown clients share one group")
	})
	t.Run("reject", func(t *testing.T) {
		lim := newFake()
		m := newMW(t, lim, httpadapter.Config{Rules: rules, UnknownIP: httpadapter.UnknownIPReject})
		h := m.Handler(&okHandler{})
		assert.Equal(t, http.StatusBadRequest, serve(h, req("/", remote("@a"))).Code)
		assert.Equal(t, uint64(1), m.Stats().UnknownIPRejected)
		calls, _ := lim.snapshot()
		assert.Zero(t, calls)
		assert.Equal(t, http.StatusOK, serve(h, req("/")).Code)
	})
}

func TestSpoofedForwardedForChangesNothing(t *testing.T) {
	for _, hdr := range []string{httpadapter.XForwardedFor, httpadapter.Forwarded, httpadapter.XRealIP} {
		t.Run(hdr, func(t *testing.T) {
			lim := newFake()
			m := newMW(t, lim, httpadapter.Config{
				TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
				ClientIPHeader: hdr,
				Rules:          []httpadapter.Rule{{Name: "r", GroupBy: []string{"ip"}, Policy: perMinute(1)}},
			})
			h := m.Handler(&okHandler{})
			spoof := map[string]string{
				httpadapter.XForwardedFor: "198.51.100.7",
				httpadapter.Forwarded:     "for=198.51.100.7",
				httpadapter.XRealIP:       "198.51.100.7",
			}[hdr]
			assert.Equal(t, http.StatusOK, serve(h, req("/")).Code)
			for i := range 3 {
				r := req("/", header(hdr, spoof+string(rune('0'+i))))
				assert.Equal(t, http.StatusTooManyRequests, serve(h, r).Code, "an untrusted peer's header is ignored")
			}
			_, ids := lim.snapshot()
			for _, id := range ids {
				assert.Equal(t, ids[0], id)
			}
		})
	}
}

func TestTrustedProxy(t *testing.T) {
	lim := newFake()
	m := newMW(t, lim, httpadapter.Config{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Rules:          []httpadapter.Rule{{Name: "r", GroupBy: []string{"ip"}, Policy: perMinute(1)}},
	})
	h := m.Handler(&okHandler{})
	viaProxy := func(xff string) *http.Request { return req("/", remote("10.0.0.1:80"), header("X-Forwarded-For", xff)) }
	assert.Equal(t, http.StatusOK, serve(h, viaProxy("1.1.1.1, 198.51.100.7, 10.0.0.2")).Code)
	assert.Equal(t, http.StatusTooManyRequests, serve(h, viaProxy("6.6.6.6, 198.51.100.7")).Code, "the client's own entries left of the first untrusted hop are ignored")
	assert.Equal(t, http.StatusOK, serve(h, viaProxy("198.51.100.8")).Code)
}

func TestIPv6Grouping(t *testing.T) {
	for _, tt := range []struct {
		bits      int
		same, oth string
	}{
		{0, "[2001:db8:1:2:ffff::1]:1", "[2001:db8:1:3::1]:1"},
		{48, "[2001:db8:1:ffff::1]:1", "[2001:db8:2::1]:1"},
		{128, "[2001:db8:1:2::1]:2", "[2001:db8:1:2::2]:1"},
	} {
		lim := newFake()
		m := newMW(t, lim, httpadapter.Config{IPv6Prefix: tt.bits, Rules: []httpadapter.Rule{
			{Name: "r", GroupBy: []string{"ip"}, Policy: perMinute(1)},
		}})
		h := m.Handler(&okHandler{})
		assert.Equal(t, http.StatusOK, serve(h, req("/", remote("[2001:db8:1:2::1]:1"))).Code)
		assert.Equal(t, http.StatusTooManyRequests, serve(h, req("/", remote(tt.same))).Code, "/%d: same group", tt.bits)
		assert.Equal(t, http.StatusOK, serve(h, req("/", remote(tt.oth))).Code, "/%d: other group", tt.bits)
	}
}

func TestSetRulesKeepsCounters(t *testing.T) {
	lim := newFake()
	keep := httpadapter.Rule{Name: "keep", GroupBy: []string{"ip"}, Policy: perMinute(2)}
	change := httpadapter.Rule{Name: "change", GroupBy: []string{"ip"}, Policy: perMinute(2)}
	m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{keep, change}})
	h := m.Handler(&okHandler{})
	serve(h, req("/"))
	serve(h, req("/"))

	change.Policy.Limit = 3
	require.NoError(t, m.SetRules([]httpadapter.Rule{keep, change}))
	w := serve(h, req("/"))
	assert.Equal(t, http.StatusTooManyRequests, w.Code, "keep is still at its count")
	assert.Equal(t, `"keep";r=0;t=30, "change";r=2;t=30`, w.Header().Get("RateLimit"), "change starts afresh")
	s := m.Stats()
	assert.Equal(t, uint64(3), s.Rules[0].Matched, "stats go on by name")

	err := m.SetRules([]httpadapter.Rule{keep, keep})
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `rule "keep" (rules[1]): name`)
	assert.Len(t, m.Stats().Rules, 2, "a failed SetRules changes nothing")
}

func TestInvalidRules(t *testing.T) {
	tests := []struct {
		rule httpadapter.Rule
		want string
	}{
		{httpadapter.Rule{Name: "a b", Policy: perMinute(1)}, `rule "a b" (rules[0]): name`},
		{httpadapter.Rule{Name: "r", Policy: actorlimit.Policy{Limit: -1, Period: time.Second}}, "policy: limit is -1"},
		{httpadapter.Rule{Name: "r", Policy: actorlimit.Policy{Limit: 1}}, "policy: period is 0s"},
		{httpadapter.Rule{Name: "r", Policy: actorlimit.Policy{Limit: 1, Period: 1500 * time.Microsecond}}, "policy: period 1.5ms"},
		{httpadapter.Rule{Name: "r", Policy: actorlimit.Policy{Limit: 1, Period: time.Second, Burst: -1}}, "policy: burst is -1"},
		{httpadapter.Rule{Name: "r", Policy: perMinute(1), GroupBy: []string{"ip", "ip"}}, "group_by[1]"},
		{httpadapter.Rule{Name: "r", Policy: perMinute(1), GroupBy: []string{"user"}}, "group_by[0]"},
		{httpadapter.Rule{Name: "r", Policy: perMinute(1), When: []httpadapter.Condition{httpadapter.PathGlob("[")}}, "when[0].path.glob"},
		{httpadapter.Rule{Name: "r", Policy: perMinute(1), When: []httpadapter.Condition{httpadapter.CountryIn("RU")}}, `rule "r" (rules[0]) uses a country condition (when[0]) but this server has no country lookup (Config.Country is nil)`},
		{httpadapter.Rule{Name: "r", Policy: perMinute(1), When: []httpadapter.Condition{{}}}, "when[0].condition: a zero Condition"},
		{httpadapter.Rule{Name: "r", Policy: perMinute(1), Action: httpadapter.Action{Status: 200}}, "status"},
		{httpadapter.Rule{Name: "r", Policy: perMinute(1), Action: httpadapter.Action{Kind: httpadapter.Shadow, Status: 429}}, "status"},
	}
	for _, tt := range tests {
		_, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{tt.rule}})
		require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
		assert.Contains(t, err.Error(), tt.want)
	}
}

func TestNoRulesNoCall(t *testing.T) {
	lim := newFake()
	m := newMW(t, lim, httpadapter.Config{AllowNoRules: true})
	next := &okHandler{}
	assert.Equal(t, http.StatusOK, serve(m.Handler(next), req("/")).Code)
	calls, _ := lim.snapshot()
	assert.Zero(t, calls)
	assert.Equal(t, 1, next.calls)
}

// allowAll allows everything and allocates nothing.
type allowAll struct{}

func (allowAll) HitMany(_ context.Context, hits []actorlimit.HitRequest, res []actorlimit.Result) error {
	for i := range hits {
		res[i] = actorlimit.Result{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Second}
	}
	return nil
}

func TestHotPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	rules := []httpadapter.Rule{
		{Name: "a", GroupBy: []string{"ip", "host", "path"}, Policy: perMinute(10)},
		{Name: "b", When: []httpadapter.Condition{httpadapter.PathPrefix("/api/")}, GroupBy: []string{"header:User-Agent", "query:u", "cookie:s", "header:Authorization"}, Policy: perMinute(10)},
		{Name: "c", When: []httpadapter.Condition{httpadapter.Method("GET")}, GroupBy: []string{"method"}, Policy: perMinute(10)},
		{Name: "skip", When: []httpadapter.Condition{httpadapter.PathExact("/other")}, Policy: perMinute(10)},
	}
	m := newMW(t, allowAll{}, httpadapter.Config{Rules: rules, LegacyHeaders: true})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := req("/api/x?u=1", header("User-Agent", "t"), header("Cookie", "s=1"), header("Authorization", "Bearer x"))
	hdr := http.Header{}
	w := &discardWriter{h: hdr}
	allocs := testing.AllocsPerRun(200, func() {
		clear(hdr)
		h.ServeHTTP(w, r)
	})
	assert.LessOrEqual(t, allocs, 3.0, "one string for the keys, one string and one slice for the headers; hashing secret values (the cookie, Authorization) allocates nothing")
	miss := req("/nothing", method("POST"))
	m2 := newMW(t, allowAll{}, httpadapter.Config{Rules: rules[1:]})
	h2 := m2.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	assert.Zero(t, testing.AllocsPerRun(200, func() { h2.ServeHTTP(w, miss) }), "no rule matched: nothing allocated")
}

func TestNilURL(t *testing.T) {
	m := newMW(t, newFake(), httpadapter.Config{Rules: []httpadapter.Rule{{
		Name: "r", When: []httpadapter.Condition{httpadapter.PathPrefix("/")}, GroupBy: []string{"path", "query:q"}, Policy: perMinute(0),
	}}})
	r := &http.Request{Method: http.MethodGet, RemoteAddr: "192.0.2.1:1", Header: http.Header{}}
	assert.Equal(t, http.StatusTooManyRequests, serve(m.Handler(&okHandler{}), r).Code)
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		lim  httpadapter.Limiter
		cfg  httpadapter.Config
		want string
	}{
		{nil, httpadapter.Config{}, "limiter is nil"},
		{newFake(), httpadapter.Config{IPv6Prefix: 129}, "IPv6Prefix"},
		{newFake(), httpadapter.Config{IPv4Prefix: -1}, "IPv4Prefix"},
		{newFake(), httpadapter.Config{UnknownIP: 7}, "UnknownIP"},
		{newFake(), httpadapter.Config{Timeout: -time.Second}, "Timeout"},
		{newFake(), httpadapter.Config{TrustedProxies: []netip.Prefix{{}}}, "TrustedProxies[0]"},
		{newFake(), httpadapter.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, ClientIPHeader: "True-Client-IP"}, "ClientIPHeader"},
	}
	for _, tt := range tests {
		_, err := httpadapter.New(tt.lim, tt.cfg)
		require.ErrorIs(t, err, httpadapter.ErrInvalidConfig, tt.want)
		assert.Contains(t, err.Error(), tt.want)
	}
}

// waitLimiter answers only when the call's context ends.
type waitLimiter struct{}

func (waitLimiter) HitMany(ctx context.Context, _ []actorlimit.HitRequest, _ []actorlimit.Result) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestTimeout(t *testing.T) {
	m := newMW(t, waitLimiter{}, httpadapter.Config{Timeout: time.Millisecond, FailClosed: true, Rules: []httpadapter.Rule{
		{Name: "r", Policy: perMinute(1)},
	}})
	assert.Equal(t, http.StatusServiceUnavailable, serve(m.Handler(&okHandler{}), req("/")).Code)
	assert.Equal(t, uint64(1), m.Stats().LimiterErrors)
}

// TestSetRulesWhileServing swaps rule sets while requests are served; run
// with -race.
func TestSetRulesWhileServing(t *testing.T) {
	lim := newFake()
	a := []httpadapter.Rule{{Name: "a", GroupBy: []string{"ip"}, Policy: perMinute(1000)}}
	b := []httpadapter.Rule{{Name: "a", GroupBy: []string{"ip"}, Policy: perMinute(1000)}, {Name: "b", Policy: perMinute(1000)}}
	m := newMW(t, lim, httpadapter.Config{Rules: a})
	h := m.Handler(&okHandler{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100 {
			rules := a
			if i%2 == 0 {
				rules = b
			}
			assert.NoError(t, m.SetRules(rules))
		}
	}()
	const requests = 300
	for range requests {
		assert.Equal(t, http.StatusOK, serve(h, req("/")).Code)
	}
	<-done
	assert.Equal(t, uint64(requests), m.Stats().Rules[0].Matched, "rule a kept its statistics across every swap")
}
