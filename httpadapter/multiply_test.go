package httpadapter_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// TestHostSpellingsShareACounter: the spellings of one host (case, a port,
// a trailing dot) make one group, so a client cannot multiply its limit
// by writing its Host differently.
func TestHostSpellingsShareACounter(t *testing.T) {
	tests := []struct {
		name  string
		hosts []string
	}{
		{"name", []string{"example.com", "EXAMPLE.com", "example.com:80", "example.com:8080", "example.com.", "Example.COM..:443"}},
		{"ipv6", []string{"[2001:db8::1]", "[2001:db8::1]:443", "[2001:DB8::1]:80"}},
		{"ipv4", []string{"192.0.2.1", "192.0.2.1:80"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			m, err := httpadapter.New(f, httpadapter.Config{Rules: []httpadapter.Rule{{
				Name: "r", GroupBy: []string{"host"}, Policy: actorlimit.Policy{Limit: 100, Period: 60e9}}}})
			require.NoError(t, err)
			for _, h := range tt.hosts {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Host = h
				m.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
			}
			_, ids := f.snapshot()
			require.Len(t, ids, len(tt.hosts))
			for _, id := range ids {
				assert.Equal(t, ids[0], id)
			}
		})
	}
}

// TestGroupByHeaderHostRefused: header:Host is always empty (Go moves it to
// Request.Host), so it would silently be one counter for everyone: it is
// refused, in Go and in a file, with a message pointing to host.
func TestGroupByHeaderHostRefused(t *testing.T) {
	const want = `"header:host": Go moves the Host header to Request.Host, so it would always be empty (one counter for every client): group by "host" instead`
	_, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{{
		Name: "r", GroupBy: []string{"ip", "header:host"}, Policy: actorlimit.Policy{Limit: 1, Period: 60e9}}}})
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "group_by[1]: "+want)

	_, err = httpadapter.ParseRules([]byte("rules:\n  - name: r\n    group_by: [header:host]\n    policy: {limit: 1, period: 1m}\n"))
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `line 2: rule "r": group_by[0]: `+want)
}

// TestGetRuleCoversHead: a rule for GET counts HEAD requests too, which
// net/http serves with the GET handler; a rule for HEAD alone does not
// take GET, nor one for POST HEAD.
func TestGetRuleCoversHead(t *testing.T) {
	tests := []struct {
		methods []string
		req     string
		matched bool
	}{
		{[]string{http.MethodGet}, http.MethodHead, true},
		{[]string{http.MethodGet}, http.MethodGet, true},
		{[]string{http.MethodHead}, http.MethodGet, false},
		{[]string{http.MethodPost}, http.MethodHead, false},
	}
	for _, tt := range tests {
		f := newFake()
		m, err := httpadapter.New(f, httpadapter.Config{Rules: []httpadapter.Rule{{
			Name: "r", When: []httpadapter.Condition{httpadapter.Method(tt.methods...)},
			Policy: actorlimit.Policy{Limit: 1, Period: 60e9}}}})
		require.NoError(t, err)
		w := httptest.NewRecorder()
		m.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(tt.req, "/", nil))
		w = httptest.NewRecorder()
		m.Handler(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(tt.req, "/", nil))
		assert.Equal(t, tt.matched, w.Code == http.StatusTooManyRequests, "rule %v, two %s requests: %d", tt.methods, tt.req, w.Code)
		assert.Equal(t, uint64(2*b2i(tt.matched)), m.Stats().Rules[0].Matched, "rule %v, %s", tt.methods, tt.req)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
